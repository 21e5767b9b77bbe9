"""Scoped feeds (issue 32, item 7): a user token with a `tenant` claim sees, counts and touches only that
tenant's notifications (plus announcements addressed to everyone); other tenants' rows are never visible through it."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from app.api_keys import service as keys
from app.extensions import db
from app.tenants import service
from tests.api.conftest import Api
from tests.factories import AnnouncementFactory, NotificationFactory, NotificationTypeFactory, UserFactory


@pytest.fixture
def issuer(client):
    key = keys.create_api_key(None, "feed")
    db.session.execute(sa.text("UPDATE api_keys SET scopes = '{feed:issue}' WHERE prefix = :p"),
                       {"p": keys.key_prefix(key)})  # fmt: skip
    return Api(client, key)


@pytest.fixture
def world():
    """A member of acme and globex with a notification of each, one of no tenant, and an announcement."""
    NotificationTypeFactory(type="comment")
    member = UserFactory(external_id="both")
    acme, _ = service.put_tenant(None, "acme", {"name": "Acme"})
    globex, _ = service.put_tenant(None, "globex", {"name": "Globex"})
    service.set_member_tenants(None, member.id, ["acme", "globex"])
    rows = {}
    for name, tenant in (("acme", acme.id), ("globex", globex.id), ("none", None)):
        row = NotificationFactory(user_id=member.id, type="comment", title=f"For {name}")
        db.session.execute(
            sa.text("UPDATE notifications SET tenant_id = :t WHERE id = :id"), {"t": tenant, "id": row.id}
        )
        rows[name] = row.id
    AnnouncementFactory(title="For everyone")
    return {"member": member, "acme": acme, "globex": globex, "rows": rows}


def token(issuer: Api, tenant: str | None = None, user: str = "both") -> str:
    body = {"user": user, **({"tenant": tenant} if tenant else {})}
    response = issuer.post("/v1/user-tokens", body)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["token"]


def feed(client, bearer: str, method: str = "GET", path: str = ""):
    return client.open("/v1/feed" + path, method=method, headers={"Authorization": f"Bearer {bearer}"})


def test_a_scoped_feed_shows_only_its_tenants_notifications_and_the_announcements(client, issuer, world):
    body = feed(client, token(issuer, "acme")).get_json()

    assert [n["title"] for n in body["notifications"]] == ["For acme"]
    assert [a["title"] for a in body["announcements"]] == ["For everyone"]
    assert body["counts"]["unread"] == 2  # its notification and the announcement

    unscoped = feed(client, token(issuer)).get_json()
    assert {n["title"] for n in unscoped["notifications"]} == {"For acme", "For globex", "For none"}
    assert unscoped["counts"]["unread"] == 4


def test_counts_are_the_tenants(client, issuer, world):
    assert feed(client, token(issuer, "globex"), path="/counts").get_json()["unread"] == 2
    assert feed(client, token(issuer), path="/counts").get_json()["unread"] == 4


@pytest.mark.parametrize("action", ["read", "archive", "unarchive", "snooze", "unsnooze", "mute"])
def test_another_tenants_row_is_404_through_a_scoped_token_and_unchanged(client, issuer, world, action):
    theirs = world["rows"]["globex"]

    response = client.post(f"/v1/feed/notifications/{theirs}/{action}", json={"choice": "hour"},
                           headers={"Authorization": f"Bearer {token(issuer, 'acme')}"})  # fmt: skip

    assert response.status_code == 404
    row = db.session.execute(sa.text("SELECT read_at, archived_at, snoozed_until FROM notifications WHERE id = :id"),
                             {"id": theirs}).one()  # fmt: skip
    assert tuple(row) == (None, None, None)


def test_a_row_of_no_tenant_is_out_of_every_scope(client, issuer, world):
    response = feed(client, token(issuer, "acme"), "POST", f"/notifications/{world['rows']['none']}/read")
    assert response.status_code == 404


def test_the_own_tenants_row_can_be_read(client, issuer, world):
    response = feed(client, token(issuer, "acme"), "POST", f"/notifications/{world['rows']['acme']}/read")
    assert response.status_code == 200 and response.get_json()["counts"]["unread"] == 1


def test_read_all_in_a_scope_reads_only_that_tenants_rows(client, issuer, world):
    assert feed(client, token(issuer, "acme"), "POST", "/read-all").status_code == 200

    unread = db.session.execute(
        sa.text("SELECT title FROM notifications WHERE read_at IS NULL ORDER BY title")
    ).scalars()
    assert list(unread) == ["For globex", "For none"]


def test_a_token_for_a_tenant_the_member_is_not_in_is_refused(client, issuer, world):
    UserFactory(external_id="outsider")
    response = issuer.post("/v1/user-tokens", {"user": "outsider", "tenant": "acme"})
    assert response.status_code == 422 and response.get_json()["outside_tenant"] == ["outsider"]
    unknown = issuer.post("/v1/user-tokens", {"user": "both", "tenant": "nope"})
    assert unknown.status_code == 422 and unknown.get_json()["unknown_tenants"] == ["nope"]


def test_a_token_stops_working_when_the_member_leaves_the_tenant(client, issuer, world):
    bearer = token(issuer, "acme")
    service.set_member_tenants(None, world["member"].id, ["globex"])

    response = feed(client, bearer)

    assert response.status_code == 401 and response.get_json()["code"] == "tenant"


def test_a_token_stops_working_when_the_tenant_is_deleted(client, issuer, world):
    bearer = token(issuer, "acme")
    service.delete_tenant(None, "acme")
    assert feed(client, bearer).status_code == 401


# --- the branding a scoped page carries for the bell's popover (issue 32, item 5) ------------------------------


def test_a_scoped_page_carries_its_tenants_branding_and_no_other(client, issuer, world):
    service.put_tenant(None, "acme", {"logo_url": "https://cdn.acme.example/logo.png", "primary_color": "#1A73E8"})
    service.put_tenant(None, "globex", {"logo_url": "https://cdn.globex.example/g.png", "primary_color": "#00aa00"})

    body = feed(client, token(issuer, "acme")).get_json()

    assert body["tenant"] == {"key": "acme", "name": "Acme", "logo_url": "https://cdn.acme.example/logo.png",
                              "primary_color": "#1a73e8"}  # fmt: skip
    assert "globex" not in str(body).lower().replace("for globex", "")
    assert feed(client, token(issuer, "globex")).get_json()["tenant"]["logo_url"] == "https://cdn.globex.example/g.png"


def test_an_unscoped_page_carries_no_branding(client, issuer, world):
    service.put_tenant(None, "acme", {"logo_url": "https://cdn.acme.example/logo.png", "primary_color": "#1a73e8"})

    body = feed(client, token(issuer)).get_json()

    assert body["tenant"] is None and "cdn.acme.example" not in str(body)


def test_a_tenant_without_branding_gives_its_name_only(client, issuer, world):
    assert feed(client, token(issuer, "acme")).get_json()["tenant"] == {
        "key": "acme", "name": "Acme", "logo_url": None, "primary_color": None}  # fmt: skip


@pytest.mark.parametrize(
    ("logo", "color"),
    [
        ("http://cdn.acme.example/logo.png", "red"),
        ("https://127.0.0.1/logo.png", "#12345"),
        ("https://user:pw@cdn.acme.example/logo.png", "#1a73e8;}</style>"),
        ("javascript:alert(1)", "expression(alert(1))"),
        ('https://cdn.acme.example/logo.png"onerror="alert(1)', "#1a73e8"),
        ("https://cdn.acme.example/a'b<c>.png", "#1a73e8"),
    ],
)
def test_a_logo_or_colour_stored_around_the_rules_is_never_given(client, issuer, world, logo, color):
    db.session.execute(sa.text("UPDATE tenants SET logo_url = :l, primary_color = :c, name = :n WHERE key = 'acme'"),
                       {"l": logo, "c": color, "n": '"><img src=x onerror=alert(1)>'})  # fmt: skip

    tenant = feed(client, token(issuer, "acme")).get_json()["tenant"]

    assert tenant["logo_url"] is None
    assert tenant["primary_color"] == (color if re.fullmatch(r"#[0-9a-f]{6}", color) else None)
    assert tenant["name"] == '"><img src=x onerror=alert(1)>'  # data: the bell writes it as text, never as HTML


# --- a scope's own unseen count (issue 32, gap) ---------------------------------------------------------------


def _unseen(client, bearer) -> int:
    return feed(client, bearer, path="/counts").get_json()["unseen"]


def test_a_scoped_look_sees_only_its_scope_and_leaves_the_other_feeds_unseen(client, issuer, world):
    acme, globex, unscoped = token(issuer, "acme"), token(issuer, "globex"), token(issuer)
    assert (_unseen(client, acme), _unseen(client, globex), _unseen(client, unscoped)) == (2, 2, 4)

    assert feed(client, acme, "POST", "/seen").get_json()["counts"]["unseen"] == 0

    assert (_unseen(client, acme), _unseen(client, globex), _unseen(client, unscoped)) == (0, 2, 4)
    assert db.session.execute(sa.text("SELECT count(*) FROM notification_last_seen")).scalar_one() == 0


def test_an_unscoped_look_sees_every_scope(client, issuer, world):
    acme, globex, unscoped = token(issuer, "acme"), token(issuer, "globex"), token(issuer)
    feed(client, unscoped, "POST", "/seen")

    assert (_unseen(client, acme), _unseen(client, globex), _unseen(client, unscoped)) == (0, 0, 0)


def test_a_row_arriving_after_a_scoped_look_is_unseen_in_that_scope_again(client, issuer, world):
    acme = token(issuer, "acme")
    feed(client, acme, "POST", "/seen")
    db.session.execute(sa.text("UPDATE tenant_last_seen SET seen_at = now() - interval '1 hour'"))
    db.session.execute(sa.text("UPDATE notifications SET created_at = now() - interval '2 hours'"))
    row = NotificationFactory(user_id=world["member"].id, type="comment", title="Later for acme")
    db.session.execute(sa.text("UPDATE notifications SET tenant_id = :t WHERE id = :id"),
                       {"t": world["acme"].id, "id": row.id})  # fmt: skip

    assert _unseen(client, acme) == 1
    feed(client, acme, "POST", "/seen")
    assert _unseen(client, acme) == 0


def test_a_scoped_look_is_the_members_own(client, issuer, world):
    other = UserFactory(external_id="other")
    service.set_member_tenants(None, other.id, ["acme"])
    feed(client, token(issuer, "acme"), "POST", "/seen")
    rows = db.session.execute(sa.text("SELECT user_id, tenant_id FROM tenant_last_seen")).all()
    assert rows == [(world["member"].id, world["acme"].id)]
    assert _unseen(client, token(issuer, "acme", user="other")) == 1  # the announcement: still unseen for them
