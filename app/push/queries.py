"""Push reads: the active subscriptions of a batch's recipients, in one statement."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.providers.webpush import PushTarget

TARGETS_SQL = sa.text(
    """
SELECT user_id, endpoint, p256dh, auth
FROM push_subscriptions
WHERE user_id = ANY(CAST(:user_ids AS bigint[])) AND invalidated_at IS NULL AND disabled_at IS NULL
ORDER BY user_id, id
"""
)


def active_targets(user_ids: set[int]) -> dict[int, tuple[PushTarget, ...]]:
    """{user_id: the user's active subscriptions} for user_ids (users without any are left out)."""
    if not user_ids:
        return {}
    targets: dict[int, list[PushTarget]] = {}
    for row in db.session.execute(TARGETS_SQL, {"user_ids": sorted(user_ids)}):
        targets.setdefault(row.user_id, []).append(PushTarget(row.endpoint, row.p256dh, row.auth))
    return {user_id: tuple(items) for user_id, items in targets.items()}
