"""FCM HTTP v1 against a local stand-in over real TLS: the OAuth token, the JSON sent, every answer, concurrency."""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from google.auth._helpers import REFRESH_THRESHOLD

from app.config import Config, check
from app.providers import fcm_transport
from app.providers.base import Message, PermanentError, Receipt, TransientError
from app.providers.fcm import FcmProvider, configuration_problem
from app.providers.mobile import DeviceTarget, MobileAlert, MobilePush
from app.providers.registry import provider_for, registered_names
from tests.support.waiting import free_port

PUSH = MobilePush(
    alerts={"": MobileAlert("Build failed", "main is red"), "ja": MobileAlert("ビルド失敗", "main が赤")},
    notification_id=42,
    link="https://hato.test/builds/7",
    group_key="build-7",
    priority="high",
    ttl=900,
)


def device(n: int, platform: str = "android", locale: str = "en") -> DeviceTarget:
    # Long, like real registration tokens, so a log line holding one whole would be noticed; the end tells them apart.
    return DeviceTarget(n, platform, "fcm:" + "x" * 140 + f"{n:08d}", "com.example.hato", locale)


def message(*targets: DeviceTarget, push: MobilePush = PUSH) -> Message:
    return Message(1, "push", "user-1", "Build failed", "main is red", targets=targets, mobile=push)


@pytest.fixture
def provider_config(fcm_server):
    """The settings of an FCM provider that sends to the stand-in with a fresh service account."""
    return fcm_server.settings(fcm_server.service_account())


def provider(config: dict, **overrides) -> FcmProvider:
    built = FcmProvider.from_config({**config, **overrides})
    assert built is not None
    return built


def send(config: dict, *targets: DeviceTarget, push: MobilePush = PUSH, **overrides):
    with provider(config, **overrides) as fcm:
        return fcm.send(message(*targets, push=push))


# -- what is sent


def test_each_android_device_gets_the_v1_message_with_a_bearer_token(fcm_server, provider_config):
    phone, tablet, iphone = device(1), device(2, locale="ja-JP"), device(3, platform="ios")

    receipt = send(provider_config, phone, tablet, iphone)

    assert fcm_server.rejected == []
    assert isinstance(receipt, Receipt) and receipt.provider == "fcm"
    assert receipt.reached == (phone.token, tablet.token)  # the iPhone is APNs' business
    assert receipt.invalidated == ()
    assert receipt.message_id in {r.name for r in fcm_server.received}
    assert receipt.message_id.startswith("projects/hato-test/messages/")
    scope = f"fcm:127.0.0.1:{fcm_server.origin.rsplit(':', 1)[1]}"
    assert [(o.scope, o.outcome, o.target, o.invalid) for o in receipt.outcomes] == [
        (scope, "sent", phone.token, None),
        (scope, "sent", tablet.token, None),
    ]
    got = {r.token: r for r in fcm_server.received}
    assert got[phone.token].message == {
        "token": phone.token,
        "notification": {"title": "Build failed", "body": "main is red"},
        "data": {"notification_id": "42", "link": "https://hato.test/builds/7"},
        "android": {
            "priority": "HIGH",
            "ttl": "900s",
            "collapse_key": "build-7",
            "restricted_package_name": "com.example.hato",
        },
    }
    assert got[tablet.token].message["notification"] == {"title": "ビルド失敗", "body": "main が赤"}
    assert got[phone.token].project_id == "hato-test"
    assert got[phone.token].headers["authorization"].startswith("Bearer ya29.")
    assert got[phone.token].headers["content-type"] == "application/json"


def test_the_token_request_is_a_signed_jwt_bearer_assertion_for_firebase_messaging(fcm_server, provider_config):
    send(provider_config, device(1))

    (claims,) = fcm_server.state.assertions  # verified by the stand-in: RS256 with the account's key, kid
    info = json.loads(Path(provider_config["FCM_CREDENTIALS_FILE"]).read_text())
    assert claims["iss"] == info["client_email"]
    assert claims["aud"] == "https://oauth2.googleapis.com/token"
    assert "https://www.googleapis.com/auth/firebase.messaging" in claims["scope"].split()
    assert 0 < claims["exp"] - claims["iat"] <= 3600


