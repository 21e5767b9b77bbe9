"""Set-based load data: users, notifications and pending e-mail deliveries in a few statements."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db

BULK_SQL = [
    """INSERT INTO notification_types (type, label, default_email, priority)
       VALUES (:type, 'Load test', true, 'default') ON CONFLICT (type) DO NOTHING""",
    """INSERT INTO users (email, display_name, external_id)
       SELECT :prefix || '-' || g || '@example.com', 'User ' || g, :prefix || '-' || g
       FROM generate_series(1, :users) g""",
    """INSERT INTO notifications (user_id, type, title, body, dedupe_key, link_path)
       SELECT u.id, :type, 'Hello ' || g, 'A short body for message ' || g, :prefix || ':' || u.id || ':' || g, '/inbox'
       FROM users u CROSS JOIN generate_series(1, :per_user) g
       WHERE u.external_id LIKE :prefix || '-%'""",
]
DELIVERIES_SQL = """INSERT INTO notification_deliveries (notification_id, user_id, channel)
    SELECT n.id, n.user_id, 'email' FROM notifications n WHERE n.dedupe_key LIKE :prefix || ':%' ORDER BY n.id
    RETURNING id"""


def create_email_deliveries(count: int, prefix: str = "load", per_user: int = 10, type_: str = "load") -> list[int]:
    """Insert count pending e-mail deliveries (count/per_user users) and commit; return their ids."""
    users = max(count // per_user, 1)
    params = {"type": type_, "prefix": prefix, "users": users, "per_user": per_user}
    for statement in BULK_SQL:
        db.session.execute(sa.text(statement), params)
    ids = sorted(db.session.execute(sa.text(DELIVERIES_SQL), params).scalars())
    db.session.commit()
    return ids


def status_counts() -> dict[str, int]:
    """Rows per status, read fresh."""
    db.session.rollback()
    rows = db.session.execute(sa.text("SELECT status, count(*) FROM notification_deliveries GROUP BY status"))
    return dict(rows.all())


def insert_users(count: int, prefix: str) -> dict[int, str]:
    """Insert `count` users <prefix>N@example.com in one statement; return {id: external id}."""
    db.session.execute(
        sa.text(
            "INSERT INTO users (email, display_name, external_id) "
            "SELECT :prefix || n || '@example.com', initcap(:prefix) || ' ' || n, :prefix || '-' || n "
            "FROM generate_series(1, :n) AS n"
        ),
        {"n": count, "prefix": prefix},
    )
    rows = db.session.execute(
        sa.text("SELECT id, external_id FROM users WHERE external_id LIKE :p ORDER BY id"), {"p": f"{prefix}-%"}
    )
    return dict(rows.all())
