"""The bell with a tenant-scoped token (issue 32): on the host page it shows only that tenant's rows and count, live,
while the member belongs to two tenants; another tenant's new notification moves neither."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect
from werkzeug.serving import make_server

from app.devstack.demo_host import create_host
from app.extensions import db
from app.tenants import service
from tests.e2e.test_bell import bell, open_host
from tests.factories import UserFactory
from tests.realtime.helpers import api_notify, create_api_key, insert_notification
from tests.support.axe import describe, serious_violations
from tests.support.waiting import free_port

pytestmark = pytest.mark.e2e


@pytest.fixture
def scoped_host(live_server, monkeypatch):
    """A member of acme and globex with one unread row of each; the demo host mints acme-scoped tokens."""
    from app.api_keys.service import create_api_key as create

    with live_server.app_context():
        user = UserFactory(display_name="Two Hats")
        db.session.commit()
        for key in ("acme", "globex"):
            tenant, _ = service.put_tenant(None, key, {"name": key.title()})
            row = insert_notification(user.id, title=f"{key.title()} news", key=f"{key}-{user.id}")
            db.session.execute(sa.text("UPDATE notifications SET tenant_id = :t WHERE id = :id"),
                               {"t": tenant.id, "id": row})  # fmt: skip
        service.set_member_tenants(None, user.id, ["acme", "globex"])
        key = create(None, "scoped bell e2e", ["feed:issue"])
        db.session.commit()
        external_id = user.external_id
        db.session.remove()
    port = free_port()
    host_app = create_host(live_server.base_url, key, user=external_id)
    host_app.config["DEMO_TENANT"] = "acme"
    host_app.base_url = f"http://127.0.0.1:{port}"
    monkeypatch.setitem(live_server.config, "FEED_ALLOWED_ORIGINS", [host_app.base_url])
    server = make_server("127.0.0.1", port, host_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield host_app, external_id
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_a_scoped_bell_shows_only_its_tenants_rows_and_count(page, live_server, scoped_host):
    host_app, external_id = scoped_host
    open_host(page, host_app)
    expect(bell(page)).to_have_attribute("count", "1", timeout=5000)
    button = page.get_by_role("button", name="Notifications, 1 unread")
    button.click()
    dialog = page.get_by_role("dialog", name="Notifications")
    expect(dialog.get_by_text("Acme news")).to_be_visible()
    expect(dialog.get_by_text("Globex news")).to_have_count(0)

    key = create_api_key(live_server)
    api_notify(live_server.base_url, key, external_id, "More for Globex", tenant="globex")
    api_notify(live_server.base_url, key, external_id, "More for Acme", tenant="acme")
    expect(dialog.get_by_text("More for Acme")).to_be_visible(timeout=3000)
    expect(bell(page)).to_have_attribute("count", "2", timeout=3000)
    expect(dialog.get_by_text("More for Globex")).to_have_count(0)
    expect(page.get_by_text("More for Globex")).to_have_count(0)  # no toast of it either


# A 1×1 PNG, served for the tenants' logo URLs (the browser has no network here).
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000b49444154789c6360000200000500017a5eab3f0000000049454e44ae426082"
)


def _brand(live_server, key: str, fields: dict) -> None:
    with live_server.app_context():
        service.put_tenant(None, key, fields)
        db.session.commit()
        db.session.remove()


@pytest.mark.parametrize("width", [1280, 375])
def test_a_scoped_bell_shows_its_tenants_logo_and_colour_and_no_other(page, live_server, scoped_host, width):
    host_app, _ = scoped_host
    _brand(live_server, "acme", {"name": 'Acme "<b>Inc</b>"', "logo_url": "https://cdn.acme.example/logo.png",
                                 "primary_color": "#1A73E8"})  # fmt: skip
    _brand(live_server, "globex", {"logo_url": "https://cdn.globex.example/g.png", "primary_color": "#00aa00"})
    requested = []

    def serve(route):
        requested.append(route.request.url)
        route.fulfill(status=200, content_type="image/png", body=PNG)

    page.route("https://**/*", serve)
    page.set_viewport_size({"width": width, "height": 800})
    open_host(page, host_app)
    expect(bell(page)).to_have_attribute("count", "1", timeout=5000)
    page.get_by_role("button", name="Notifications, 1 unread").click()
    dialog = page.get_by_role("dialog", name="Notifications")
    expect(dialog.get_by_text("Acme news")).to_be_visible()

    logo = dialog.get_by_role("img", name='Acme "<b>Inc</b>"')  # the name is the logo's text, never markup
    expect(logo).to_be_visible()
    expect(logo).to_have_attribute("src", "https://cdn.acme.example/logo.png")
    expect(dialog.locator("b")).to_have_count(0)
    assert dialog.evaluate("d => getComputedStyle(d).getPropertyValue('--brand')").strip() == "#1a73e8"
    assert dialog.evaluate("d => getComputedStyle(d.querySelector('header')).borderTopColor") == "rgb(26, 115, 232)"
    assert requested == ["https://cdn.acme.example/logo.png"]  # globex's logo is never even asked for

    box = dialog.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width  # fits a 375 px phone
    found = serious_violations(page)
    assert not found, describe(found)


def test_a_logo_the_host_page_cannot_load_is_left_out(page, live_server, scoped_host):
    host_app, _ = scoped_host
    _brand(live_server, "acme", {"logo_url": "https://cdn.acme.example/logo.png"})
    page.route("https://**/*", lambda route: route.abort())  # as the host page's CSP img-src would refuse it
    open_host(page, host_app)
    expect(bell(page)).to_have_attribute("count", "1", timeout=5000)
    page.get_by_role("button", name="Notifications, 1 unread").click()
    dialog = page.get_by_role("dialog", name="Notifications")
    expect(dialog.get_by_text("Acme news")).to_be_visible()
    expect(dialog.get_by_role("img")).to_have_count(0)
    found = serious_violations(page)
    assert not found, describe(found)
