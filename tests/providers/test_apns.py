"""APNs against a local stand-in speaking Apple's protocol (real TLS, real HTTP/2, the JWT verified): every answer."""

from __future__ import annotations

import base64
import json
import os
import ssl
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from app.config import Config, check
from app.providers.apns import JWT_REUSE_SECONDS, ApnsProvider, ProviderToken, close_connections
from app.providers.apns_payload import COLLAPSE_ID_LIMIT, PAYLOAD_LIMIT, apns_payload
from app.providers.base import Message, PermanentError, TransientError
from app.providers.mobile import DeviceTarget, MobileAlert, MobilePush
from app.providers.registry import provider_names, registered_names
from tests.support.apns_server import KEY_ID, TEAM_ID, TOPIC, Answer, ApnsServer, device_token, make_key
from tests.support.waiting import free_port

ALERT = MobileAlert("Build failed", "main is red")


@pytest.fixture
def apns(tmp_path):
    """A running stand-in; the process's APNs clients are closed afterwards (the next test has its own port)."""
    with ApnsServer(tmp_path) as server:
        yield server
        close_connections()


def provider_for(server: ApnsServer, **settings) -> ApnsProvider:
    provider = ApnsProvider.from_config(server.settings(**settings))
    assert provider is not None
    return provider


def message(*tokens: str, push: MobilePush | None = None, locale: str = "", app_id: str | None = None) -> Message:
    push = push or MobilePush(alerts={"": ALERT}, notification_id=42, link="https://hato.test/n/42")
    targets = tuple(DeviceTarget(i, "ios", token, app_id, locale) for i, token in enumerate(tokens, 1))
    return Message(1, "push", "user:1", "Build failed", "", targets=targets, mobile=push)


# What goes out.


def test_every_device_gets_apples_headers_and_payload(apns):
    phone, tablet = device_token(), device_token()
    push = MobilePush(alerts={"": ALERT}, notification_id=42, link="https://hato.test/n/42", group_key="build-7",
                      ttl=900)  # fmt: skip
    before = int(time.time())

    receipt = provider_for(apns).send(message(phone, tablet, push=push))

    assert sorted(apns.tokens_received()) == sorted([phone, tablet])
    got = next(p for p in apns.received if p.token == phone)
    assert got.payload == {
        "aps": {"alert": {"title": "Build failed", "body": "main is red"}, "sound": "default"},
        "notification_id": 42,
        "link": "https://hato.test/n/42",
    }
    headers = got.headers
    assert (headers["apns-topic"], headers["apns-push-type"], headers["apns-priority"]) == (TOPIC, "alert", "10")
    assert before + 900 <= int(headers["apns-expiration"]) <= int(time.time()) + 900
    assert headers["apns-collapse-id"] == "build-7"
    assert headers["authorization"] == f"bearer {got.jwt}"
    assert sorted(receipt.reached) == sorted([phone, tablet]) and receipt.invalidated == ()
    assert receipt.provider == "apns"
    assert receipt.message_id in {p.apns_id for p in apns.received}  # the apns-id APNs answered
    scope = f"apns:localhost:{apns.port}"
    assert {(o.scope, o.outcome, o.target) for o in receipt.outcomes} == {
        (scope, "sent", phone),
        (scope, "sent", tablet),
    }


def test_the_alert_is_in_the_devices_language_with_badge_thread_and_subtitle(apns):
    token = device_token()
    push = MobilePush(alerts={"": ALERT, "ja": MobileAlert("ビルド失敗", "main が赤い", subtitle="CI")}, badge=3,
                      thread_id="builds", notification_id=7)  # fmt: skip

    provider_for(apns).send(message(token, push=push, locale="ja-JP"))

    assert apns.received[0].payload == {
        "aps": {
            "alert": {"title": "ビルド失敗", "subtitle": "CI", "body": "main が赤い"},
            "badge": 3,
            "thread-id": "builds",
            "sound": "default",
        },
        "notification_id": 7,
    }


def test_a_devices_own_app_id_is_its_topic(tmp_path):
    with ApnsServer(tmp_path, topics=(TOPIC, "org.hato.other")) as server:
        token = device_token()
        provider_for(server).send(message(token, app_id="org.hato.other"))
        assert server.received[0].headers["apns-topic"] == "org.hato.other"
        close_connections()


