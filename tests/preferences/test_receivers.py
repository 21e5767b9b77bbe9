"""Issue 28 item 2: the preferences page lists the member's phones and browsers, each with Turn off and Remove."""

from __future__ import annotations

import sqlalchemy as sa

from app.delivery.channels import channel_for
from app.devices import service as devices
from app.extensions import db
from tests.factories import UserFactory
from tests.support.html import one, parse
from tests.support.push import add_subscription

IPHONE = "ab" * 32
CHROME_ON_MAC = ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
                 "Chrome/131.0.0.0 Safari/537.36")  # fmt: skip


def _browser(user, agent: str = CHROME_ON_MAC):
    row = add_subscription(user, {"endpoint": f"https://fcm.googleapis.com/fcm/send/{user.id}-x",
                                  "keys": {"p256dh": "p", "auth": "a"}})  # fmt: skip
    row.user_agent = agent
    db.session.flush()
    return row


def _phone(user, **fields):
    return devices.register(user.id, {"platform": "ios", "token": IPHONE, "app_version": "4.2.0", **fields})


def _items(html: str) -> list[str]:
    return [" ".join(li.get_text(" ").split()) for li in parse(html).select("#receivers li")]


def test_the_page_lists_phones_and_browsers_with_their_names_and_state(client, member):
    _phone(member)
    _browser(member)
    db.session.execute(sa.text("UPDATE devices SET last_seen_at = now() + interval '1 minute'"))
    items = _items(client.get("/preferences").get_data(as_text=True))
    assert len(items) == 2
    assert items[0].startswith("iPhone app 4.2.0 · last seen") and items[0].endswith("On Turn off Remove")
    assert items[1].startswith("Chrome on macOS browser · last seen")


def test_turning_a_phone_off_keeps_it_listed_and_stops_its_pushes(client, member, csrf):
    device_id = _phone(member).device_id
    response = client.post(f"/preferences/receivers/phone/{device_id}", data={"action": "off"}, headers=csrf())
    assert response.status_code == 303 and response.headers["Location"].endswith("saved=receiver-off#receivers")
    assert channel_for("push").targets([_row(member)]) == {}  # nothing left to push to
    html = client.get(response.headers["Location"]).get_data(as_text=True)
    assert one(html, "#receivers [role=status]").get_text(strip=True) == "Pushes to it are off."
    assert "Off" in _items(html)[0] and "Turn on" in _items(html)[0]
    client.post(f"/preferences/receivers/phone/{device_id}", data={"action": "on"}, headers=csrf())
    (targets,) = channel_for("push").targets([_row(member)]).values()
    assert [t.token for t in targets] == [IPHONE]


def test_turning_a_browser_off_stops_its_pushes_and_remove_forgets_it(client, member, csrf):
    browser = _browser(member)
    client.post(f"/preferences/receivers/browser/{browser.id}", data={"action": "off"}, headers=csrf())
    assert channel_for("push").targets([_row(member)]) == {}
    client.post(f"/preferences/receivers/browser/{browser.id}", data={"action": "remove"}, headers=csrf())
    assert db.session.execute(sa.text("SELECT count(*) FROM push_subscriptions")).scalar() == 0
    assert "No phone or browser gets your pushes yet." in client.get("/preferences").get_data(as_text=True)


def test_another_members_phone_is_404_and_stays(client, member, csrf):
    other = UserFactory()
    device_id = _phone(other).device_id
    for action in ("off", "remove"):
        response = client.post(f"/preferences/receivers/phone/{device_id}", data={"action": action}, headers=csrf())
        assert response.status_code == 404
    assert db.session.execute(sa.text("SELECT disabled_at FROM devices WHERE id = :i"), {"i": device_id}).one() == (
        None,)  # fmt: skip


def test_bad_actions_and_missing_csrf_are_refused(client, member, csrf):
    device_id = _phone(member).device_id
    path = f"/preferences/receivers/phone/{device_id}"
    assert client.post(path, data={"action": "explode"}, headers=csrf()).status_code == 422
    assert client.post(path, data={"action": "remove"}).status_code == 400  # no CSRF token
    assert client.post(f"/preferences/receivers/tablet/{device_id}", data={"action": "off"},
                       headers=csrf()).status_code == 404  # fmt: skip
    assert db.session.execute(sa.text("SELECT count(*) FROM devices")).scalar() == 1


def test_a_refused_phone_says_so(client, member):
    _phone(member)
    db.session.execute(sa.text("UPDATE devices SET invalidated_at = now(), invalid_reason = 'Unregistered'"))
    assert "No longer accepted by its push service" in _items(client.get("/preferences").get_data(as_text=True))[0]


def test_the_section_is_in_japanese_for_a_japanese_member(client, member):
    member.locale = "ja"
    db.session.flush()
    _phone(member)
    html = client.get("/preferences").get_data(as_text=True)
    assert one(html, "#receivers-title").get_text(strip=True) == "お使いのスマートフォンとブラウザー"


def _row(user):
    """A push row's fields as the engine's batch read has them (what targets() looks at)."""

    class Row:
        id = 1
        user_id = user.id

    return Row()