def test_normal_priority_a_long_ttl_and_a_background_update(fcm_server, provider_config):
    quiet = MobilePush(alerts={"": MobileAlert("t", "b")}, priority="normal", ttl=10 * 7 * 86_400)
    send(provider_config, device(1), push=quiet)
    badge_only = MobilePush(notification_id=5, background=True)
    send(provider_config, device(2), push=badge_only)

    assert fcm_server.rejected == []
    first, second = fcm_server.received_by(device(1).token)[0], fcm_server.received_by(device(2).token)[0]
    assert first.message["android"] == {
        "priority": "NORMAL",
        "ttl": f"{28 * 86_400}s",  # FCM's longest
        "restricted_package_name": "com.example.hato",
    }
    assert "data" not in first.message and "collapse_key" not in first.message["android"]
    assert "notification" not in second.message  # data only: the app updates its badge silently
    assert second.message["data"] == {"notification_id": "5"}


def test_a_device_without_an_alert_in_any_language_is_a_permanent_failure(fcm_server, provider_config):
    only_japanese = MobilePush(alerts={"ja": MobileAlert("t", "b")})
    with pytest.raises(PermanentError) as caught:
        send(provider_config, device(1, locale="en"), push=only_japanese)
    assert caught.value.kind == "no_alert"
    assert fcm_server.received == []


def test_no_android_device_is_a_permanent_failure_without_a_request(fcm_server, provider_config):
    with pytest.raises(PermanentError) as caught:
        send(provider_config, device(1, platform="ios"))
    assert caught.value.kind == "no_device"
    assert fcm_server.tokens_issued == 0


def test_the_stand_in_refuses_what_fcm_refuses(fcm_server, provider_config):
    # The checks the provider's JSON passes above are real: a number as a data value is a 400 BadRequest.
    transport = fcm_transport.transport_for(provider(provider_config).settings)
    body = {"message": {"token": "t", "data": {"count": 3}, "android": {"priority": "URGENT"}}}
    reply = transport.client.post(
        f"{fcm_server.origin}/v1/projects/hato-test/messages:send",
        json=body,
        headers={"Authorization": f"Bearer {transport.token()}"},
    )
    assert reply.status_code == 400
    fields = [v["field"] for v in reply.json()["error"]["details"][0]["fieldViolations"]]
    assert fields == ["message.data[0].value", "message.android.priority"]
    assert len(fcm_server.rejected) == 1


# -- answers


@pytest.mark.parametrize(
    ("error", "kind", "invalid"),
    [
        ("UNREGISTERED", "unregistered", "UNREGISTERED"),
        ("INVALID_TOKEN", "invalid_token", "INVALID_ARGUMENT"),
        ("INVALID_TOKEN_FIELD", "invalid_token", "INVALID_ARGUMENT"),
        ("INVALID_ARGUMENT", "invalid_argument", None),
    ],
)
def test_a_gone_or_invalid_token_is_invalidated_and_other_bad_arguments_are_not(
    fcm_server, provider_config, error, kind, invalid
):
    gone = device(1)
    fcm_server.script(gone.token, error)

    with pytest.raises(PermanentError) as caught:
        send(provider_config, gone)

    failure = caught.value
    assert failure.kind == kind
    assert failure.invalidated == ((gone.token,) if invalid else ())
    (outcome,) = failure.outcomes
    assert (outcome.outcome, outcome.target, outcome.invalid) == ("permanent", gone.token, invalid)
    assert str(failure).startswith(f"FCM {400 if error != 'UNREGISTERED' else 404} ")


@pytest.mark.parametrize(
    ("error", "header", "kind", "wait"),
    [
        ("QUOTA_EXCEEDED", "30", "rate_limited", 30.0),
        ("QUOTA_EXCEEDED", None, "rate_limited", None),
        ("UNAVAILABLE", "99999", "unavailable", 600.0),  # capped at RETRY_CAP_SECONDS
        ("UNAVAILABLE", "1e3", "unavailable", None),  # not delta-seconds: ignored
        ("INTERNAL", None, "internal", None),
        ("INTERNAL", "5", "internal", 5.0),
    ],
)
def test_quota_and_outages_are_transient_with_their_retry_after(fcm_server, provider_config, error, header, kind, wait):
    busy = device(1)
    fcm_server.script(busy.token, error, retry_after=header)

    with pytest.raises(TransientError) as caught:
        send(provider_config, busy)

    assert (caught.value.kind, caught.value.retry_after) == (kind, wait)
    (outcome,) = caught.value.outcomes
    assert (outcome.outcome, outcome.retry_after, outcome.invalid) == ("transient", wait, None)


