"""Issue 14 item 4, SSRF through push subscriptions: a member points the workers' POST at internal hosts.

The attacker is a signed-in member. They subscribe an endpoint of their choosing (cloud metadata, the
Redis port, private ranges, IPv4-mapped IPv6, a name that resolves inside), or one on a host they run
that redirects inside, answers 10 MB, or trickles its answer. The server runs with production push
settings here (PUSH_ALLOWED_HOSTS default, no http, no private addresses). Name resolution is faked at
the socket level (socket.getaddrinfo) so nothing leaves 127.0.0.1; a fake address that is "public" is
never connected to, and every address that is connected to is a listener of this module.
"""

from __future__ import annotations

import socket
import time

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import PushSubscription
from app.providers import Message, PermanentError, ProviderError, TransientError
from app.providers.webpush import PushTarget, WebPushProvider
from tests.factories import UserFactory
from tests.support.listener import Listener
from tests.support.push import KEYS, PushService

PRODUCTION_HOSTS = "fcm.googleapis.com,updates.push.services.mozilla.com,web.push.apple.com,*.notify.windows.com"
PUBLIC = "142.250.74.10"  # what the fake resolver says for the allowed names; never connected to
KEYS_OF = PushService(origin="https://fcm.googleapis.com").subscribe()["keys"]
_real_getaddrinfo = socket.getaddrinfo


class FakeDNS:
    """socket.getaddrinfo for names in `names` (name -> [(ip, port or None)]); other names do not resolve."""

    def __init__(self) -> None:
        self.names: dict[str, list[tuple[str, int | None]]] = {"fcm.googleapis.com": [(PUBLIC, None)]}
        self.lookups: list[str] = []

    def __call__(self, host, port, family=0, type=0, proto=0, flags=0):  # noqa: A002 - socket's own signature
        name = host.decode() if isinstance(host, bytes) else str(host)
        self.lookups.append(name)
        if name not in self.names:
            try:
                socket.inet_pton(socket.AF_INET6 if ":" in name else socket.AF_INET, name)
            except OSError:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
            return _real_getaddrinfo(host, port, family, type, proto, flags)
        answers = []
        for ip, forced_port in self.names[name]:
            family_ = socket.AF_INET6 if ":" in ip else socket.AF_INET
            address = (ip, forced_port or int(port or 443)) + ((0, 0) if family_ == socket.AF_INET6 else ())
            answers.append((family_, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", address))
        return answers


@pytest.fixture
def dns(monkeypatch) -> FakeDNS:
    """Name resolution faked at the socket level for the whole process (the app and the sender)."""
    fake = FakeDNS()
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return fake


@pytest.fixture
def production(app, monkeypatch, dns):
    """Production push settings: the public push services only, https on 443, no private addresses."""
    monkeypatch.setitem(app.config, "PUSH_ALLOWED_HOSTS", PRODUCTION_HOSTS)
    monkeypatch.setitem(app.config, "PUSH_ALLOW_HTTP_ENDPOINTS", False)
    monkeypatch.setitem(app.config, "PUSH_ALLOW_PRIVATE_ADDRESSES", False)
    return app.config


@pytest.fixture
def attacker(client, login_as, csrf):
    """A signed-in member posting subscriptions; returns post(endpoint) -> response."""
    user = login_as(UserFactory())

    def post(endpoint: str):
        return client.post("/push/subscriptions", json={"endpoint": endpoint, "keys": KEYS_OF}, headers=csrf())

    post.user = user
    return post


def stored(user) -> list[str]:
    db.session.expire_all()
    return list(db.session.scalars(sa.select(PushSubscription.endpoint).where(PushSubscription.user_id == user.id)))


def provider(config, **overrides) -> WebPushProvider:
    settings = {**config, "VAPID_PRIVATE_KEY": KEYS[1], "VAPID_SUBJECT": "mailto:ops@hato.test", "PUSH_TIMEOUT": 1.0}
    return WebPushProvider.from_config({**settings, **overrides})


def message(*endpoints: str) -> Message:
    targets = tuple(PushTarget(endpoint, KEYS_OF["p256dh"], KEYS_OF["auth"]) for endpoint in endpoints)
    return Message(1, "push", "user:1", "Hi", '{"title":"Hi"}', headers={"TTL": "60"}, targets=targets)


def send(config, *endpoints: str, **overrides) -> tuple[ProviderError | None, float]:
    """Send one message to endpoints; (the error or None, seconds it took)."""
    started = time.monotonic()
    with provider(config, **overrides) as sender:
        try:
            sender.send(message(*endpoints))
        except ProviderError as exc:
            return exc, time.monotonic() - started
    return None, time.monotonic() - started


# --- at subscribe: the endpoint is refused and nothing is stored ------------------------------------------


def test_a_real_push_service_endpoint_is_still_accepted(production, attacker):
    response = attacker("https://fcm.googleapis.com/fcm/send/dXNlcjE6abc")
    assert response.status_code == 201
    assert stored(attacker.user) == ["https://fcm.googleapis.com/fcm/send/dXNlcjE6abc"]


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",  # cloud metadata over http
        "http://fcm.googleapis.com/fcm/send/x",  # plain http even to an allowed host
    ],
)
def test_http_endpoints_are_refused(production, attacker, endpoint):
    response = attacker(endpoint)
    assert response.status_code == 400 and "https" in response.json["detail"]
    assert stored(attacker.user) == []


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://169.254.169.254/latest/meta-data/",  # cloud metadata
        "https://127.0.0.1:6379/",  # the Redis port
        "https://[::ffff:127.0.0.1]/",  # IPv4-mapped IPv6 loopback
        "https://[::ffff:7f00:1]/x",  # the same, hex spelling
        "https://[::1]/",
        "https://10.0.0.1/",
        "https://192.168.1.1/admin",
        "https://0.0.0.0/",
        "https://2130706433/",  # 127.0.0.1 as one decimal number
        "https://localhost/",
        "https://evil.example/push",  # any host that is not a push service
        "https://fcm.googleapis.com.evil.example/x",  # an allowed name as a prefix
        "https://evilfcm.googleapis.com.example/x",
        "https://notify.windows.com.evil.example/x",  # the wildcard's suffix without its dot
        "https://fcm.googleapis.com@127.0.0.1/x",  # userinfo that looks like the host
        "https://fcm.googleapis.com:443@10.0.0.1/x",
        "https://fcm.googleapis.com\\@10.0.0.1/x",  # a backslash parsers disagree about
        "https://fcm.googleapis.com:6379/fcm/send/x",  # an allowed host, another port
        "https://fcm.googleapis.com:8443/fcm/send/x",
    ],
)
def test_internal_and_foreign_endpoints_are_refused(production, attacker, endpoint):
    response = attacker(endpoint)
    assert response.status_code == 422, (endpoint, response.status_code, response.get_data(as_text=True)[:200])
    assert response.mimetype == "application/problem+json" and response.json["detail"]
    assert stored(attacker.user) == []