def test_normal_priority_is_5(apns):
    provider_for(apns).send(message(device_token(), push=MobilePush(alerts={"": ALERT}, priority="normal")))
    assert apns.received[0].headers["apns-priority"] == "5"


def test_a_background_push_carries_only_the_badge_with_priority_5(apns):
    push = MobilePush(badge=5, background=True, priority="high", notification_id=9)

    provider_for(apns).send(message(device_token(), push=push))

    got = apns.received[0]
    assert got.payload == {"aps": {"content-available": 1, "badge": 5}}
    assert (got.headers["apns-push-type"], got.headers["apns-priority"]) == ("background", "5")


def test_a_long_body_is_cut_to_fit_4096_bytes(apns):
    token = device_token()
    body = "長い本文です。" * 1000  # 21,000 bytes of UTF-8
    push = MobilePush(alerts={"": MobileAlert("Title stays", body)}, link="https://hato.test/n/1", notification_id=1)

    provider_for(apns).send(message(token, push=push))

    got = apns.received[0]
    assert int(got.headers["content-length"]) <= PAYLOAD_LIMIT
    alert = got.payload["aps"]["alert"]
    assert alert["title"] == "Title stays" and got.payload["link"] == "https://hato.test/n/1"
    assert alert["body"].endswith("…") and body.startswith(alert["body"][:-1])
    assert int(got.headers["content-length"]) > PAYLOAD_LIMIT - 40  # cut no more than needed


def test_the_payload_cut_accounts_for_json_escaping():
    body = '"\\' * 3000  # every character doubles when escaped
    payload = apns_payload(MobilePush(alerts={"": MobileAlert("t", body)}), MobileAlert("t", body))
    assert len(payload) <= PAYLOAD_LIMIT
    assert json.loads(payload)["aps"]["alert"]["body"].endswith("…")


def test_the_collapse_id_is_cut_to_64_bytes_never_mid_character(apns):
    push = MobilePush(alerts={"": ALERT}, group_key="é" * 40)  # 80 bytes

    provider_for(apns).send(message(device_token(), push=push))

    collapse = apns.received[0].headers["apns-collapse-id"]
    assert collapse == "é" * 32 and len(collapse.encode()) == COLLAPSE_ID_LIMIT


# What comes back.


def test_410_unregistered_invalidates_the_token_with_apples_timestamp(apns):
    token = device_token()
    apns.script(token, Answer.unregistered(1_700_000_000_123))

    with pytest.raises(PermanentError) as caught:
        provider_for(apns).send(message(token))

    error = caught.value
    assert error.kind == "device_gone" and error.response_code == 410
    assert error.invalidated == (token,)
    (outcome,) = error.outcomes
    assert (outcome.outcome, outcome.target, outcome.invalid) == ("permanent", token, "Unregistered")
    assert outcome.invalid_since == pytest.approx(1_700_000_000.123)
    assert token not in str(error)  # a token is never written whole


@pytest.mark.parametrize("answer", [Answer.bad_device_token(), Answer.not_for_topic()])
def test_a_token_apple_calls_bad_is_invalidated(apns, answer):
    token = device_token()
    apns.script(token, answer)

    with pytest.raises(PermanentError) as caught:
        provider_for(apns).send(message(token))

    assert caught.value.invalidated == (token,)
    (outcome,) = caught.value.outcomes
    assert (outcome.outcome, outcome.invalid, outcome.invalid_since) == ("permanent", answer.reason, None)


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (Answer(400, "BadExpirationDate"), "http_400"),
        (Answer(403, "Forbidden"), "credentials"),
        (Answer(404, "BadPath"), "http_404"),
        (Answer(405, "MethodNotAllowed"), "http_405"),
        (Answer(413, "PayloadTooLarge"), "http_413"),
    ],
)
def test_other_refusals_are_permanent_for_the_device_and_invalidate_nothing(apns, answer, kind):
    token = device_token()
    apns.script(token, answer)

    with pytest.raises(PermanentError) as caught:
        provider_for(apns).send(message(token))

    assert (caught.value.kind, caught.value.response_code, caught.value.invalidated) == (kind, answer.status, ())
    assert answer.reason in str(caught.value)
    (outcome,) = caught.value.outcomes
    assert (outcome.outcome, outcome.invalid) == ("permanent", None)


