"""Bulk inbox actions over HTTP: the toolbar and checkboxes, fragments with status and undo toast, CSRF, IDOR, caps."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from tests.factories import NotificationFactory, UserFactory
from tests.inbox.conftest import state
from tests.support.html import one, parse, texts


def _now():
    return db.session.execute(sa.text("SELECT now()")).scalar()


def _in_app(notification_id: int) -> bool:
    return db.session.execute(
        sa.text("SELECT in_app FROM notifications WHERE id = :id"), {"id": notification_id}
    ).scalar()


def test_rows_have_checkboxes_in_the_bulk_form_and_the_page_says_what_delete_does(client, member):
    row = NotificationFactory(user_id=member.id, title="Hello")
    html = client.get("/inbox").get_data(as_text=True)
    box = one(html, f"#notification-{row.id} .item__select input[data-bulk-select]")
    assert (box["form"], box["name"], box["value"], box["aria-label"]) == (
        "inbox-bulk",
        "ids",
        str(row.id),
        "Select: Hello",
    )
    form = one(html, "form#inbox-bulk")
    assert form["action"] == "/inbox/bulk" and one(html, "form#inbox-bulk input[name=csrf_token]")["value"]
    assert [b["value"] for b in parse(html).select("form#inbox-bulk button[name=action]")] == [
        "read",
        "archive",
        "delete",
    ]
    assert texts(html, "form.bulk__all button") == ["Archive all", "Delete all read"]
    assert "removed for good" in one(html, "#bulk-delete-note").get_text()


def test_the_note_says_when_deleted_rows_are_kept_for_retention(app, client, member, monkeypatch):
    monkeypatch.setitem(app.config, "INBOX_DELETE_KEEPS_FOR_RETENTION", True)
    assert "retention period" in one(client.get("/inbox").get_data(as_text=True), "#bulk-delete-note").get_text()


def test_archiving_a_selection_answers_list_status_badge_and_undo_toast(client, member, htmx, published):
    a, b = NotificationFactory.create_batch(2, user_id=member.id)
    keep = NotificationFactory(user_id=member.id, title="Keep")
    response = client.post("/inbox/bulk", data={"action": "archive", "ids": [a.id, b.id]}, headers=htmx())
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert [li["id"] for li in parse(html).select("#inbox-content li.item")] == [f"notification-{keep.id}"]
    assert one(html, "#inbox-status").get_text() == "2 notifications archived"
    assert one(html, "span#inbox-badge").get_text() == "1"
    toast = one(html, "#toasts [data-undo-toast]")
    assert toast["data-seconds"] == "10" and "2 notifications archived" in toast.get_text()
    token = one(html, "#toasts input[name=token]")["value"]
    assert published == [[member.id]]

    undone = client.post("/inbox/undo", data={"token": token}, headers=htmx()).get_data(as_text=True)
    assert one(undone, "#inbox-status").get_text() == "Undone: 2 notifications are back."
    assert one(undone, "span#inbox-badge").get_text() == "3" and state(a.id) == (None, None)
    again = client.post("/inbox/undo", data={"token": token}, headers=htmx()).get_data(as_text=True)
    assert "Too late to undo" in one(again, "#inbox-status").get_text()


def test_delete_all_read_and_a_single_row_status_in_the_singular(client, member, htmx):
    read = NotificationFactory(user_id=member.id, read_at=_now())
    unread = NotificationFactory(user_id=member.id)
    html = client.post("/inbox/bulk", data={"action": "delete", "all": "1"}, headers=htmx()).get_data(as_text=True)
    assert one(html, "#inbox-status").get_text() == "1 notification deleted"
    assert _in_app(read.id) is False and _in_app(unread.id) is True


def test_without_javascript_it_redirects_back(client, member, csrf):
    row = NotificationFactory(user_id=member.id)
    response = client.post("/inbox/bulk", data={"action": "read", "ids": [row.id], "next": "/inbox?filter=unread"},
                           headers=csrf())  # fmt: skip
    assert response.status_code == 303 and response.headers["Location"] == "/inbox?filter=unread"
    assert state(row.id).read_at is not None


def test_other_members_ids_are_ignored_and_change_nothing(client, member, htmx, published):
    theirs = NotificationFactory(user_id=UserFactory().id)
    html = client.post("/inbox/bulk", data={"action": "delete", "ids": [theirs.id]}, headers=htmx())
    assert html.status_code == 200 and "Nothing needed changing." in html.get_data(as_text=True)
    assert _in_app(theirs.id) is True and published == []
    assert "data-undo-toast" not in html.get_data(as_text=True)


def test_bulk_forms_need_the_csrf_token(client, member):
    row = NotificationFactory(user_id=member.id)
    assert client.post("/inbox/bulk", data={"action": "read", "ids": [row.id]}).status_code == 400
    assert client.post("/inbox/undo", data={"token": "x"}).status_code == 400
    assert state(row.id).read_at is None


def test_refusals(app, client, member, htmx, monkeypatch):
    monkeypatch.setitem(app.config, "INBOX_BULK_MAX_IDS", 2)
    rows = NotificationFactory.create_batch(3, user_id=member.id)
    too_many = client.post("/inbox/bulk", data={"action": "read", "ids": [r.id for r in rows]}, headers=htmx())
    assert too_many.status_code == 422 and "at most 2" in too_many.get_data(as_text=True)
    assert client.post("/inbox/bulk", data={"action": "read"}, headers=htmx()).status_code == 422
    assert client.post("/inbox/bulk", data={"action": "burn", "ids": [rows[0].id]}, headers=htmx()).status_code == 400
    assert client.post("/inbox/bulk", data={"action": "read", "ids": ["1x"]}, headers=htmx()).status_code == 400
    snoozed_all = {"action": "archive", "all": "1", "filter": "snoozed"}
    assert client.post("/inbox/bulk", data=snoozed_all, headers=htmx()).status_code == 422
    assert all(state(r.id).read_at is None for r in rows)
