"""Message template writes: save (keeping the previous wording as a version) and restore a version; audited."""

from __future__ import annotations

from flask_babel import gettext

from app.audit import service as audit
from app.clock import db_now
from app.delivery.channels import channel_for, template_channels
from app.extensions import db
from app.locales import normalize_locale
from app.message_templates import queries
from app.models import MessageTemplate, TemplateVersion
from app.notification_types import queries as type_queries
from app.refusal import Refused

# Every part a template may have; a channel keeps those it names (Channel.template_parts), the rest stay ''.
PARTS = (
    "subject", "body_text", "body_html", "mobile_title", "mobile_subtitle", "mobile_body",
    "slack_blocks", "teams_card", "line_flex",
)  # fmt: skip
TEMPLATE_FIELDS = ("type", "channel", "locale", *PARTS)


def check_template_key(type_: str, channel: str, locale: str) -> str:
    """Validate (type, channel, locale) and return the normalized locale."""
    if type_queries.notification_type(type_) is None:
        raise Refused(gettext("There is no notification type %(type)s.", type=repr(type_)))
    names = [c.name for c in template_channels()]
    if channel not in names:
        raise Refused(gettext("The channel must be one of %(choices)s.", choices=", ".join(names)))
    return normalize_locale(locale)


def _keep_version(template: MessageTemplate) -> None:
    version = TemplateVersion(template_id=template.id, updated_by=template.updated_by)
    for part in PARTS:
        setattr(version, part, getattr(template, part))
    db.session.add(version)


class NeedsConfirmation(Refused):
    """The wording renders but would fail when sent (an SMS over the type's parts): the operator must confirm."""

    def __init__(self, warnings: list[str]) -> None:
        super().__init__(gettext("Not saved yet: %(warnings)s", warnings="; ".join(warnings)))
        self.warnings = warnings


def save_template(actor, type_: str, channel: str, locale: str, *, problems: list[str], warnings: list[str] = (),
                  confirmed: bool = False, **parts: str) -> MessageTemplate | None:  # fmt: skip
    """Create or update a template from its parts (subject=…, body_text=…, …), keeping the previous wording as
    a version; None if unchanged.

    `problems` are the preview's errors for this wording: a template that cannot render is refused.
    `warnings` say why its sends would fail (an SMS over the type's limit): saved only when `confirmed`, and the
    audit row keeps what was confirmed.
    """
    locale = check_template_key(type_, channel, locale)
    if problems:
        raise Refused(gettext("The template has errors and was not saved: %(problems)s", problems="; ".join(problems)))
    if warnings and not confirmed:
        raise NeedsConfirmation(list(warnings))
    kept = channel_for(channel).template_parts  # a part the channel has no use for is not kept
    values = {name: (parts.get(name) or "") if name in kept else "" for name in PARTS}
    if not any(values[name].strip() for name in ("subject", "body_text", "body_html")):
        raise Refused(gettext("A template needs at least a subject or a body."))
    template = queries.message_template(type_, channel, locale)
    if template is None:
        template = MessageTemplate(type=type_, channel=channel, locale=locale)
        db.session.add(template)
        before = None
    else:
        if all(getattr(template, name) == value for name, value in values.items()):
            return None
        before = audit.snapshot(template, TEMPLATE_FIELDS)
        _keep_version(template)
    for name, value in values.items():
        setattr(template, name, value)
    template.updated_by = getattr(actor, "id", None)
    template.updated_at = db_now()
    db.session.flush()
    after = audit.snapshot(template, TEMPLATE_FIELDS)
    if warnings:
        after = dict(after, confirmed_warnings=list(warnings))
    audit.record(actor, "template.save", "message_template", template.id, before=before, after=after)
    return template


def restore_template_version(actor, template_id: int, version_id: int) -> MessageTemplate:
    """Make a kept version current again (the current wording is kept as a version first)."""
    template = db.session.get(MessageTemplate, template_id, with_for_update=True)
    version = queries.template_version(template_id, version_id) if template else None
    if version is None:
        raise Refused(gettext("That template version no longer exists."))
    before = audit.snapshot(template, TEMPLATE_FIELDS)
    _keep_version(template)
    for part in PARTS:
        setattr(template, part, getattr(version, part))
    template.updated_by = getattr(actor, "id", None)
    template.updated_at = db_now()
    db.session.flush()
    after = dict(audit.snapshot(template, TEMPLATE_FIELDS), restored_version=version_id)
    audit.record(actor, "template.restore", "message_template", template.id, before=before, after=after)
    return template