def test_a_topic_apns_does_not_allow_is_refused_by_the_stand_in_itself(apns):
    with pytest.raises(PermanentError, match="400 TopicDisallowed"):
        provider_for(apns, APNS_TOPIC="org.someone.else").send(message(device_token()))


def test_a_jwt_signed_with_another_key_is_refused(apns, tmp_path):
    other = tmp_path / "other.p8"
    make_key(other)

    with pytest.raises(PermanentError) as caught:
        provider_for(apns, APNS_KEY_FILE=str(other)).send(message(device_token()))

    assert caught.value.kind == "credentials" and "403 InvalidProviderToken" in str(caught.value)


@pytest.mark.parametrize(
    ("answer", "kind", "wait"),
    [
        (Answer.too_many(retry_after="30"), "rate_limited", 30.0),
        (Answer.too_many(), "rate_limited", None),
        (Answer.unavailable(retry_after="120"), "http_503", 120.0),
        (Answer.unavailable(retry_after="99999999"), "http_503", 600.0),  # capped at RETRY_CAP_SECONDS
        (Answer.unavailable(retry_after="soon"), "http_503", None),  # not a delay: ignored
        (Answer.internal_error(), "http_500", None),
    ],
)
def test_429_and_5xx_are_transient_with_their_retry_after(apns, answer, kind, wait):
    token = device_token()
    apns.script(token, answer)

    with pytest.raises(TransientError) as caught:
        provider_for(apns).send(message(token))

    assert (caught.value.kind, caught.value.retry_after, caught.value.invalidated) == (kind, wait, ())
    (outcome,) = caught.value.outcomes
    assert (outcome.outcome, outcome.retry_after, outcome.target) == ("transient", wait, token)


def test_a_slow_answer_is_a_transient_timeout(apns):
    token = device_token()
    apns.script(token, Answer.slow(2.0))

    started = time.monotonic()
    with pytest.raises(TransientError) as caught:
        provider_for(apns, APNS_TIMEOUT=0.3).send(message(token))

    assert caught.value.kind == "timeout" and time.monotonic() - started < 1.5
    assert token not in str(caught.value)


def test_nobody_listening_is_a_transient_connection_error(apns):
    with pytest.raises(TransientError) as caught:
        provider_for(apns, APNS_ENDPOINT=f"https://localhost:{free_port()}").send(message(device_token()))
    assert caught.value.kind == "connection"


def test_one_device_that_takes_it_makes_the_message_sent(apns):
    down, gone, fine = device_token(), device_token(), device_token()
    apns.script(down, Answer.unavailable(retry_after="60"))
    apns.script(gone, Answer.unregistered(1_700_000_000_000))

    receipt = provider_for(apns).send(message(down, gone, fine))

    assert receipt.reached == (fine,) and receipt.invalidated == (gone,)
    assert {o.target: (o.outcome, o.retry_after, o.invalid) for o in receipt.outcomes} == {
        down: ("transient", 60.0, None),
        gone: ("permanent", None, "Unregistered"),
        fine: ("sent", None, None),
    }


def test_none_taking_it_is_transient_when_one_failure_was(apns):
    down, gone = device_token(), device_token()
    apns.script(down, Answer.too_many(retry_after="5"))
    apns.script(gone, Answer.unregistered(1_700_000_000_000))

    with pytest.raises(TransientError) as caught:
        provider_for(apns).send(message(down, gone))

    assert caught.value.kind == "rate_limited" and caught.value.retry_after == 5.0
    assert caught.value.invalidated == (gone,) and len(caught.value.outcomes) == 2


def test_none_taking_it_is_permanent_when_every_failure_was(apns):
    bad, gone = device_token(), device_token()
    apns.script(bad, Answer.bad_device_token())
    apns.script(gone, Answer.unregistered(1_700_000_000_000))

    with pytest.raises(PermanentError) as caught:
        provider_for(apns).send(message(bad, gone))

    assert sorted(caught.value.invalidated) == sorted([bad, gone])
    assert "BadDeviceToken" in str(caught.value) and "Unregistered" in str(caught.value)


def test_without_an_ios_device_nothing_is_sent(apns):
    android = DeviceTarget(1, "android", "fcm-token")
    with pytest.raises(PermanentError) as caught:
        provider_for(apns).send(Message(1, "push", "user:1", "s", "", targets=(android,), mobile=MobilePush()))
    assert caught.value.kind == "no_device" and apns.received == []


