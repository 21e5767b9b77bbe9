"""Digest reads: a user's effective e-mail frequency per type, and the unread items of claimed runs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, time

import sqlalchemy as sa
from flask import current_app

from app.extensions import db
from app.locales import variant_sql
from app.tenants import queries as tenant_queries

DEFAULT_DIGEST_TIME = time(9, 0)


# A (user, type)'s e-mail frequency: mandatory types are always immediate; else the user's deviation,
# else the type's default. Needs `t` (notification_types) and the user id expression.
def frequency_sql(user_id: str) -> str:
    """The SQL of the effective e-mail frequency of type `t` for the user whose id is the expression user_id."""
    return f"""CASE WHEN t.mandatory THEN 'immediate' ELSE coalesce(
      (SELECT dp.frequency FROM digest_preferences dp WHERE dp.user_id = {user_id} AND dp.type = t.type),
      t.email_frequency) END"""


FREQUENCIES_SQL = sa.text(
    f"""
SELECT t.type, {frequency_sql(":user_id")} AS frequency, t.email_frequency AS type_default
FROM notification_types t
ORDER BY t.type
"""
)


def frequencies(user_id: int) -> dict[str, tuple[str, str]]:
    """Return {type: (effective frequency, the type's default)} for the user, one statement."""
    rows = db.session.execute(FREQUENCIES_SQL, {"user_id": user_id})
    return {row.type: (row.frequency, row.type_default) for row in rows}


# A run's items: the e-mails it took that are still unread. A row the user cannot see (in-app off) is
# born read, so for it "unread" means "not snoozed"; muted rows never reach a digest (reason 'muted').
# A type's label in the member's language (issue 33): the member's locale, or DEFAULT_LOCALE if they chose none
# (`t` the type, `u` the member; the e-mail batch reads it too).
TYPE_LABEL_SQL = variant_sql(
    "t.locales", "label", "t.label", "coalesce(lower(u.locale), CAST(:default_locale AS text))"
)

ITEMS_SQL = sa.text(
    f"""
SELECT r.id AS run_id, n.id, n.type, {TYPE_LABEL_SQL} AS type_label, n.title, n.body, n.link_path, n.created_at,
       n.tenant_id
FROM digest_runs r
JOIN users u ON u.id = r.user_id
JOIN notification_deliveries d ON d.digest_id = r.id AND d.skip_reason = 'digested'
JOIN notifications n ON n.id = d.notification_id
JOIN notification_types t ON t.type = n.type
WHERE r.id = ANY(CAST(:ids AS bigint[]))
  AND (n.read_at IS NULL OR (NOT n.in_app AND n.snoozed_until IS NULL))
ORDER BY r.id, t.label, n.type, n.created_at DESC, n.id DESC
"""
)

RUNS_SQL = sa.text(
    """
SELECT r.id, r.kind, r.period_start, r.ledger_id, r.attempts, r.user_id,
       u.email, u.display_name, u.locale, u.timezone, u.quiet_hours_start, u.quiet_hours_end,
       EXISTS (SELECT 1 FROM email_suppressions s WHERE s.address = lower(btrim(u.email))) AS suppressed
FROM digest_runs r
JOIN users u ON u.id = r.user_id
WHERE r.id = ANY(CAST(:ids AS bigint[])) AND r.status = 'sending'
ORDER BY r.id
"""
)


@dataclass(frozen=True)
class Item:
    """One notification in a digest."""

    id: int
    type: str
    type_label: str
    title: str
    body: str
    link_path: str | None
    created_at: datetime
    tenant_id: int | None = None  # the notification's tenant (issue 32)


@dataclass
class Run:
    """A claimed digest run: its recipient and its unread items."""

    id: int
    kind: str
    period_start: datetime
    ledger_id: int
    attempts: int
    user_id: int
    email: str | None
    display_name: str
    locale: str
    timezone: str
    quiet_hours_start: time | None
    quiet_hours_end: time | None
    suppressed: bool
    items: list[Item] = field(default_factory=list)
    # The branding of the one tenant all its items share (issue 32; see claimed_runs), else None: the default look.
    tenant_name: str | None = None
    tenant_logo_url: str | None = None
    tenant_color: str | None = None
    tenant_sender_name: str | None = None
    tenant_reply_to: str | None = None


def claimed_runs(ids: Iterable[int]) -> list[Run]:
    """Return the claimed (sending) runs of ids with their unread items and branding, in at most three statements.

    A digest is one per member, kind and period, whatever the tenants of its items (its run is unique on
    (user_id, kind, period_start), and the sweeper opens runs set-based without looking at tenants). So a
    digest whose items all belong to one tenant carries that tenant's branding (logo, colour, sender name,
    reply-to) like each of its e-mails would; a digest mixing tenants, or tenants and none, keeps the default
    look, since no one tenant's name may stand on another's notifications. The items decided on are the ones
    sent: those still unread when the digest goes out.
    """
    ids = sorted(set(ids))
    if not ids:
        return []
    runs = {row.id: Run(**row._mapping) for row in db.session.execute(RUNS_SQL, {"ids": ids})}
    params = {"ids": list(runs), "default_locale": current_app.config["DEFAULT_LOCALE"].lower()}
    for row in db.session.execute(ITEMS_SQL, params):
        values = dict(row._mapping)
        runs[values.pop("run_id")].items.append(Item(**values))
    single = {}  # run id → the one tenant of all its items
    for run in runs.values():
        tenants = {item.tenant_id for item in run.items}
        if len(tenants) == 1 and None not in tenants:
            single[run.id] = tenants.pop()
    brandings = tenant_queries.brandings(list(single.values()))
    for run_id, tenant_id in single.items():
        if (brand := brandings.get(tenant_id)) is not None:
            run = runs[run_id]
            run.tenant_name, run.tenant_logo_url, run.tenant_color = brand.name, brand.logo_url, brand.primary_color
            run.tenant_sender_name, run.tenant_reply_to = brand.email_sender_name, brand.reply_to
    return list(runs.values())