@pytest.mark.parametrize("error", ["SENDER_ID_MISMATCH", "THIRD_PARTY_AUTH_ERROR"])
def test_a_wrong_configuration_is_permanent_misconfigured_and_noted_for_the_dashboard(
    fcm_server, provider_config, error
):
    target = device(1)
    fcm_server.script(target.token, error)

    with pytest.raises(PermanentError) as caught:
        send(provider_config, target)

    assert caught.value.kind == "misconfigured"
    assert caught.value.invalidated == ()  # the device is fine; the project is not
    assert error in configuration_problem()
    assert fcm_server.tokens_issued == 1  # THIRD_PARTY_AUTH_ERROR is a 401, but not about our token: no refresh


def test_a_token_endpoint_that_refuses_the_assertion_is_misconfigured(fcm_server):
    stranger = fcm_server.service_account(project_id="hato-test", known=False)

    with pytest.raises(PermanentError) as caught:
        send(fcm_server.settings(stranger), device(1))

    assert caught.value.kind == "misconfigured"
    assert "invalid_grant" in str(caught.value)
    assert "invalid_grant" in configuration_problem()
    assert fcm_server.tokens_issued == 0 and fcm_server.received == []


def test_a_key_of_another_project_is_misconfigured(fcm_server):
    other = fcm_server.service_account(project_id="hato-test")
    for account in fcm_server.state.accounts.values():  # the key's account belongs elsewhere: FCM says 403
        account.project_id = "someone-else"

    with pytest.raises(PermanentError) as caught:
        send(fcm_server.settings(other), device(1))

    assert caught.value.kind == "misconfigured"
    assert "PERMISSION_DENIED" in str(caught.value)


def test_a_token_endpoint_that_is_down_is_transient(fcm_server, provider_config):
    # google-auth itself retries a retryable refusal twice (about 3 s) before it gives up.
    fcm_server.state.token_answer = (503, {"error": "temporarily_unavailable"})

    with pytest.raises(TransientError) as caught:
        send(provider_config, device(1))

    assert caught.value.kind == "token_unavailable"
    assert caught.value.outcomes == ()  # the provider's own breaker counts it, not a device's scope


def test_an_unreachable_fcm_and_a_slow_one_are_transient(fcm_server, provider_config):
    with pytest.raises(TransientError) as caught:
        send(provider_config, device(1), FCM_API_BASE=f"https://127.0.0.1:{free_port()}")
    assert caught.value.kind == "connection"

    slow = device(2)
    fcm_server.script(slow.token, delay=2.0)
    started = time.monotonic()
    with pytest.raises(TransientError) as caught:
        send(provider_config, slow, FCM_TIMEOUT=0.3)
    assert caught.value.kind == "timeout"
    assert time.monotonic() - started < 1.5


def test_sends_stop_when_the_batch_time_runs_out(fcm_server, provider_config):
    fcm = FcmProvider(provider(provider_config).settings, 600.0, batch_seconds=0.0)
    with fcm, pytest.raises(TransientError) as caught:
        fcm.send(message(device(1)))
    assert caught.value.kind == "timeout"
    assert fcm_server.received == []


def test_sent_when_one_device_accepts_transient_when_none_did_and_one_may_later(fcm_server, provider_config):
    ok, gone, busy, broken = device(1), device(2), device(3), device(4)
    fcm_server.script(gone.token, "UNREGISTERED")
    fcm_server.script(busy.token, "UNAVAILABLE", retry_after="20")
    fcm_server.script(broken.token, "INVALID_ARGUMENT")

    receipt = send(provider_config, ok, gone, busy)
    assert receipt.reached == (ok.token,) and receipt.invalidated == (gone.token,)
    assert [o.outcome for o in receipt.outcomes] == ["sent", "permanent", "transient"]

    with pytest.raises(TransientError) as caught:
        send(provider_config, gone, busy, broken)
    assert (caught.value.kind, caught.value.retry_after, caught.value.invalidated) == (
        "unavailable",
        20.0,
        (gone.token,),
    )

    fcm_server.script(busy.token, "SENDER_ID_MISMATCH")
    with pytest.raises(PermanentError) as caught:
        send(provider_config, gone, broken, busy)
    assert caught.value.kind == "misconfigured"  # says more than the first device's answer