def test_a_token_that_is_not_hex_never_reaches_a_url(apns):
    with pytest.raises(PermanentError) as caught:
        provider_for(apns).send(message("../../../3/device/abcdef0123456789"))
    assert caught.value.outcomes[0].invalid == "BadDeviceToken"
    assert apns.received == [] and apns.refused == []


# The provider token.


def test_one_jwt_serves_many_sends_across_batches_and_threads(apns):
    for _ in range(3):  # the engine builds its providers per batch
        provider = provider_for(apns)
        with provider:
            for _ in range(4):
                provider.send(message(*(device_token() for _ in range(5))))

    assert len(apns.received) == 60 and len(apns.jwts) == 1


def test_the_jwt_is_signed_anew_after_50_minutes(apns):
    now = [1_000_000.0]
    token = ProviderToken(str(apns.key_file), KEY_ID, TEAM_ID, clock=lambda: now[0])
    first = token.current()
    now[0] += JWT_REUSE_SECONDS - 1
    assert token.current() == first
    now[0] += 1
    second = token.current()
    assert second != first
    header, claims = (json.loads(_b64(part)) for part in second.split(".")[:2])
    assert (header["alg"], header["kid"], claims) == ("ES256", KEY_ID, {"iss": TEAM_ID, "iat": int(now[0])})


def test_expired_provider_token_is_renewed_and_the_request_tried_once_more(apns):
    token = device_token()
    apns.script(token, Answer.expired_jwt())

    receipt = provider_for(apns).send(message(token))

    assert receipt.reached == (token,)
    assert [(r.status, r.reason) for r in apns.refused] == [(403, "ExpiredProviderToken")]
    assert len(apns.jwts) == 2 and apns.received[0].jwt == apns.jwts[1]
    provider_for(apns).send(message(device_token()))
    assert len(apns.jwts) == 2  # the new one is kept


def test_devices_refused_together_for_an_expired_token_renew_it_once(apns):
    provider = provider_for(apns)
    provider.send(message(device_token()))
    apns.expire_jwt()

    receipt = provider.send(message(*(device_token() for _ in range(8))))

    assert len(receipt.reached) == 8
    assert len(apns.jwts) == 2  # eight 403s, one new JWT (Apple refuses renewals more often than every 20 min)


# One connection.


def test_one_http2_connection_carries_a_messages_devices_at_once(apns):
    tokens = [device_token() for _ in range(10)]
    for token in tokens:
        apns.script(token, Answer.slow(0.4))

    started = time.monotonic()
    receipt = provider_for(apns).send(message(*tokens))

    assert len(receipt.reached) == 10
    assert time.monotonic() - started < 2.0  # ten 0.4 s answers side by side, not one after another
    assert apns.max_streams == 10
    assert len(apns.connections) == 1
    for _ in range(3):  # later batches build new providers and keep the connection
        provider_for(apns).send(message(device_token(), device_token()))
    assert len(apns.connections) == 1


def test_many_threads_sending_many_iphones_each_share_one_connection_without_breaking_it(apns):
    """httpx's synchronous HTTP/2 connection is not thread-safe: 250 messages x 20 iPhones from several threads
    once lost the connection 147 times. On the provider's event loop, every push arrives on one connection."""
    provider = provider_for(apns)
    batches = [[device_token() for _ in range(20)] for _ in range(40)]
    for tokens in batches:  # answers that take a little while keep many streams open while others start
        for token in tokens:
            apns.script(token, Answer.slow(0.02))
    with ThreadPoolExecutor(4) as senders:  # the engine's lanes and push's parts send from threads of their own
        receipts = list(senders.map(lambda tokens: provider.send(message(*tokens)), batches))

    assert all(len(receipt.reached) == 20 for receipt in receipts)
    assert len(apns.received) == 800 and apns.refused == []
    assert len(apns.connections) == 1 and apns.max_streams > 1


