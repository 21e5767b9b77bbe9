"""Delivery reads: one statement loads a whole claimed batch with everything the re-check needs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time

import sqlalchemy as sa
from flask import current_app
from flask_babel import gettext

from app.digests.queries import TYPE_LABEL_SQL, frequency_sql
from app.extensions import db
from app.preferences.rules import EFFECTIVE_SEND_SQL, effective_send_sql, member_then_tenant_sql, tenant_prefs_sql

# A one-click unsubscribe target that is not a type: a digest ("digest:hourly"), which stops that kind of digest.
DIGEST_TARGET = "digest:"

# EFFECTIVE_SEND_SQL reads c.channel; the lateral alias makes it the delivery's own channel, so the
# preference re-check for the whole batch is this one statement. The notification's tenant's defaults count as at
# the ingest (app/preferences/rules.py TENANT_PREFS_SQL).
BATCH_SQL = sa.text(
    f"""
SELECT d.id, d.channel, d.attempts, d.locked_until, d.route_rank, d.created_at, d.reached,
       n.id AS notification_id, n.type, n.title, n.body, n.link_path, n.data, n.group_key, n.traceparent, n.actions,
       u.id AS user_id, u.email, u.display_name, u.locale, u.timezone, u.phone,
       (u.phone_verified_at IS NOT NULL AND u.phone_invalidated_at IS NULL) AS phone_usable, u.sms_opt_in,
       EXISTS (SELECT 1 FROM sms_suppressions ss WHERE ss.phone = u.phone) AS sms_suppressed,
       t.sms_max_segments, t.bypass_quiet_hours, coalesce(ws.wait_for_tab, t.push_when_offline) AS push_when_offline,
       u.quiet_hours_start, u.quiet_hours_end,
       {TYPE_LABEL_SQL} AS type_label, t.priority, t.mandatory,
       {effective_send_sql(enabled=member_then_tenant_sql("tp"))} AS allowed, n.tenant_id,
       tn.key AS tenant_key, tn.name AS tenant_name, tn.logo_url AS tenant_logo_url, tn.primary_color AS tenant_color,
       tn.email_sender_name AS tenant_sender_name, tn.reply_to AS tenant_reply_to,
       EXISTS (SELECT 1 FROM email_suppressions s WHERE s.address = lower(btrim(u.email))) AS suppressed,
       d.escalation, n.read_at IS NOT NULL AS read, coalesce(n.created_at <= ls.seen_at, false) AS seen,
       coalesce(ws.if_offline, t.skip_when_online) AS skip_when_online, t.cap_count, t.cap_window,
       ws.position AS step, ws.condition, ws.exits, u.external_id,
       CASE WHEN ws.condition IS NOT NULL OR cardinality(ws.exits) > 0 THEN u.properties END AS properties,
       CASE WHEN t.mandatory THEN 'immediate' ELSE coalesce(
         (SELECT dp.frequency FROM digest_preferences dp WHERE dp.user_id = u.id AND dp.type = t.type),
         t.email_frequency) END AS frequency
FROM notification_deliveries d
JOIN notifications n ON n.id = d.notification_id
JOIN users u ON u.id = n.user_id
JOIN notification_types t ON t.type = n.type
CROSS JOIN LATERAL (SELECT d.channel) AS c(channel)
LEFT JOIN notification_preferences p
       ON p.user_id = u.id AND p.type = t.type AND p.channel = d.channel
{tenant_prefs_sql("n.tenant_id", "tp")}
LEFT JOIN tenants tn ON tn.id = n.tenant_id
LEFT JOIN notification_last_seen ls ON ls.user_id = u.id
LEFT JOIN workflow_steps ws ON ws.id = d.workflow_step_id
WHERE d.id = ANY(CAST(:ids AS bigint[])) AND d.status = 'sending'
ORDER BY d.id
"""
)

TEMPLATES_SQL = sa.text(
    """
SELECT type, locale, subject, body_text, body_html, mobile_title, mobile_subtitle, mobile_body,
       slack_blocks, teams_card, line_flex
