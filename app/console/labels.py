"""How the console names stored values (statuses, channels, roles…) in the operator's language.

The database keeps its values (failed, in_app, operator); only the words shown change. Every console
template gets these dicts (the blueprint's context processor), and views use them in messages.
"""

from __future__ import annotations

from flask_babel import lazy_gettext, lazy_pgettext

from app.campaigns import queries as campaign_queries
from app.delivery.channels import channel_labels

DELIVERY_STATUS_LABELS = {
    "pending": lazy_pgettext("delivery status", "pending"),
    "sending": lazy_pgettext("delivery status", "sending"),
    "sent": lazy_pgettext("delivery status", "sent"),
    "skipped": lazy_pgettext("delivery status", "skipped"),
    "failed": lazy_pgettext("delivery status", "failed"),
    "standby": lazy_pgettext("delivery status", "standby"),
    "passed": lazy_pgettext("delivery status", "passed over"),
}
CAMPAIGN_STATUS_LABELS = campaign_queries.STATUS_LABELS
OPERATION_STATUS_LABELS = {
    "queued": lazy_pgettext("bulk operation status", "queued"),
    "running": lazy_pgettext("bulk operation status", "running"),
    "done": lazy_pgettext("bulk operation status", "done"),
    "failed": lazy_pgettext("bulk operation status", "failed"),
}
PRIORITY_LABELS = {"high": lazy_gettext("high"), "default": lazy_gettext("default"), "low": lazy_gettext("low")}
ROLE_LABELS = {"member": lazy_gettext("member"), "operator": lazy_gettext("operator"), "admin": lazy_gettext("admin")}
REASON_LABELS = {
    "bounce": lazy_gettext("bounce"),
    "complaint": lazy_gettext("complaint"),
    "unsubscribe": lazy_gettext("unsubscribe"),
    "manual": lazy_gettext("manual"),
}
OUTCOME_LABELS = {
    "sent": lazy_pgettext("attempt outcome", "sent"),
    "transient": lazy_gettext("transient"),
    "permanent": lazy_gettext("permanent"),
    "deferred": lazy_gettext("deferred"),
    "expired": lazy_gettext("expired"),
    # what a provider reported afterwards (app/hooks)
    "delivered": lazy_gettext("delivered"),
    "bounced": lazy_gettext("bounced"),
    "soft_bounced": lazy_gettext("soft bounce"),
    "complained": lazy_gettext("complained"),
    "opened": lazy_gettext("opened"),
    "clicked": lazy_gettext("clicked"),
    # what an SMS provider reported afterwards (issue 29)
    "queued": lazy_pgettext("sms status", "queued"),
    "read": lazy_pgettext("sms status", "read"),
    "undelivered": lazy_pgettext("sms status", "undelivered"),
    "failed": lazy_pgettext("sms status", "failed"),
    "canceled": lazy_pgettext("sms status", "canceled"),
}
BREAKER_LABELS = {
    "closed": lazy_gettext("closed"),
    "open": lazy_gettext("open"),
    "half_open": lazy_gettext("half-open"),
}
KEY_STATE_LABELS = {"live": lazy_gettext("live"), "revoked": lazy_gettext("revoked")}
FORMAT_LABELS = {"plain": lazy_gettext("Plain text"), "markdown": lazy_gettext("Markdown")}
WORKER_STATE_LABELS = {
    "idle": lazy_gettext("idle"),
    "busy": lazy_gettext("busy"),
    "started": lazy_gettext("started"),
    "suspended": lazy_gettext("suspended"),
}


def label(labels: dict, value) -> str:
    """The word for value, or value itself when it has none."""
    return str(labels[value]) if value in labels else ("" if value is None else str(value))


def labelled(values, labels: dict) -> list[tuple[str, str]]:
    """(value, its word) for each value: a select's options."""
    return [(value, label(labels, value)) for value in values]


def type_choices(types) -> list[tuple[str, str]]:
    """(key, label) for each notification type: a select's options."""
    return [(t["type"], t["label"]) for t in types]


def tenant_choices(tenants, chosen: str = "") -> list[tuple[str, str]]:
    """(key, name) for each tenant: a select's options; a chosen key no tenant has any more is kept as itself."""
    options = [(t["key"], f"{t['name']} ({t['key']})") for t in tenants]
    return options if not chosen or any(key == chosen for key, _ in options) else [*options, (chosen, chosen)]


def console_labels() -> dict:
    """What console templates use to name stored values."""
    return {
        "status_labels": DELIVERY_STATUS_LABELS,
        "channel_names": channel_labels(),
        "campaign_status_labels": CAMPAIGN_STATUS_LABELS,
        "operation_status_labels": OPERATION_STATUS_LABELS,
        "priority_labels": PRIORITY_LABELS,
        "role_labels": ROLE_LABELS,
        "reason_labels": REASON_LABELS,
        "outcome_labels": OUTCOME_LABELS,
        "breaker_labels": BREAKER_LABELS,
        "key_state_labels": KEY_STATE_LABELS,
        "format_labels": FORMAT_LABELS,
        "worker_state_labels": WORKER_STATE_LABELS,
        "label": label,
        "labelled": labelled,
        "type_choices": type_choices,
        "tenant_choices": tenant_choices,
    }