def test_no_log_line_or_error_holds_a_whole_token(fcm_server, provider_config, caplog):
    gone, refused = device(1), device(2)
    fcm_server.script(gone.token, "UNREGISTERED")
    fcm_server.script(refused.token, "SENDER_ID_MISMATCH")

    with caplog.at_level(logging.DEBUG), pytest.raises(PermanentError) as caught:
        send(provider_config, gone, refused)

    assert gone.token[-8:] in caplog.text and refused.token[-8:] in caplog.text
    for token in (gone.token, refused.token):
        assert token not in caplog.text
        assert token not in str(caught.value)
        assert token not in configuration_problem()


# -- the access token


def test_one_token_serves_many_sends_threads_and_batches(fcm_server, provider_config):
    def one_batch(n: int) -> Receipt:
        return send(provider_config, device(n), device(n + 1000))  # a new provider per batch, as the engine

    with ThreadPoolExecutor(8) as pool:
        receipts = list(pool.map(one_batch, range(40)))

    assert all(r.reached for r in receipts)
    assert fcm_server.tokens_issued == 1
    assert len(fcm_server.received) == 80


def test_the_token_is_renewed_shortly_before_it_expires(fcm_server, provider_config):
    # google-auth renews REFRESH_THRESHOLD (3¾ min) early: a token living 1 s past that is renewed after 1 s.
    fcm_server.state.token_lifetime = int(REFRESH_THRESHOLD.total_seconds()) + 1
    send(provider_config, device(1))
    send(provider_config, device(2))
    assert fcm_server.tokens_issued == 1

    time.sleep(1.1)
    send(provider_config, device(3))
    assert fcm_server.tokens_issued == 2
    assert len(fcm_server.received) == 3


def test_a_refused_token_is_renewed_once_for_every_thread_and_the_send_retried(fcm_server, provider_config):
    send(provider_config, device(1))
    fcm_server.revoke_tokens()  # FCM forgets it (revoked, or expired early): the next sends get 401

    receipt = send(provider_config, *(device(n) for n in range(2, 12)))

    assert len(receipt.reached) == 10
    assert fcm_server.tokens_issued == 2  # ten threads saw the 401; one of them asked for a new token
    assert len(fcm_server.received) == 11


def test_a_token_refused_again_after_renewal_is_misconfigured(fcm_server, provider_config):
    target = device(1)
    fcm_server.script(target.token, "UNAUTHENTICATED", times=2)

    with pytest.raises(PermanentError) as caught:
        send(provider_config, target)

    assert caught.value.kind == "misconfigured"
    assert fcm_server.tokens_issued == 2


# -- concurrency and connections


def test_a_messages_devices_are_sent_concurrently_up_to_fcm_concurrency(fcm_server, provider_config):
    targets = [device(n) for n in range(12)]
    for target in targets:
        fcm_server.script(target.token, delay=0.3)

    started = time.monotonic()
    receipt = send(provider_config, *targets, FCM_CONCURRENCY=4)

    assert len(receipt.reached) == 12
    assert fcm_server.state.peak_in_flight == 4
    assert time.monotonic() - started < 12 * 0.3 / 2  # three rounds of four, not twelve one after another


def test_connections_are_kept_alive_across_batches(fcm_server, provider_config):
    for n in range(5):
        send(provider_config, device(n))

    # One connection to the token endpoint, one kept-alive connection to FCM for all five batches.
    assert len(fcm_server.state.connections) == 2


def test_a_forked_child_makes_its_own_transport(fcm_server, provider_config, monkeypatch):
    settings = provider(provider_config).settings
    first = fcm_transport.transport_for(settings)
    assert fcm_transport.transport_for(settings) is first
    monkeypatch.setattr(fcm_transport, "_pid", -1)  # as a child sees it: the transports are its parent's
    assert fcm_transport.transport_for(settings) is not first
    first.close()  # dropped, not closed, by transport_for (a real child must leave its parent's connections be)


def test_concurrent_first_sends_share_one_token(fcm_server, provider_config):
    barrier = threading.Barrier(6)

    def first_send(n: int) -> Receipt:
        barrier.wait()
        return send(provider_config, device(n))

    with ThreadPoolExecutor(6) as pool:
        assert all(r.reached for r in pool.map(first_send, range(6)))
    assert fcm_server.tokens_issued == 1