@pytest.mark.parametrize(
    ("address", "endpoint"),
    [
        ("127.0.0.1", "https://127.0.0.1/"),
        ("::ffff:127.0.0.1", "https://[::ffff:127.0.0.1]/"),
        ("10.0.0.1", "https://10.0.0.1/"),
        ("169.254.169.254", "https://169.254.169.254/latest/meta-data/"),
        ("::1", "https://[::1]/"),
        ("fd00::1", "https://[fd00::1]/"),
        ("64:ff9b::a9fe:a9fe", "https://[64:ff9b::a9fe:a9fe]/"),  # NAT64 of 169.254.169.254
        ("2002:a00:1::", "https://[2002:a00:1::]/"),  # 6to4 of 10.0.0.1
        ("224.0.0.1", "https://224.0.0.1/"),
        ("0.0.0.0", "https://0.0.0.0/"),  # noqa: S104 - an attacker's endpoint, not a bind
        ("100.64.0.1", "https://100.64.0.1/"),  # carrier-grade NAT
    ],
)
def test_internal_addresses_are_refused_even_when_an_operator_allows_the_host(production, attacker, address, endpoint):
    # An operator who lists an address as a push service still does not open the internal network.
    production["PUSH_ALLOWED_HOSTS"] = f"{PRODUCTION_HOSTS},{address}"
    response = attacker(endpoint)
    assert response.status_code == 422 and "address" in response.json["detail"], response.json
    assert stored(attacker.user) == []


@pytest.mark.parametrize(
    "answers",
    [
        [("127.0.0.1", None)],
        [("10.1.2.3", None)],
        [("::ffff:169.254.169.254", None)],
        [(PUBLIC, None), ("192.168.0.10", None)],  # one inside address among public ones is enough
    ],
)
def test_an_allowed_name_that_resolves_inside_is_refused(production, attacker, dns, answers):
    production["PUSH_ALLOWED_HOSTS"] = f"{PRODUCTION_HOSTS},*.pushsvc.example"
    dns.names["inside.pushsvc.example"] = answers
    response = attacker("https://inside.pushsvc.example/push/1")
    assert response.status_code == 422 and "address" in response.json["detail"]
    assert "inside.pushsvc.example" in dns.lookups
    assert stored(attacker.user) == []


# --- at send: the policy holds on every connection ------------------------------------------------------


