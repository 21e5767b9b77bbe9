"""Digest reads: a user's effective e-mail frequency per type, and the unread items of claimed runs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, time

import sqlalchemy as sa

from app.extensions import db

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
ITEMS_SQL = sa.text(
    """
SELECT r.id AS run_id, n.id, n.type, t.label AS type_label, n.title, n.body, n.link_path, n.created_at
FROM digest_runs r
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


def claimed_runs(ids: Iterable[int]) -> list[Run]:
    """Return the claimed (sending) runs of ids with their unread items, in two statements."""
    ids = sorted(set(ids))
    if not ids:
        return []
    runs = {row.id: Run(**row._mapping) for row in db.session.execute(RUNS_SQL, {"ids": ids})}
    for row in db.session.execute(ITEMS_SQL, {"ids": list(runs)}):
        values = dict(row._mapping)
        runs[values.pop("run_id")].items.append(Item(**values))
    return list(runs.values())
