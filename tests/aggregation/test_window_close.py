"""An aggregated row's e-mail goes once, when its window closes, with the final count."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.delivery.channels import routable_names
from app.delivery.due import take_due
from app.extensions import db
from app.notify.service import notify
from jobs.delivery import deliver_batch
from tests.factories import NotificationTypeFactory, UserFactory

# The engine commits (claim, skips) and records sends on its own autocommit connection.
pytestmark = pytest.mark.committed


def like(actor: str, n: int):
    result = notify(
        ["author"],
        type_="like",
        title="liked your post",
        body="",
        dedupe_key=f"like:{n}",
        group_key="post:1",
        actor={"id": actor, "name": actor},
    )
    db.session.commit()
    return result


def close_windows() -> None:
    """What the clock does at the window's end (the rows were written a moment ago)."""
    db.session.execute(
        sa.text(
            "UPDATE notifications SET window_ends_at = now() - interval '1 second' WHERE window_ends_at > now();"
            "UPDATE notification_deliveries SET next_attempt_at = now() - interval '1 second',"
            " updated_at = now() - interval '2 seconds' WHERE status = 'pending'"
        )
    )
    db.session.commit()


def test_one_email_when_the_window_closes_then_a_late_event_opens_a_new_window(app, fake_provider):
    NotificationTypeFactory(type="like", default_email=True, aggregation_window=300)
    UserFactory(external_id="author", email="author@example.com")
    for n, actor in enumerate(["Alice", "Bob", "Carol", "Dave"]):
        # nothing enqueued while the window is open, on any channel
        assert like(actor, n).pending == {name: [] for name in routable_names()}

    assert take_due(30, 100, []) == {}  # not due yet: the window is open
    close_windows()
    [(key, ids)] = take_due(30, 100, []).items()
    db.session.commit()
    assert key == ("default", "email") and len(ids) == 1
    assert deliver_batch("email", ids)["sent"] == 1
    assert [m.subject for m in fake_provider.sent] == ["Alice and 3 others: liked your post"]
    assert take_due(30, 100, []) == {} and deliver_batch("email", ids) == {"claimed": 0}  # never twice

    like("Erin", 9)  # after the window: a new row, its own window and e-mail
    counts = db.session.execute(sa.text("SELECT event_count FROM notifications ORDER BY id")).scalars().all()
    assert counts == [4, 1]
    pending = db.session.execute(sa.text("SELECT count(*) FROM notification_deliveries WHERE status = 'pending'"))
    assert pending.scalar() == 1
