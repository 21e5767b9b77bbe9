"""Topic fixtures: followers in bulk (set-based SQL), a topic, a type, an API client."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from tests.api.conftest import api, api_key  # noqa: F401 (fixtures)
from tests.factories import NotificationTypeFactory


@pytest.fixture
def comment_type():
    """In-app and e-mail on by default, push off; the default queue."""
    return NotificationTypeFactory(type="comment", default_in_app=True, default_email=True, default_push=False,
                                   priority="default")  # fmt: skip


@pytest.fixture
def make_topic():
    """A topic whose followers are n new users (t-<i>), inserted set-based; return (topic id, user ids)."""

    def _make(n: int, key: str = "project:42", name: str = "Project Apollo", prefix: str = "t") -> tuple[int, list]:
        topic_id = db.session.execute(
            sa.text("INSERT INTO topics (key, name) VALUES (:key, :name) RETURNING id"), {"key": key, "name": name}
        ).scalar_one()
        ids = [
            row.id
            for row in db.session.execute(
                sa.text(
                    "INSERT INTO users (external_id, email, display_name) "
                    "SELECT :p || '-' || g, :p || '-' || g || '@example.com', 'User ' || g "
                    "FROM generate_series(1, :n) g ORDER BY g RETURNING id"
                ),
                {"p": prefix, "n": n},
            )
        ]
        db.session.execute(
            sa.text("INSERT INTO topic_subscriptions (user_id, topic_id) SELECT unnest(CAST(:ids AS bigint[])), :t"),
            {"ids": ids, "t": topic_id},
        )
        return topic_id, ids

    return _make


def counts() -> dict[str, int]:
    """Rows written, by table (read fresh)."""
    return {
        "notifications": db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar_one(),
        "deliveries": db.session.execute(sa.text("SELECT count(*) FROM notification_deliveries")).scalar_one(),
    }
