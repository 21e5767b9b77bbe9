"""Preference resolution on the screen's side: one statement, mandatory rows ignored, matrix shape."""

import sqlalchemy as sa

from app import timezones
from app.extensions import db
from app.preferences import queries
from tests.factories import UserFactory


def test_a_row_written_straight_into_the_table_cannot_turn_off_a_mandatory_type(member):
    db.session.execute(
        sa.text("""
        INSERT INTO notification_preferences (user_id, type, channel, enabled) VALUES
          (:u, 'security', 'email', false), (:u, 'security', 'in_app', false), (:u, 'security', 'push', true)"""),
        {"u": member.id},
    )
    cells = {c.channel: c for c in queries.resolve([member.id], "security")}
    assert {ch: (c.send, c.source) for ch, c in cells.items()} == {
        "email": (True, "mandatory"),
        "in_app": (True, "mandatory"),
        "push": (False, "mandatory"),
        "sms": (False, "mandatory"),  # mandatory, but not one of its channels: no stored row turns it on
        "chat": (False, "mandatory"),
    }
    assert queries.channels_on([member.id], "security") == {member.id: {"email", "in_app"}}


def test_matrix_has_every_type_and_channel_with_labels(member):
    rows = queries.matrix(member.id)
    assert [r.type for r in rows] == ["comment", "reservation_approved", "reservation_remind", "security"]
    assert all(set(r.cells) == {"in_app", "email", "push", "sms", "chat"} for r in rows)
    security = rows[-1]
    assert security.mandatory and security.label == "Security" and security.description
    assert {c.source for c in security.cells.values()} == {"mandatory"}


def test_resolution_is_one_statement_for_many_users(member, app):
    others = [UserFactory().id for _ in range(3)]
    statements = []
    engine = db.session.get_bind()
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    sa.event.listen(engine, "before_cursor_execute", listener)
    try:
        cells = queries.resolve([member.id, *others])
    finally:
        sa.event.remove(engine, "before_cursor_execute", listener)
    assert len(statements) == 1 and len(cells) == 4 * 4 * 5


def test_cell_and_type_lookups(member):
    assert queries.cell(member.id, "comment", "push").send is False
    assert queries.cell(member.id, "nope", "push") is None
    assert queries.notification_type("security")["mandatory"] is True
    assert queries.notification_type("nope") is None


def test_timezones_are_iana_names():
    zones = timezones.choices()
    assert "Asia/Tokyo" in zones and "UTC" in zones
    assert "localtime" not in zones and not any(z.startswith("posix/") for z in zones)