def test_apns_concurrency_bounds_the_streams_of_one_message(apns):
    tokens = [device_token() for _ in range(9)]
    for token in tokens:
        apns.script(token, Answer.slow(0.2))

    provider_for(apns, APNS_CONCURRENCY=3).send(message(*tokens))

    assert apns.max_streams == 3 and len(apns.received) == 9


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents_alone(apns):
    provider = provider_for(apns)
    provider.send(message(device_token()))
    pid = os.fork()
    if pid == 0:  # the child: send once on a connection of its own, then leave without cleaning up
        try:
            provider.send(message(device_token()))
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)

    assert os.waitstatus_to_exitcode(status) == 0
    provider.send(message(device_token()))  # the parent's connection still works
    assert len(apns.received) == 3 and len(apns.connections) == 2
    assert len(apns.jwts) == 1  # the child kept the parent's JWT


def test_the_stand_in_speaks_http2_only(apns):
    with httpx.Client(verify=_ca(apns)) as client:  # HTTP/1.1
        response = client.post(f"{apns.url}/3/device/{device_token()}", content=b"{}")
    assert response.status_code == 505


# Settings.


def problems(**env) -> list[str]:
    config = Config({"SECRET_KEY": "k" * 48, "HATO_DEV": "0", **env})
    return check(vars(config), registered_names())


def test_apns_is_off_without_a_key_file_and_registered_as_apns(apns):
    assert ApnsProvider.from_config(vars(Config({}))) is None
    assert "apns" in registered_names()
    assert provider_names("push", {"PUSH_PROVIDER": "apns"}) == ["apns"]


def test_a_working_apns_setup_has_no_problems(apns):
    assert problems(**{k: str(v) for k, v in apns.settings().items()}) == []


def test_a_missing_key_file_is_refused(tmp_path):
    found = problems(APNS_KEY_FILE=str(tmp_path / "AuthKey.p8"), APNS_KEY_ID=KEY_ID, APNS_TEAM_ID=TEAM_ID,
                     APNS_TOPIC=TOPIC)  # fmt: skip
    assert any(p.startswith("APNS_KEY_FILE=") and "cannot be read" in p for p in found), found


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (b"not a key", "is not an unencrypted PEM private key"),
        (ec.generate_private_key(ec.SECP384R1()), "is not an EC P-256 key"),
        (rsa.generate_private_key(65537, 2048), "is not an EC P-256 key"),
    ],
)
def test_a_key_file_that_is_not_a_p256_key_is_refused(tmp_path, key, expected):
    path = tmp_path / "AuthKey.p8"
    if isinstance(key, bytes):
        path.write_bytes(key)
    else:
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    found = problems(APNS_KEY_FILE=str(path), APNS_KEY_ID=KEY_ID, APNS_TEAM_ID=TEAM_ID, APNS_TOPIC=TOPIC)
    assert any(p.startswith("APNS_KEY_FILE=") and expected in p for p in found), found


def test_a_key_file_without_its_ids_is_refused(tmp_path):
    path = tmp_path / "AuthKey.p8"
    make_key(path)
    found = problems(APNS_KEY_FILE=str(path), APNS_KEY_ID=KEY_ID)
    assert "APNS_KEY_FILE is set but APNS_TEAM_ID, APNS_TOPIC are not: APNs needs all of them" in found


@pytest.mark.parametrize(
    "endpoint",
    ["http://api.push.apple.com", "ftp://api.push.apple.com", "api.push.apple.com", "https://", "http://10.0.0.1:2197"],
)
def test_an_endpoint_that_is_not_https_is_refused(endpoint):
    assert any(
        p.startswith(f"APNS_ENDPOINT={endpoint!r} is not an https:// URL") for p in problems(APNS_ENDPOINT=endpoint)
    )


@pytest.mark.parametrize(
    "endpoint",
    ["https://api.sandbox.push.apple.com", "http://127.0.0.1:2197", "http://[::1]:2197", "http://localhost:2197"],
)
def test_https_or_loopback_http_endpoints_are_accepted(endpoint):
    assert problems(APNS_ENDPOINT=endpoint) == []


def test_a_missing_ca_file_is_refused(tmp_path):
    found = problems(APNS_CA_FILE=str(tmp_path / "ca.pem"))
    assert any(p.startswith("APNS_CA_FILE=") for p in found), found


def test_a_lease_shorter_than_an_apns_request_is_refused(apns):
    settings = {k: str(v) for k, v in apns.settings(APNS_TIMEOUT=60).items()}
    found = problems(**settings, DELIVERY_LEASE_SECONDS="30")
    assert any("APNS_TIMEOUT=60" in p and "a row could be sent twice" in p for p in found), found


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _ca(server: ApnsServer) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(server.ca_file))
