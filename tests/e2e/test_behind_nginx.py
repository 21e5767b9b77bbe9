"""The production shape: deploy/nginx/hato.conf terminating TLS in front of two gunicorn web processes.

BASE_URL is the https origin nginx serves and TRUSTED_PROXY_HOPS=1, as deploy/hato.env.example says.
Through it: sign-in sets secure cookies, an API call answers 202, and the badge moves live over a wss://
socket upgraded by nginx; the sign-in limits see each client's own address, not nginx's, and a forged
X-Forwarded-For picks no other client's limit.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import urllib.parse

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.helpers import open_inbox, wait_for_htmx
from tests.factories import TEST_PASSWORD, UserFactory
from tests.realtime.helpers import Gunicorn, create_api_key, insert_notification
from tests.support.nginx import Nginx, self_signed_certificate, site_for
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.e2e

INSECURE = ssl._create_unverified_context()  # noqa: S323 - the test's own self-signed certificate


@pytest.fixture(scope="module")
def proxied(live_server, tmp_path_factory):
    """nginx on https://127.0.0.1:<port> in front of two web processes; yields that origin."""
    directory = tmp_path_factory.mktemp("nginx")
    https_port, http_port = free_port(), free_port()
    origin = f"https://127.0.0.1:{https_port}"
    env = {
        "BASE_URL": origin,
        "TRUSTED_PROXY_HOPS": "1",
        "LOGIN_CLIENT_RATE_LIMIT": "3 per minute",  # a client's limit is reached in a few tries
    }
    webs = [Gunicorn(free_port(), sockets=16, env=env, log_path=directory / f"web-{n}.log") for n in range(2)]
    proxy = None
    try:
        for web in webs:
            web.start()
        cert, key = self_signed_certificate(directory)
        site = site_for([web.port for web in webs], https_port, http_port, cert, key)
        proxy = Nginx(directory, site, (https_port, http_port)).start()
        yield {"origin": origin, "https_port": https_port, "http_port": http_port, "log": directory / "access.log"}
    finally:
        if proxy is not None:
            proxy.stop()
        for web in webs:
            web.stop()


@pytest.fixture
def browser_context_args(browser_context_args):
    """Accept the test's self-signed certificate."""
    return {**browser_context_args, "ignore_https_errors": True}


@pytest.fixture
def member(live_server):
    """A user with one unread notification; returns (e-mail, external id)."""
    with live_server.app_context():
        user = UserFactory(display_name="Proxy Tester")
        db.session.commit()
        insert_notification(user.id, title="Before the proxy", key="nginx-before")
        member = (user.email, user.external_id)
        db.session.remove()
    return member


def _request(port: int, method: str, path: str, *, source: str = "127.0.0.1", headers=None, body=None):
    """One HTTPS request to nginx from the given local address; return (status, headers, text)."""
    connection = http.client.HTTPSConnection(
        "127.0.0.1", port, context=INSECURE, source_address=(source, 0), timeout=10
    )
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read().decode()
    finally:
        connection.close()


def _failed_sign_in(port: int, source: str, email: str, forwarded_for: str | None = None) -> int:
    """GET /login for a CSRF token, POST a wrong password from `source`; return the POST's status."""
    _, headers, page = _request(port, "GET", "/login", source=source)
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"|name="csrf_token" value="([^"]+)"', page)
    assert token, "no CSRF token on the sign-in page"
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    form = {"email": email, "password": "not the password", "csrf_token": token.group(1) or token.group(2)}
    request_headers = {
        "Cookie": cookie,
        "Content-Type": "application/x-www-form-urlencoded",
        "Referer": f"https://127.0.0.1:{port}/login",  # over https the CSRF check wants a same-origin Referer
    }
    if forwarded_for:
        request_headers["X-Forwarded-For"] = forwarded_for
    status, _, _ = _request(
        port, "POST", "/login", source=source, headers=request_headers, body=urllib.parse.urlencode(form)
    )
    return status


def test_sign_in_api_call_and_live_badge_through_nginx(page, proxied, member, live_server):
    email, external_id = member
    origin = proxied["origin"]

    page.goto(origin + "/login")
    page.get_by_label("E-mail").fill(email)
    page.get_by_label("Password").fill(TEST_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/inbox$"))
    wait_for_htmx(page)
    session = next(c for c in page.context.cookies() if c["name"] == "session")
    assert session["secure"] and session["httpOnly"], session  # BASE_URL is https: cookies only over TLS

    open_inbox(page, origin + "/inbox")  # the first frame came over wss:// through nginx's upgrade
    badge = page.locator("#inbox-badge")
    expect(badge).to_have_text("1")

    key = create_api_key(live_server)
    body = json.dumps({"type": "comment", "recipient": external_id, "title": "Through the proxy"})
    status, headers, text = _request(
        proxied["https_port"],
        "POST",
        "/v1/notifications",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        body=body,
    )
    assert status == 202, text
    expect(badge).to_have_text("2", timeout=5000)
    expect(page.locator("#toasts [data-toast]")).to_contain_text("Through the proxy", timeout=5000)
    assert "max-age" in headers["Strict-Transport-Security"]  # the app saw https (X-Forwarded-Proto)
    page.close()  # nginx logs an upgraded request when its socket closes
    wait_for(
        lambda: re.search(r'"GET /ws HTTP/1\.1" 101 ', proxied["log"].read_text()), 10, "no /ws upgrade in nginx's log"
    )


def test_plain_http_is_redirected_to_https(proxied):
    connection = http.client.HTTPConnection("127.0.0.1", proxied["http_port"], timeout=10)
    connection.request("GET", "/inbox?tab=all")
    response = connection.getresponse()
    assert response.status == 301
    assert response.headers["Location"].startswith("https://") and response.headers["Location"].endswith(
        "/inbox?tab=all"
    )
    connection.close()


def test_sign_in_limits_count_each_client_address_not_the_proxys(proxied):
    port = proxied["https_port"]
    # 127.0.0.3 uses up its per-client limit (3 a minute across accounts); the app must see that address.
    statuses = [_failed_sign_in(port, "127.0.0.3", f"nobody-{n}@example.com") for n in range(3)]
    assert statuses == [401, 401, 401]
    assert _failed_sign_in(port, "127.0.0.3", "nobody-3@example.com") == 429
    # A forged X-Forwarded-For does not make it another client: nginx appends the real peer, and the app
    # trusts only that last entry.
    assert _failed_sign_in(port, "127.0.0.3", "nobody-4@example.com", forwarded_for="203.0.113.9") == 429
    # Another client behind the same nginx still has its own limit (with TRUSTED_PROXY_HOPS=0 every
    # request would come from 127.0.0.1, nginx's address, and this one would be refused too).
    assert _failed_sign_in(port, "127.0.0.4", "nobody-5@example.com") == 401
