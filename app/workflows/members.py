"""The test run's reads: the member a test run is for, with their preferences and where each channel can reach them."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.preferences.queries import channels_on
from app.workflows.simulate import Member

# What the test run needs to know of a member: the channels that have somewhere to go (the born-skip rules of
# each channel, app/delivery/channels; in-app always does).
MEMBER_SQL = sa.text(
    """
SELECT u.id, u.external_id, u.locale, u.timezone, u.quiet_hours_start, u.quiet_hours_end, u.properties,
       coalesce(u.email, '') <> '' AND NOT EXISTS (
         SELECT 1 FROM email_suppressions s WHERE s.address = lower(btrim(u.email))) AS email,
       push_reachable(u.id) AS push, sms_reachable(u.id) AS sms,
       EXISTS (SELECT 1 FROM chat_accounts a WHERE a.user_id = u.id AND a.invalidated_at IS NULL) AS chat
FROM users u
WHERE u.external_id = :external_id
"""
)


def member(external_id: str, type_: str):
    """The test run's Member for the member with this external id (None: no such member)."""
    row = db.session.execute(MEMBER_SQL, {"external_id": external_id}).mappings().one_or_none()
    if row is None:
        return None
    reachable = {"in_app"} | {name for name in ("email", "push", "sms", "chat") if row[name]}
    return Member(
        external_id=row["external_id"],
        locale=row["locale"],
        timezone=row["timezone"],
        quiet_hours_start=row["quiet_hours_start"],
        quiet_hours_end=row["quiet_hours_end"],
        channels_on=frozenset(channels_on([row["id"]], type_).get(row["id"], set())),
        reachable=frozenset(reachable),
        properties=row["properties"] or {},
    )
