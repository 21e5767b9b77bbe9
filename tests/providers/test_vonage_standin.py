"""The Vonage stand-in driven by the official SDK (vonage 4.x): sends, auth, every scripted answer, signed webhooks."""

from __future__ import annotations

import base64
import hashlib
import json
import signal
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jwt
import pytest
import requests
import vonage
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from vonage_http_client import Auth, HttpClientOptions
from vonage_http_client.errors import AuthenticationError, HttpRequestError, RateLimitedError, ServerError
from vonage_jwt import verify_signature
from vonage_messages.models import Sms

from tests.support.vonage_server import DELIVERY_ERRORS, VonageServer
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
PHONE = "447700900123"


@pytest.fixture
def server(monkeypatch):
    """A stand-in whose TLS certificate the SDK trusts."""
    with VonageServer() as vonage_server:
        # requests takes REQUESTS_CA_BUNDLE over a session's own `verify` (Session.merge_environment_settings),
        # and this environment sets it; pointing it at the stand-in's CA is what reaches the SDK's session.
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", vonage_server.ca_path)
        yield vonage_server


class _Receiver:
    """A tiny webhook endpoint on 127.0.0.1 that keeps each request's headers and raw body."""

    def __init__(self, status: int = 200) -> None:
        self.requests: list[tuple[dict, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hooks/providers/vonage"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver():
    hooks = _Receiver()
    yield hooks
    hooks.close()


def sdk(server: VonageServer, **auth) -> vonage.Vonage:
    """The SDK pointed at the stand-in: the application's JWT unless auth (api_key/api_secret…) is given.

    The SDK always builds `https://{api_host}{path}` (vonage_http_client.HttpClient.make_request) and mounts its
    adapter for https:// only, so it cannot use plain HTTP; api_host takes "127.0.0.1:port" and the stand-in's
    port also speaks TLS. max_retries=0: a refused connection is reported, not retried three times.
    """
    settings = server.settings()
    credentials = auth or {
        "application_id": settings["VONAGE_APPLICATION_ID"],
        "private_key": settings["VONAGE_PRIVATE_KEY_FILE"],  # a path: vonage_jwt reads the PEM file
    }
    return vonage.Vonage(Auth(**credentials), HttpClientOptions(api_host=server.api_host, timeout=5, max_retries=0))


def sms(server: VonageServer, to: str = PHONE, text: str = "Your code is 4321", **extra) -> Sms:
    return Sms(to=to, from_=server.settings()["VONAGE_FROM"], text=text, **extra)


def basic(settings: dict) -> dict:
    """The Authorization header of Basic auth with the account's api key and secret."""
    pair = f"{settings['VONAGE_API_KEY']}:{settings['VONAGE_API_SECRET']}".encode()
    return {"Authorization": f"Basic {base64.b64encode(pair).decode()}"}


def verified_claims(headers: dict, body: bytes, secret: str) -> dict | None:
    """What the app should do with a webhook: the token's claims when it is Vonage's and the body is untouched."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme != "Bearer" or not verify_signature(token, secret):
        return None
    claims = jwt.decode(token, secret, algorithms=["HS256"])
    return claims if claims["payload_hash"] == hashlib.sha256(body).hexdigest() else None


# -- sending


def test_the_sdk_sends_an_sms_with_the_applications_jwt(server):
    client = sdk(server)
    answer = client.messages.send(sms(server, client_ref="delivery-17"))

    assert uuid.UUID(answer.message_uuid).version == 4
    [received] = server.received
    assert received.message_uuid == answer.message_uuid
    assert (received.to, received.text, received.client_ref, received.auth) == (
        PHONE, "Your code is 4321", "delivery-17", "jwt")  # fmt: skip
    assert received.body == {"to": PHONE, "client_ref": "delivery-17", "from": server.application.number,
                             "text": "Your code is 4321", "channel": "sms", "message_type": "text"}  # fmt: skip
    assert received.claims["application_id"] == server.application.application_id
    assert {"iat", "jti", "exp"} <= set(received.claims)
    assert received.headers["user-agent"].startswith("vonage-python-sdk/")
    assert server.counts()["accepted"] == 1


def test_basic_auth_with_the_api_key_and_secret_sends_too(server):
    settings = server.settings()
    client = sdk(server, api_key=settings["VONAGE_API_KEY"], api_secret=settings["VONAGE_API_SECRET"])

    answer = client.messages.send(sms(server))

    assert [(r.message_uuid, r.auth, r.claims) for r in server.received] == [(answer.message_uuid, "basic", None)]


def test_plain_http_reaches_the_same_endpoint(server):
    """VONAGE_API_BASE is http://: a client that is not the SDK sends there without TLS."""
    settings = server.settings()
    body = {"message_type": "text", "channel": "sms", "to": PHONE, "from": settings["VONAGE_FROM"], "text": "hi"}

    answer = requests.post(f"{settings['VONAGE_API_BASE']}/v1/messages", json=body, headers=basic(settings), timeout=5)

    assert settings["VONAGE_API_BASE"].startswith("http://127.0.0.1:")
    assert answer.status_code == 202
    assert answer.json() == {"message_uuid": server.received[0].message_uuid}


def test_wrong_credentials_are_the_sdks_authentication_error(server):
    settings = server.settings()
    wrong_secret = sdk(server, api_key=settings["VONAGE_API_KEY"], api_secret="not-the-secret")
    with pytest.raises(AuthenticationError) as refused:
        wrong_secret.messages.send(sms(server))
    assert refused.value.response.status_code == 401
    assert refused.value.response.headers["Content-Type"] == "application/problem+json"
    problem = refused.value.response.json()
    assert problem["type"].endswith("#unauthorized") and problem["title"] == "Unauthorized" and problem["instance"]

    # A JWT for the right application id, signed by some other key.
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    forged = sdk(server, application_id=settings["VONAGE_APPLICATION_ID"], private_key=other.decode())
    with pytest.raises(AuthenticationError):
        forged.messages.send(sms(server))

    assert server.received == []
    assert server.counts()["unauthorized"] == 2


@pytest.mark.parametrize(
    ("error", "exception", "status"),
    [
        ("throttled", RateLimitedError, 429),
        ("internal", ServerError, 500),
        ("unavailable", HttpRequestError, 503),
        ("low-balance", HttpRequestError, 402),
        ("invalid-params", HttpRequestError, 422),
        ("unauthorized", AuthenticationError, 401),
    ],
)
def test_each_scripted_error_is_the_sdks_exception_with_its_status(server, error, exception, status):
    client = sdk(server)
    server.script(PHONE, error, times=1)

    with pytest.raises(exception) as refused:
        client.messages.send(sms(server))
    answer = refused.value.response
    assert answer.status_code == status
    assert set(answer.json()) >= {"type", "title", "detail", "instance"}
    assert ("Retry-After" in answer.headers) == (status == 429)

    # times=1: the next send to that number goes through.
    assert client.messages.send(sms(server)).message_uuid == server.received[0].message_uuid
    assert server.counts() == {**server.counts(), "refused": 1, "accepted": 1}


def test_throttling_carries_the_chosen_retry_after_and_a_delay_is_waited(server):
    server.script(PHONE, "throttled", retry_after=7, delay=0.2)

    with pytest.raises(RateLimitedError) as refused:
        sdk(server).messages.send(sms(server))

    assert refused.value.response.headers["Retry-After"] == "7"
    assert refused.value.response.elapsed.total_seconds() >= 0.2


@pytest.mark.parametrize(
    ("change", "title", "field"),
    [
        ({"to": "+447700900123"}, "Invalid recipient", "to"),
        ({"to": "0044770090012"}, "Invalid recipient", "to"),
        ({"from": "not a sender id"}, "Invalid sender", "from"),
        ({"text": None}, "Invalid params", "text"),
        ({"from": None}, "Invalid params", "from"),
        ({"text": "x" * 3201}, "Invalid params", "text"),
        ({"ttl": 5}, "Invalid params", "ttl"),
        ({"client_ref": "r" * 101}, "Invalid client reference", "client reference"),
        ({"channel": "whatsapp"}, "Unsupported channel", "channel"),
    ],
)
def test_a_body_vonage_would_refuse_is_a_422_naming_the_field(server, change, title, field):
    settings = server.settings()
    body = {"message_type": "text", "channel": "sms", "to": PHONE, "from": settings["VONAGE_FROM"], "text": "hi"}
    body = {k: v for k, v in {**body, **change}.items() if v is not None}

    answer = requests.post(f"{server.origin}/v1/messages", json=body, headers=basic(settings), timeout=5)

    assert answer.status_code == 422
    assert answer.headers["Content-Type"] == "application/problem+json"
    problem = answer.json()
    assert problem["title"] == title
    if title == "Invalid params":  # the generic refusal lists the fields; the specific ones say it in `detail`
        assert [p["name"] for p in problem["invalid_parameters"]] == [field]
    else:
        assert field in problem["detail"] and "invalid_parameters" not in problem
    assert server.received == [] and len(server.rejected) == 1


def test_a_body_that_is_not_json_is_a_422(server):
    headers = {**basic(server.settings()), "Content-Type": "application/json"}

    answer = requests.post(f"{server.origin}/v1/messages", data=b"{not json", headers=headers, timeout=5)

    assert answer.status_code == 422 and answer.json()["type"].endswith("#invalid-json")


# -- webhooks


def test_status_webhooks_are_signed_with_the_signature_secret(server, receiver):
    server.status_url = receiver.url
    answer = sdk(server).messages.send(sms(server, client_ref="delivery-17"))

    hooks = server.wait_webhooks(2)
    wait_for(lambda: len(receiver.requests) == 2, 5, "the receiver to hold both webhooks")
    secret = server.settings()["VONAGE_SIGNATURE_SECRET"]
    payloads = []
    for headers, body in receiver.requests:
        claims = verified_claims(headers, body, secret)
        assert claims is not None
        assert claims["iss"] == "Vonage" and claims["api_key"] == server.settings()["VONAGE_API_KEY"]
        assert claims["application_id"] == server.application.application_id  # the send used its JWT
        assert headers["content-type"] == "application/json"
        payloads.append(json.loads(body))
    assert [p["status"] for p in payloads] == ["submitted", "delivered"]
    for payload in payloads:
        assert payload["message_uuid"] == answer.message_uuid
        assert (payload["to"], payload["from"], payload["channel"], payload["client_ref"]) == (
            PHONE, server.application.number, "sms", "delivery-17")  # fmt: skip
        assert payload["timestamp"].endswith("Z") and payload["usage"]["currency"] == "EUR"
    assert payloads[0]["sms"] == {"count_total": "1"}
    assert [h.status for h in hooks] == [200, 200] and hooks[0].answer == b"ok"


def test_a_tampered_body_or_token_fails_verification(server, receiver):
    server.status_url = receiver.url
    sdk(server).messages.send(sms(server))
    wait_for(lambda: len(receiver.requests) == 2, 5, "the status webhooks")
    headers, body = receiver.requests[-1]
    secret = server.settings()["VONAGE_SIGNATURE_SECRET"]
    assert verified_claims(headers, body, secret) is not None

    tampered = body.replace(b'"delivered"', b'"rejected"')
    assert tampered != body and verified_claims(headers, tampered, secret) is None

    token = headers["authorization"].removeprefix("Bearer ")
    assert not verify_signature(token, "some-other-signature-secret-of-32-bytes")
    header, claims, signature = token.split(".")
    forged = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    forged["payload_hash"] = hashlib.sha256(tampered).hexdigest()
    forged_claims = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
    assert verified_claims({"authorization": f"Bearer {header}.{forged_claims}.{signature}"}, tampered, secret) is None


@pytest.mark.parametrize(("final", "code"), [("rejected", "1250"), ("undeliverable", "1331")])
def test_a_scripted_outcome_ends_the_status_webhooks(server, receiver, final, code):
    server.status_url = receiver.url
    server.script(PHONE, final=final, final_error=code if final == "rejected" else None)

    sdk(server).messages.send(sms(server))

    last = server.wait_webhooks(2)[-1].payload
    assert last["status"] == final
    assert last["error"] == {"type": f"https://developer.vonage.com/api-errors/messages#{code}", "title": code,
                             "detail": DELIVERY_ERRORS[code], "instance": last["error"]["instance"]}  # fmt: skip
    assert "usage" not in last


def test_a_message_names_its_own_webhook_url_and_basic_auth_sends_carry_no_application(server, receiver):
    settings = server.settings()
    client = sdk(server, api_key=settings["VONAGE_API_KEY"], api_secret=settings["VONAGE_API_SECRET"])
    server.script(PHONE, final=None)  # a network that sends no receipt: `submitted` only

    client.messages.send(sms(server, webhook_url=receiver.url))

    [hook] = server.wait_webhooks(1)
    assert hook.url == receiver.url and hook.payload["status"] == "submitted"
    claims = verified_claims({k.lower(): v for k, v in hook.headers.items()}, hook.body,
                             settings["VONAGE_SIGNATURE_SECRET"])  # fmt: skip
    assert claims is not None and "application_id" not in claims


def test_no_status_url_means_no_webhooks(server):
    sdk(server).messages.send(sms(server))
    assert server.webhooks == [] and server.counts()["webhooks"] == 0


def test_a_failing_app_answer_is_recorded(server):
    failing = _Receiver(status=500)
    try:
        server.status_url = failing.url
        sdk(server).messages.send(sms(server))
        assert [h.status for h in server.wait_webhooks(2)] == [500, 500]
        assert server.counts()["webhooks_failed"] == 2
    finally:
        failing.close()


def test_inbound_sms_is_signed_the_same_way(server, receiver):
    status, body = server.inbound(receiver.url, "447700900999", "stop please")

    assert (status, body) == (200, b"ok")
    [(headers, raw)] = receiver.requests
    claims = verified_claims(headers, raw, server.settings()["VONAGE_SIGNATURE_SECRET"])
    assert claims is not None and claims["iss"] == "Vonage"
    payload = json.loads(raw)
    assert {k: payload[k] for k in ("message_type", "channel", "from", "to", "text")} == {
        "message_type": "text", "channel": "sms", "from": "447700900999", "to": server.application.number,
        "text": "stop please"}  # fmt: skip
    assert payload["sms"]["keyword"] == "STOP" and uuid.UUID(payload["message_uuid"])


def test_counts_and_reset(server):
    client = sdk(server)
    server.script("447700900001", "internal")
    client.messages.send(sms(server))
    with pytest.raises(ServerError):
        client.messages.send(sms(server, to="447700900001"))
    assert {k: v for k, v in server.counts().items() if v} == {"accepted": 1, "refused": 1}

    server.reset()

    assert set(server.counts().values()) == {0} and server.received == []
    client.messages.send(sms(server, to="447700900001"))  # the script went with the reset
    assert server.counts()["accepted"] == 1


# -- on its own


def _serve(directory: Path) -> tuple[subprocess.Popen, dict]:
    settings_file = directory / "settings.json"
    settings_file.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "tests.support.vonage_server", "--port", "0", "--dir", str(directory)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: settings_file.exists() or proc.poll() is not None, 30, "the stand-in to write settings.json")
    assert proc.poll() is None, proc.stdout.read()
    return proc, json.loads(settings_file.read_text())


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0, output
    return output


def test_on_its_own_it_serves_until_sigterm_and_keeps_its_application(tmp_path, monkeypatch):
    directory = tmp_path / "vonage"
    proc, settings = _serve(directory)
    try:
        assert Path(settings["VONAGE_PRIVATE_KEY_FILE"]).stat().st_mode & 0o077 == 0  # the key is the owner's only
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", settings["VONAGE_CA_FILE"])
        client = vonage.Vonage(
            Auth(application_id=settings["VONAGE_APPLICATION_ID"], private_key=settings["VONAGE_PRIVATE_KEY_FILE"]),
            HttpClientOptions(api_host=settings["VONAGE_API_BASE"].removeprefix("http://"), max_retries=0),
        )
        uuid.UUID(client.messages.send(Sms(to=PHONE, from_=settings["VONAGE_FROM"], text="Hello")).message_uuid)
    finally:
        output = _stop(proc)
    assert "202 sms to …0123: 'Hello'" in output and PHONE not in output

    proc, again = _serve(directory)
    _stop(proc)
    kept = ("VONAGE_APPLICATION_ID", "VONAGE_API_KEY", "VONAGE_API_SECRET", "VONAGE_SIGNATURE_SECRET", "VONAGE_FROM")
    assert {k: again[k] for k in kept} == {k: settings[k] for k in kept}
