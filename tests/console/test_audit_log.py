"""The audit log page: filters, keyset pages on (created_at, id); CLI commands write audit rows too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from app.audit import queries
from app.extensions import db
from app.models import AuditEntry, User
from app.pagination import Cursor
from tests.support.html import attrs, definitions, parse


def _entry(
    label="olivia@example.com",
    action="announcement.create",
    target_type="announcement",
    target_id="1",
    at=None,
    **extra,
):
    entry = AuditEntry(
        actor_label=label, action=action, target_type=target_type, target_id=target_id, after={"title": "x"}, **extra
    )
    if at is not None:
        entry.created_at = at
    db.session.add(entry)
    db.session.flush()
    return entry


def _ids(page: str) -> list[int]:
    """The entry ids of the audit table's rows, in order."""
    return [int(row_id.removeprefix("audit-")) for row_id in attrs(page, ".console-audit tbody tr", "id")]


def test_filters(client, operator):
    base = datetime(2026, 1, 10, tzinfo=UTC)
    a = _entry(at=base, actor_id=operator.id, label=operator.email)
    b = _entry(action="announcement.delete", at=base + timedelta(hours=1), actor_id=operator.id, label=operator.email)
    c = _entry(
        label="cli", action="api_key.create", target_type="api_key", target_id="hato_abc", at=base + timedelta(days=2)
    )

    def ids(query):
        return _ids(client.get("/console/audit?" + query).get_data(as_text=True))

    assert ids("") == [c.id, b.id, a.id]
    assert ids("actor=OLIVIA@example.com") == [b.id, a.id]
    assert ids("actor=cli") == [c.id]
    assert ids("action=announcement") == [b.id, a.id]
    assert ids("action=announcement.delete") == [b.id]
    assert ids("action=announ") == []  # a prefix must end at a dot
    assert ids("target_type=api_key&target_id=hato_abc") == [c.id]
    # Times are the operator's (Asia/Tokyo, UTC+9).
    assert ids("since=2026-01-10T09:30&until=2026-01-12T00:00") == [b.id]
    page = client.get("/console/audit?since=yesterday").get_data(as_text=True)
    assert "From is not a date and time" in page


def test_keyset_pages_never_skip_or_repeat(client, operator):
    same_instant = datetime(2026, 2, 1, tzinfo=UTC)
    made = [
        _entry(target_id=str(i), at=same_instant if i % 2 else same_instant - timedelta(minutes=i)) for i in range(120)
    ]
    seen, url = [], "/console/audit"
    while url:
        page = client.get(url).get_data(as_text=True)
        seen += _ids(page)
        more = parse(page).select_one(".load-more a")
        url = more["href"] if more else None
    assert sorted(seen) == sorted(e.id for e in made) and len(seen) == len(set(seen))


def test_the_page_query_uses_keyset_not_offset(app):
    statements = []
    with app.app_context():
        from sqlalchemy import event

        engine = db.engine
        listener = lambda conn, cursor, statement, *a: statements.append(statement)  # noqa: E731
        event.listen(engine, "before_cursor_execute", listener)
        try:
            queries.audit_page(cursor=Cursor(datetime.now(UTC), 10).encode())
        finally:
            event.remove(engine, "before_cursor_execute", listener)
    audit_sql = [s for s in statements if "FROM audit_log" in s]
    assert audit_sql and "OFFSET" not in audit_sql[0].upper() and "(created_at, id) <" in audit_sql[0]


def test_the_page_shows_what_changed(client, operator):
    db.session.add(
        AuditEntry(
            actor_label="cli",
            action="user.role",
            target_type="user",
            target_id="7",
            before={"role": "member", "email": "x@example.com"},
            after={"role": "operator", "email": "x@example.com"},
        )
    )
    db.session.flush()
    page = client.get("/console/audit").get_data(as_text=True)
    # Only the changed field, from before to after; unchanged fields are left out.
    assert definitions(page, ".console-audit .console-diff") == {"role": '"member" → "operator"'}
    assert "<dt>email</dt>" not in page


def test_cli_users_create_writes_an_audit_row(app):
    runner = app.test_cli_runner()
    assert runner.invoke(args=["users", "create", "new@example.com", "--password", "long-enough-pw"]).exit_code == 0
    assert (
        runner.invoke(
            args=["users", "create", "new@example.com", "--password", "long-enough-pw", "--role", "operator"]
        ).exit_code
        == 0
    )
    user = db.session.scalars(sa.select(User).where(User.email == "new@example.com")).one()
    rows = db.session.scalars(
        sa.select(AuditEntry).where(AuditEntry.target_type == "user").order_by(AuditEntry.id)
    ).all()
    assert [(r.action, r.actor_label, r.target_id) for r in rows] == [
        ("user.create", "cli", str(user.id)),
        ("user.update", "cli", str(user.id)),
    ]
    assert rows[1].before["role"] == "member" and rows[1].after["role"] == "operator"
    assert "password" not in str(rows[0].after)


def test_cli_api_keys_write_audit_rows(app):
    runner = app.test_cli_runner()
    created = runner.invoke(args=["api-keys", "create", "billing"])
    assert created.exit_code == 0, created.output
    prefix = created.output.strip().splitlines()[0][:13]
    assert runner.invoke(args=["api-keys", "revoke", prefix]).exit_code == 0
    rows = db.session.scalars(
        sa.select(AuditEntry).where(AuditEntry.target_type == "api_key").order_by(AuditEntry.id)
    ).all()
    assert [(r.action, r.actor_label, r.target_id) for r in rows] == [
        ("api_key.create", "cli", prefix),
        ("api_key.revoke", "cli", prefix),
    ]