def test_dns_rebinding_after_subscribe_never_reaches_the_inside(production, attacker, dns):
    production["PUSH_ALLOWED_HOSTS"] = f"{PRODUCTION_HOSTS},*.pushsvc.example"
    endpoint = "https://rebind.pushsvc.example/push/1"
    dns.names["rebind.pushsvc.example"] = [(PUBLIC, None)]
    assert attacker(endpoint).status_code == 201
    with Listener() as inside:
        # The attacker's DNS now answers with an inside address (the listener stands for Redis, metadata, …).
        dns.names["rebind.pushsvc.example"] = [("127.0.0.1", inside.port)]
        error, _ = send(production, endpoint)
    assert inside.connections == 0
    assert isinstance(error, PermanentError) and error.kind == "endpoint_refused", error


def test_a_subscription_stored_before_the_allow_list_changed_is_not_sent_to(production, dns):
    # A row from before the fix (or from before an operator narrowed PUSH_ALLOWED_HOSTS) is checked again.
    with Listener() as inside:
        dns.names["old.pushsvc.example"] = [("127.0.0.1", inside.port)]
        error, _ = send(production, "https://old.pushsvc.example/push/1", "https://127.0.0.1:6379/")
    assert inside.connections == 0
    assert isinstance(error, PermanentError) and error.kind == "endpoint_refused"


# The next tests run against a push service on 127.0.0.1 (as the test settings allow) to show what the
# transport does with what an attacker's server answers.


def test_a_redirect_to_an_internal_url_is_not_followed(app):
    with Listener() as internal:

        def redirect(conn, listener):
            listener.read_request(conn)
            location = f"http://127.0.0.1:{internal.port}/latest/meta-data/"
            conn.sendall(f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode())

        with Listener(redirect) as attacker_host:
            error, _ = send(app.config, f"http://127.0.0.1:{attacker_host.port}/push/1")
    assert attacker_host.connections == 1
    assert internal.connections == 0
    assert isinstance(error, PermanentError) and "302" in str(error)


@pytest.mark.parametrize("status", [400, 503])
def test_a_10_mb_answer_is_read_only_up_to_the_cap(app, status):
    size = 10 * 1024 * 1024

    def huge(conn, listener):
        listener.read_request(conn)
        conn.sendall(f"HTTP/1.1 {status} Nope\r\nContent-Type: text/plain\r\nContent-Length: {size}\r\n\r\n".encode())
        chunk = b"A" * 65536
        for _ in range(size // len(chunk)):
            conn.sendall(chunk)
            listener.sent += len(chunk)
        listener.finished = True

    with Listener(huge) as attacker_host:
        error, elapsed = send(app.config, f"http://127.0.0.1:{attacker_host.port}/push/1", PUSH_TIMEOUT=5.0)
        time.sleep(0.2)
    assert isinstance(error, PermanentError if status == 400 else TransientError)
    assert not attacker_host.finished and attacker_host.sent < size // 2
    assert str(error).count("A") <= 120 and len(str(error)) <= 160, str(error)


def test_a_trickling_push_service_is_cut_at_the_deadline(app):
    def trickle(conn, listener):
        listener.read_request(conn)
        conn.sendall(b"HTTP/1.1 201 Created\r\nX-Slow: ")
        for _ in range(30):  # one byte every 0.2 s: each read waits far less than PUSH_TIMEOUT
            if listener.stop.wait(0.2):
                return
            conn.sendall(b"z")
        conn.sendall(b"\r\nContent-Length: 0\r\n\r\n")
        listener.finished = True

    with Listener(trickle) as attacker_host:
        error, elapsed = send(app.config, f"http://127.0.0.1:{attacker_host.port}/push/1", PUSH_TIMEOUT=1.0)
    assert isinstance(error, TransientError) and error.kind == "timeout", error
    assert elapsed < 2.5, elapsed
    assert not attacker_host.finished


def test_a_job_stops_sending_at_its_deadline(app):
    # Six subscriptions on a host that never answers: PUSH_TIMEOUT each would hold the job for 6 s; the job's
    # own deadline (the delivery lease less the engine's 5 s margin: 2 s here) stops it sooner.
    def hang(conn, listener):
        listener.read_request(conn)
        listener.stop.wait(30)

    with Listener(hang) as attacker_host:
        endpoints = [f"http://127.0.0.1:{attacker_host.port}/push/{i}" for i in range(6)]
        error, elapsed = send(app.config, *endpoints, PUSH_TIMEOUT=1.0, DELIVERY_LEASE_SECONDS=7)
    assert isinstance(error, TransientError)
    assert elapsed < 3.5, elapsed
    assert attacker_host.connections <= 3