# -- registration and settings


def test_fcm_is_registered_and_on_exactly_when_its_credentials_are_set(fcm_server, provider_config):
    assert "fcm" in registered_names()
    assert FcmProvider.from_config({**provider_config, "FCM_CREDENTIALS_FILE": ""}) is None
    assert isinstance(provider_for("push", {**provider_config, "PUSH_PROVIDER": "fcm"}), FcmProvider)


GOOD = {"SECRET_KEY": "k" * 48, "HATO_DEV": "0"}


def problems(**env) -> list[str]:
    return check(vars(Config({**GOOD, **env})), registered_names())


def key_file(tmp_path, fcm_server, **changes) -> str:
    path = fcm_server.service_account(tmp_path)
    info = {**json.loads(Path(path).read_text()), **changes}
    Path(path).write_text(json.dumps({k: v for k, v in info.items() if v is not None}))
    return path


def test_a_good_service_account_key_has_no_problem(tmp_path, fcm_server):
    env = {"FCM_CREDENTIALS_FILE": key_file(tmp_path, fcm_server), "FCM_CA_FILE": fcm_server.ca_path}
    assert problems(**env, PUSH_PROVIDER="webpush,fcm") == []
    local = key_file(tmp_path, fcm_server, token_uri="http://localhost:8089/token")
    assert problems(FCM_CREDENTIALS_FILE=local, FCM_API_BASE="http://[::1]:8088") == []


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"type": "authorized_user"}, "is not a service-account key (type service_account)"),
        ({"token_uri": None}, "has no token_uri"),
        ({"project_id": "", "client_email": None}, "has no project_id, client_email"),
        ({"private_key": "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n"}, "is not a PEM private key"),
        ({"token_uri": "http://oauth2.example.com/token"}, "is not an https:// URL (http:// only on 127.0.0.1"),
    ],
)
def test_a_bad_service_account_key_is_named(tmp_path, fcm_server, changes, expected):
    path = key_file(tmp_path, fcm_server, **changes)
    found = problems(FCM_CREDENTIALS_FILE=path)
    assert any(path in p and expected in p for p in found), found


def test_a_key_file_that_cannot_be_read_or_is_not_json_is_named(tmp_path):
    missing = str(tmp_path / "missing.json")
    assert any(
        p.startswith(f"FCM_CREDENTIALS_FILE={missing!r} cannot be read") for p in problems(FCM_CREDENTIALS_FILE=missing)
    )
    garbage = tmp_path / "key.json"
    garbage.write_text("{not json")
    assert any("is not JSON" in p for p in problems(FCM_CREDENTIALS_FILE=str(garbage)))


@pytest.mark.parametrize("base", ["http://fcm.googleapis.com", "ftp://127.0.0.1", "fcm.googleapis.com", "https://"])
def test_fcm_api_base_must_be_https_but_on_loopback(base):
    assert any(p.startswith(f"FCM_API_BASE={base!r} is not an https:// URL") for p in problems(FCM_API_BASE=base))


def test_a_lease_shorter_than_one_fcm_request_and_a_missing_ca_file_are_refused(tmp_path, fcm_server):
    path = key_file(tmp_path, fcm_server)
    found = problems(FCM_CREDENTIALS_FILE=path, FCM_TIMEOUT="60", DELIVERY_LEASE_SECONDS="30", SMTP_TIMEOUT="5")
    assert any("FCM_TIMEOUT=60" in p and "a row could be sent twice" in p for p in found), found
    found = problems(FCM_CREDENTIALS_FILE=path, FCM_CA_FILE=str(tmp_path / "nope.pem"))
    assert any(p.startswith("FCM_CA_FILE=") and "is not a file" in p for p in found), found


def test_fcm_settings_have_their_declared_defaults():
    config = Config(GOOD)
    assert (config.FCM_CREDENTIALS_FILE, config.FCM_API_BASE, config.FCM_CA_FILE) == (
        "",
        "https://fcm.googleapis.com",
        "",
    )
    assert (config.FCM_CONCURRENCY, config.FCM_TIMEOUT) == (20, 10.0)
    assert httpx.URL(config.FCM_API_BASE).scheme == "https"
