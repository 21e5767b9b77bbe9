"""Users (admins only): search by e-mail, external id or name; role changes audited; the last admin stays."""

from __future__ import annotations

import re

from app.extensions import db
from app.models import User
from tests.factories import UserFactory
from tests.support.html import one, texts


def _emails(page: str) -> list[str]:
    """The e-mail column of the users table, in order."""
    return texts(page, '.console-users tbody tr[id^="user-"] > td:first-child')


def test_search_by_email_external_id_or_name(client, admin):
    UserFactory(email="ada@example.com", display_name="Ada Lovelace", external_id="u-100")
    UserFactory(email="grace@example.com", display_name="Grace Hopper", external_id="u-200")
    assert _emails(client.get("/console/users?q=ADA@").get_data(as_text=True)) == ["ada@example.com"]
    assert _emails(client.get("/console/users?q=u-200").get_data(as_text=True)) == ["grace@example.com"]
    assert _emails(client.get("/console/users?q=hopper").get_data(as_text=True)) == ["grace@example.com"]
    assert _emails(client.get("/console/users?q=%25").get_data(as_text=True)) == []  # % is literal
    assert _emails(client.get("/console/users?role=admin").get_data(as_text=True)) == ["adam@example.com"]


def test_keyset_pages(client, admin):
    for i in range(60):
        UserFactory(email=f"page{i:02d}@example.com")
    first = client.get("/console/users?q=page").get_data(as_text=True)
    following = one(first, ".load-more a")["href"]
    assert re.search(r"after=\d+", following) and "q=page" in following
    second = client.get(following).get_data(as_text=True)
    assert len(_emails(first)) == 50 and len(_emails(second)) == 10
    assert set(_emails(first)).isdisjoint(_emails(second))


def test_change_role_is_audited(client, csrf, admin, audit_rows):
    user = UserFactory(email="ops@example.com")
    response = client.post(
        f"/console/users/{user.id}/role", headers=csrf(), data={"role": "operator"}, follow_redirects=True
    )
    assert "ops@example.com is now operator" in response.get_data(as_text=True)
    assert db.session.get(User, user.id).role == "operator"
    (entry,) = audit_rows("user.role")
    assert (entry.actor_id, entry.before, entry.after["role"]) == (admin.id, {"role": "member"}, "operator")


def test_the_last_admin_cannot_demote_themselves(client, csrf, admin, audit_rows):
    response = client.post(
        f"/console/users/{admin.id}/role", headers=csrf(), data={"role": "member"}, follow_redirects=True
    )
    assert "This is the last admin" in response.get_data(as_text=True)
    assert db.session.get(User, admin.id).role == "admin"
    assert audit_rows() == []


def test_an_admin_can_step_down_when_another_admin_exists(client, csrf, admin):
    UserFactory(role="admin")
    assert client.post(f"/console/users/{admin.id}/role", headers=csrf(), data={"role": "operator"}).status_code == 302
    assert db.session.get(User, admin.id).role == "operator"


def test_an_unknown_role_changes_nothing(client, csrf, admin, audit_rows):
    user = UserFactory()
    response = client.post(
        f"/console/users/{user.id}/role", headers=csrf(), data={"role": "root"}, follow_redirects=True
    )
    assert "Choose one of the roles" in response.get_data(as_text=True)
    assert db.session.get(User, user.id).role == "member" and audit_rows() == []