FROM message_templates
WHERE channel = :channel AND type = ANY(CAST(:types AS text[]))
"""
)


@dataclass(frozen=True)
class BatchRow:
    """One claimed delivery with its notification, recipient, type and re-check facts."""

    id: int
    channel: str
    attempts: int
    locked_until: datetime
    notification_id: int
    type: str
    title: str
    body: str
    link_path: str | None
    data: dict
    user_id: int
    email: str | None
    display_name: str
    locale: str
    timezone: str
    quiet_hours_start: time | None
    quiet_hours_end: time | None
    type_label: str
    priority: str
    mandatory: bool
    allowed: bool
    suppressed: bool
    escalation: str | None = None  # read | seen: sent only if the notification is still unread / unseen
    read: bool = False
    seen: bool = False
    skip_when_online: bool = False
    cap_count: int | None = None
    cap_window: int | None = None
    group_key: str | None = None  # phones collapse a thread's pushes into one (apns-collapse-id, collapse_key)
    frequency: str = "immediate"  # e-mail: immediate | hourly | daily (a digest takes it: app/digests)
    route_rank: int | None = None  # its place in a "first" chain (None: not in one)
    created_at: datetime | None = None
    expires_at: datetime | None = None  # a chain's row gives up here (DELIVERY_MAX_AGE) and hands over
    reached: list[str] | None = None  # push: the targets that took it already (a retry leaves them out)
    phone: str | None = None  # SMS: the member's number (E.164), whether it is verified and not refused,
    phone_usable: bool = False  # and whether they consent
    sms_opt_in: bool = False
    sms_suppressed: bool = False  # the number replied STOP (sms_suppressions), whatever the consent says
    sms_max_segments: int = 3
    bypass_quiet_hours: bool = False  # the type goes out during quiet hours on every channel (sign-in codes)
    push_when_offline: bool = False  # a push waits for the in-app frame's ack, and is skipped if a tab acked
    traceparent: str | None = None  # the notification's trace (app/telemetry.py): its send span joins it
    step: int | None = None  # the workflow step it carries out (its place, from 1), and that step's CEL condition
    condition: str | None = None  # and the exit conditions before it (app/workflows): checked when it is due
    exits: list[str] | None = None
    external_id: str | None = None
    properties: dict | None = None  # the member's properties, loaded only for a step with conditions
    tenant_id: int | None = None  # the notification's tenant (issue 32), and its branding for e-mail
    tenant_key: str | None = None
    tenant_name: str | None = None
    tenant_logo_url: str | None = None
    tenant_color: str | None = None
    tenant_sender_name: str | None = None
    tenant_reply_to: str | None = None
    actions: list | None = None  # the notification's action buttons (issue 33, app/actions/outbound.py)


@dataclass(frozen=True)
class Template:
    """The operator's wording for one (type, channel, locale)."""

    subject: str
    body_text: str
    body_html: str
    mobile_title: str = ""  # push: what phones show instead ('' falls back to subject / body_text)
    mobile_subtitle: str = ""
    mobile_body: str = ""
    slack_blocks: str = ""  # chat: optional rich JSON per service (app/delivery/rich_json.py); '' sends the text
    teams_card: str = ""
    line_flex: str = ""


def claimed_batch(ids: list[int]) -> list[BatchRow]:
    """Return the rows of ids that are claimed (status sending), in id order."""
    if not ids:
        return []
    params = {"ids": ids, "default_locale": current_app.config["DEFAULT_LOCALE"].lower()}
    return [BatchRow(**row._mapping) for row in db.session.execute(BATCH_SQL, params)]


def templates_for(channel: str, types: set[str]) -> dict[tuple[str, str], Template]:
    """Return {(type, locale): Template} for channel and types (one statement)."""
    if not types:
        return {}
    rows = db.session.execute(TEMPLATES_SQL, {"channel": channel, "types": sorted(types)})
    return {(r.type, r.locale): Template(r.subject, r.body_text, r.body_html, r.mobile_title, r.mobile_subtitle,
                                         r.mobile_body, r.slack_blocks, r.teams_card, r.line_flex)
            for r in rows}  # fmt: skip


UNSUBSCRIBE_INFO_SQL = sa.text(
    f"""
SELECT {TYPE_LABEL_SQL} AS label, t.mandatory, {EFFECTIVE_SEND_SQL} AS email_on
FROM users u
JOIN notification_types t ON t.type = :type
CROSS JOIN (VALUES ('email')) AS c(channel)
LEFT JOIN notification_preferences p ON p.user_id = u.id AND p.type = t.type AND p.channel = 'email'
WHERE u.id = :user_id
"""
)


@dataclass(frozen=True)
class UnsubscribeInfo:
    """What the unsubscribe page shows about one (user, type)."""

    label: str
    mandatory: bool
    email_on: bool


def unsubscribe_info(user_id: int, type_: str) -> UnsubscribeInfo | None:
    """Return the type's label, whether it is mandatory and whether e-mail is on; None if unknown.

    For a digest target, the digest's name and whether any type it carries still has e-mail on.
    """
    if type_.startswith(DIGEST_TARGET):
        kind = type_.removeprefix(DIGEST_TARGET)
        if kind not in DIGEST_LABELS:
            return None
        types = db.session.execute(DIGEST_TYPES_SQL, {"user_id": user_id, "kind": kind}).scalars().all()
        known = db.session.execute(sa.text("SELECT 1 FROM users WHERE id = :id"), {"id": user_id}).first()
        return UnsubscribeInfo(DIGEST_LABELS[kind](), False, bool(types)) if known else None
    params = {"user_id": user_id, "type": type_, "default_locale": current_app.config["DEFAULT_LOCALE"].lower()}
    row = db.session.execute(UNSUBSCRIBE_INFO_SQL, params).first()
    return UnsubscribeInfo(row.label, row.mandatory, row.email_on) if row else None


# The types a user's digest of one kind carries that still have e-mail on (mandatory types never wait for one).
DIGEST_TYPES_SQL = sa.text(
    f"""
SELECT t.type
FROM notification_types t
CROSS JOIN (VALUES ('email')) AS c(channel)
LEFT JOIN notification_preferences p ON p.user_id = :user_id AND p.type = t.type AND p.channel = 'email'
WHERE NOT t.mandatory AND {EFFECTIVE_SEND_SQL} AND {frequency_sql(":user_id")} = :kind
ORDER BY t.type
"""
)

DIGEST_LABELS = {"hourly": lambda: gettext("hourly digest"), "daily": lambda: gettext("daily digest")}


def digest_types(user_id: int, kind: str) -> list[str]:
    """The types with e-mail on that the user's digest of kind carries."""
    return list(db.session.execute(DIGEST_TYPES_SQL, {"user_id": user_id, "kind": kind}).scalars())
