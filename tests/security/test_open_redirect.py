"""Attack: an open redirect, a link on our own host that sends a signed-in user to a site of the attacker's.

The issue's payload is `/login?next=/%09/evil.example`: browsers drop the tab, so `/\\t/evil.example`
becomes `//evil.example`. Every sink where a user-supplied path becomes a Location is attacked with the
payload and its known variants, and the Location is resolved as a browser would (the WHATWG parser
Node.js uses) from a page of ours: it must stay on our origin.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

import ada_url
import pytest

from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory

BASE = "https://app.example/login"

PAYLOADS = [
    # the issue's payload, as the query string carries it and decoded
    "/%09/evil.example",
    "/\t/evil.example",
    "\t//evil.example",
    # newline, CR and other characters browsers drop or read as a slash
    "/\n/evil.example",
    "/\r/evil.example",
    "/\r\n/evil.example",
    "/%0a/evil.example",
    "/%0D/evil.example",
    "/\\evil.example",
    "/\\\\evil.example",
    "\\/evil.example",
    "\\\\evil.example",
    "/\\/evil.example",
    "/%5Cevil.example",
    "/%5C%5Cevil.example",
    # protocol-relative and scheme forms
    "//evil.example",
    "///evil.example",
    "//evil.example/%2F..",
    "/%2F/evil.example",
    "/%2f%2fevil.example",
    "%2F%2Fevil.example",
    "/%252F%252Fevil.example",
    "/%25252F%25252Fevil.example",
    "https:evil.example",
    "https:/evil.example",
    "https://evil.example/",
    "HTTPS://evil.example",
    "//evil.example@app.example",
    "/ /evil.example",
    " //evil.example",
    "//\tevil.example",
    "/\x00/evil.example",
    "/\x0b/evil.example",
    "/\x0c/evil.example",
    "/\x85/evil.example",
    # unicode slashes and spaces, raw and percent-encoded
    "/\uff0f\uff0fevil.example",
    "/\u2215\u2215evil.example",
    "/\u3000/evil.example",
    "/\u2028/evil.example",
    "/%C0%AF/evil.example",
    "/%E0%80%AF/evil.example",
    "/%EF%BC%8F%EF%BC%8Fevil.example",
    # script and data URLs
    "javascript:alert(document.domain)",
    "JaVaScRiPt:alert(1)",
    "java\tscript:alert(1)",
    "/javascript:alert(1)//%0a",
    "data:text/html,<script>alert(1)</script>",
]


# Division slashes: nothing folds them into "/", so this is an ordinary (odd) path on this site.
HARMLESS_LOOKALIKES = {"/\u2215\u2215evil.example"}


def stays_here(location: str) -> bool:
    """Whether a browser that gets this Location on a page of ours stays on our origin."""
    for candidate in (location, unquote(location)):
        try:
            url = ada_url.URL(candidate, base=BASE)
        except ValueError:
            continue  # a browser cannot follow what it cannot parse
        if url.protocol != "https:" or url.host != "app.example":
            return False
    return True


def _location(response) -> str:
    assert response.status_code in (301, 302, 303, 307, 308), response.status_code
    return response.headers["Location"]


@pytest.fixture
def member(password):
    return UserFactory()


def _sign_in(client, csrf, user, password, next_):
    return client.post(
        "/login", query_string={"next": next_}, data={"email": user.email, "password": password}, headers=csrf()
    )


def refused(location: str, payload: str) -> bool:
    """The payload was dropped for the inbox (or, for a harmless lookalike, kept as the path on this site it is)."""
    return location == "/inbox" or (payload in HARMLESS_LOOKALIKES and stays_here(location))


@pytest.mark.parametrize("payload", PAYLOADS)
def test_login_post_next_never_leaves_the_site(client, csrf, member, password, payload):
    location = _location(_sign_in(client, csrf, member, password, payload))
    assert stays_here(location), location
    assert refused(location, payload), location


@pytest.mark.parametrize("payload", PAYLOADS)
def test_login_post_next_in_a_raw_query_string(client, csrf, member, password, payload):
    """The attacker writes the query string by hand (only the characters HTTP cannot carry are encoded)."""
    raw = quote(payload, safe="/%\\:@?=&")
    response = client.post(f"/login?next={raw}", data={"email": member.email, "password": password}, headers=csrf())
    location = _location(response)
    assert stays_here(location), location


@pytest.mark.parametrize("payload", PAYLOADS)
def test_login_get_next_for_a_signed_in_user_never_leaves_the_site(client, login_as, member, payload):
    login_as(member)
    location = _location(client.get("/login", query_string={"next": payload}))
    assert stays_here(location), location
    assert refused(location, payload), location


def test_the_issue_payload_exactly_as_sent(client, csrf, login_as, member, password):
    response = client.post(
        "/login?next=/%09/evil.example", data={"email": member.email, "password": password}, headers=csrf()
    )
    assert _location(response) == "/inbox"
    assert _location(client.get("/login?next=/%09/evil.example")) == "/inbox"


@pytest.mark.parametrize("payload", PAYLOADS)
def test_inbox_action_next_never_leaves_the_site(client, csrf, login_as, member, payload):
    login_as(member)
    row = NotificationFactory(user_id=member.id)
    response = client.post(f"/inbox/notifications/{row.id}/read", data={"next": payload}, headers=csrf())
    location = _location(response)
    assert stays_here(location), location
    assert refused(location, payload), location


@pytest.mark.parametrize("payload", [p for p in PAYLOADS if "\x00" not in p])  # PostgreSQL text holds no NUL
def test_a_notification_link_from_the_api_never_leaves_the_site(client, csrf, login_as, member, payload):
    """The link_path of a notification (set by a product service) is where "open" goes."""
    login_as(member)
    row = NotificationFactory(user_id=member.id, link_path=payload)
    location = _location(client.post(f"/inbox/notifications/{row.id}/open", headers=csrf()))
    assert stays_here(location), location
    assert location.startswith("/inbox") or payload in HARMLESS_LOOKALIKES, location


@pytest.mark.parametrize("payload", [*PAYLOADS, "/console/\t/evil.example", "/console//evil.example"])
def test_dlq_action_next_never_leaves_the_site(client, csrf, login_as, payload, monkeypatch):
    monkeypatch.setattr("app.queueing.enqueue_deliveries", lambda *a: True)
    login_as(UserFactory(role="operator"))
    note = NotificationFactory(type=NotificationTypeFactory(type="comment").type)
    row = DeliveryFactory(notification_id=note.id, channel="email", status="failed", error_kind="refused")
    location = _location(client.post(f"/console/dlq/{row.id}/replay", data={"next": payload}, headers=csrf()))
    assert stays_here(location), location


@pytest.mark.parametrize(
    "path", ["//evil.example/", "//evil.example/console", "///evil.example/console//", "/console", "//console", "/\\x"]
)
def test_routing_redirects_stay_on_the_site(client, path):
    """Werkzeug's own redirects (merged slashes, a missing trailing slash) on a request line of the attacker's."""
    response = client.get("/", environ_overrides={"PATH_INFO": path}, headers={"Host": "app.example"})
    if response.status_code in (301, 302, 303, 307, 308):
        location = response.headers["Location"]
        for candidate in (location, unquote(location)):
            assert ada_url.URL(candidate, base="http://app.example/x").host == "app.example", location
