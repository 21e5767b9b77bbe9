"""The Twilio stand-in speaks Twilio's protocol: the real `twilio` SDK sends through it, reads its answers and
errors, and validates its status callbacks and inbound webhooks with its own RequestValidator."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
import requests
from twilio.base.exceptions import TwilioRestException
from twilio.request_validator import RequestValidator
from twilio.rest import Client

from tests.support.twilio_server import TwilioServer
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
TO = "+14155550123"
SID = re.compile(r"^SM[0-9a-f]{32}$")
WAIT = 10.0


def sdk_client(server: TwilioServer, auth_token: str | None = None, account_sid: str | None = None) -> Client:
    """The real SDK client, sending to the stand-in.

    Every URL the SDK builds comes from its Domain's base_url ("https://api.twilio.com" in
    twilio/rest/api/ApiBase.py, joined by Domain.absolute_url), and client.api is created once and cached:
    setting its base_url points the Messages calls here while the SDK's own TwilioHttpClient (requests), Basic
    auth, headers and error parsing stay as in production. A custom http_client could rewrite the URL too, but
    it would replace the very transport under test. Edge and region stay unset (get_hostname would rewrite the
    host otherwise).
    """
    client = Client(account_sid or server.account_sid, auth_token or server.auth_token, environment={})
    client.api.base_url = server.origin
    return client


@pytest.fixture
def twilio():
    with TwilioServer(callback_delay=0.0) as server:
        yield server


class Receiver:
    """A tiny app on 127.0.0.1 that records the webhooks it receives and answers (status, content type, body)."""

    def __init__(self, answer: tuple[int, str, str] = (200, "text/plain", "")) -> None:
        self.answer = answer
        self.requests: list[tuple[str, dict[str, str], dict[str, str]]] = []  # (path, headers, form)
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                with receiver._lock:
                    receiver.requests.append(
                        (self.path, dict(self.headers.items()), dict(parse_qsl(raw, keep_blank_values=True)))
                    )
                status, content_type, body = receiver.answer
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body.encode())))
                self.end_headers()
                self.wfile.write(body.encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def received(self) -> list[tuple[str, dict[str, str], dict[str, str]]]:
        with self._lock:
            return list(self.requests)


@pytest.fixture
def receiver():
    with Receiver() as app:
        yield app


# -- sending


def test_the_sdk_creates_a_message_and_reads_twilios_message_resource(twilio):
    message = sdk_client(twilio).messages.create(to=TO, from_=twilio.from_number, body="Your code is 123456")

    assert SID.match(message.sid)
    assert (message.account_sid, message.to, message.from_, message.body) == (
        twilio.account_sid, TO, twilio.from_number, "Your code is 123456"
    )  # fmt: skip
    assert (message.status, message.direction, message.api_version) == ("queued", "outbound-api", "2010-04-01")
    assert (message.num_segments, message.num_media, message.messaging_service_sid) == ("1", "0", None)
    assert (message.error_code, message.error_message, message.price, message.date_sent) == (None, None, None, None)
    assert isinstance(message.date_created, datetime) and message.date_created.utcoffset().total_seconds() == 0
    assert message.uri == f"/2010-04-01/Accounts/{twilio.account_sid}/Messages/{message.sid}.json"
    [received] = twilio.received
    assert (received.sid, received.to, received.from_, received.body) == (message.sid, TO, twilio.from_number,
                                                                          "Your code is 123456")  # fmt: skip
    assert received.headers["content-type"] == "application/x-www-form-urlencoded"
    assert received.headers["user-agent"].startswith("twilio-python/")
    assert received.headers["authorization"].startswith("Basic ")
    assert twilio.counts() == {"accepted": 1, "recipients": 1, "refused": 0, "callbacks": 0}


def test_a_message_through_the_messaging_service_is_accepted_without_a_sender_yet(twilio):
    body = "Ünïcode and emoji 🎉 " * 4  # UCS-2: 70 units a segment, so it is counted later, by the service
    message = sdk_client(twilio).messages.create(to=TO, messaging_service_sid=twilio.messaging_service_sid, body=body)

    assert (message.status, message.from_, message.num_segments) == ("accepted", None, "0")
    assert message.messaging_service_sid == twilio.messaging_service_sid


def test_a_long_body_is_counted_in_segments_as_twilio_bills_them(twilio):
    client = sdk_client(twilio)
    gsm = client.messages.create(to=TO, from_=twilio.from_number, body="a" * 161)
    ucs2 = client.messages.create(to=TO, from_=twilio.from_number, body="日本" * 36)

    assert (gsm.num_segments, ucs2.num_segments) == ("2", "2")


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"to": "", "body": "hi"}, 21604),
        ({"to": "0123", "body": "hi"}, 21211),
        ({"to": "+1 415 555 0123", "body": "hi"}, 21211),
        ({"to": TO, "body": "hi", "from_": None}, 21603),
        ({"to": TO, "body": "hi", "from_": None, "messaging_service_sid": "MG" + "0" * 32}, 21705),
        ({"to": TO, "body": "hi", "from_": "12"}, 21212),
        ({"to": TO, "body": "hi", "from_": "+14155550999"}, 21659),
        ({"to": TO}, 21602),
        ({"to": TO, "body": "x" * 1601}, 21617),
        ({"to": TO, "body": "hi", "status_callback": "not a url"}, 21609),
    ],
)
def test_a_request_twilio_would_refuse_is_refused_with_twilios_code(twilio, fields, code):
    fields = {"from_": twilio.from_number, **fields}
    fields = {k: v for k, v in fields.items() if v is not None}

    with pytest.raises(TwilioRestException) as refused:
        sdk_client(twilio).messages.create(**fields)

    assert (refused.value.code, refused.value.status, refused.value.method) == (code, 400, "POST")
    assert [(r.to, r.code, r.status) for r in twilio.rejected] == [(fields["to"], code, 400)]
    assert twilio.received == [] and twilio.counts()["refused"] == 1


def test_a_body_of_exactly_1600_characters_is_accepted(twilio):
    message = sdk_client(twilio).messages.create(to=TO, from_=twilio.from_number, body="x" * 1600)

    assert message.num_segments == "11"


@pytest.mark.parametrize(
    ("error", "http_status", "code", "status"),
    [
        (21211, None, 21211, 400),
        (21610, None, 21610, 400),
        (21408, None, 21408, 400),
        (21606, None, 21606, 400),
        (20429, None, 20429, 429),
        (None, 500, 20500, 500),
        (None, 503, 20503, 503),
    ],
)
def test_a_scripted_error_reaches_the_sdk_as_twilios_exception(twilio, error, http_status, code, status):
    twilio.script(TO, error, http_status=http_status)

    with pytest.raises(TwilioRestException) as refused:
        sdk_client(twilio).messages.create(to=TO, from_=twilio.from_number, body="hi")

    assert (refused.value.code, refused.value.status) == (code, status)
    assert f"/Accounts/{twilio.account_sid}/Messages.json" in refused.value.uri
    assert twilio.rejected[-1].code == code and twilio.received == []


def test_too_many_requests_carries_retry_after_and_other_numbers_are_not_affected(twilio):
    twilio.script(TO, 20429, retry_after=7)
    auth = (twilio.account_sid, twilio.auth_token)
    url = f"{twilio.origin}/2010-04-01/Accounts/{twilio.account_sid}/Messages.json"

    answer = requests.post(url, data={"To": TO, "From": twilio.from_number, "Body": "hi"}, auth=auth, timeout=WAIT)
    other = requests.post(url, data={"To": "+14155550124", "From": twilio.from_number, "Body": "hi"}, auth=auth,
                          timeout=WAIT)  # fmt: skip

    assert (answer.status_code, answer.headers["Retry-After"]) == (429, "7")
    assert answer.json() == {"code": 20429, "message": "Too Many Requests", "status": 429,
                             "more_info": "https://www.twilio.com/docs/errors/20429"}  # fmt: skip
    assert other.status_code == 201 and other.json()["to"] == "+14155550124"


def test_a_script_with_times_fails_that_many_sends_then_accepts(twilio):
    twilio.script(TO, 20503, times=2)
    client, outcomes = sdk_client(twilio), []
    for _ in range(3):
        try:
            outcomes.append(client.messages.create(to=TO, from_=twilio.from_number, body="hi").status)
        except TwilioRestException as exc:
            outcomes.append(exc.code)

    assert outcomes == [20503, 20503, "queued"]


def test_a_scripted_delay_slows_the_answer(twilio):
    twilio.script(TO, delay=0.3)
    started = time.monotonic()

    message = sdk_client(twilio).messages.create(to=TO, from_=twilio.from_number, body="hi")

    assert message.status == "queued" and time.monotonic() - started >= 0.3


# -- credentials


@pytest.mark.parametrize("wrong", ["token", "account"])
def test_wrong_credentials_are_twilios_20003(twilio, wrong):
    if wrong == "token":
        client = sdk_client(twilio, auth_token="0" * 32)
    else:
        client = sdk_client(twilio, account_sid="AC" + "0" * 32)

    with pytest.raises(TwilioRestException) as refused:
        client.messages.create(to=TO, from_=twilio.from_number, body="hi")

    assert (refused.value.code, refused.value.status) == (20003, 401)
    assert twilio.received == []


def test_no_credentials_is_a_401_with_twilios_error_body(twilio):
    url = f"{twilio.origin}/2010-04-01/Accounts/{twilio.account_sid}/Messages.json"

    answer = requests.post(url, data={"To": TO, "From": twilio.from_number, "Body": "hi"}, timeout=WAIT)

    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"].startswith("Basic")
    assert answer.json() == {"code": 20003, "message": "Authenticate", "status": 401,
                             "detail": "Your AccountSid or AuthToken was incorrect.",
                             "more_info": "https://www.twilio.com/docs/errors/20003"}  # fmt: skip


def test_an_unknown_resource_is_twilios_20404(twilio):
    url = f"{twilio.origin}/2010-04-01/Accounts/{twilio.account_sid}/Calls.json"

    answer = requests.post(url, data={}, auth=(twilio.account_sid, twilio.auth_token), timeout=WAIT)

    assert (answer.status_code, answer.json()["code"]) == (404, 20404)


# -- status callbacks


def _validates(twilio: TwilioServer, path_and_query: str, headers: dict, form: dict, origin: str) -> bool:
    return RequestValidator(twilio.auth_token).validate(origin + path_and_query, form, headers["X-Twilio-Signature"])


def test_status_callbacks_reach_the_app_in_order_signed_as_the_sdk_validates_them(twilio, receiver):
    callback = f"{receiver.origin}/hooks/twilio/status?delivery=42"
    message = sdk_client(twilio).messages.create(to=TO, from_=twilio.from_number, body="hi", status_callback=callback)

    twilio.wait_callbacks(WAIT)

    got = receiver.received()
    assert [form["MessageStatus"] for _, _, form in got] == ["sent", "delivered"]
    for path, headers, form in got:
        assert path == "/hooks/twilio/status?delivery=42"
        assert headers["Content-Type"] == "application/x-www-form-urlencoded"
        assert headers["User-Agent"] == "TwilioProxy/1.1" and headers["I-Twilio-Idempotency-Token"]
        assert _validates(twilio, path, headers, form, receiver.origin)
        assert form["MessageSid"] == form["SmsSid"] == message.sid and form["SmsStatus"] == form["MessageStatus"]
        assert (form["AccountSid"], form["From"], form["To"], form["ApiVersion"]) == (
            twilio.account_sid, twilio.from_number, TO, "2010-04-01"
        )  # fmt: skip
        assert "ErrorCode" not in form
    assert re.fullmatch(r"\d{10}", got[1][2]["RawDlrDoneDate"])
    assert [(c.url, c.status) for c in twilio.callbacks_for(message.sid)] == [(callback, 200), (callback, 200)]
    assert twilio.counts()["callbacks"] == 2


@pytest.mark.parametrize(
    ("final", "final_error", "statuses", "code"),
    [("undelivered", 30006, ["sent", "undelivered"], "30006"), ("failed", 30007, ["failed"], "30007"),
     ("undelivered", None, ["sent", "undelivered"], "30003")],
)  # fmt: skip
def test_a_scripted_ending_reaches_the_app_with_its_error_code(twilio, receiver, final, final_error, statuses, code):
    twilio.script(TO, final=final, final_error=final_error)
    client = sdk_client(twilio)
    client.messages.create(to=TO, from_=twilio.from_number, body="hi", status_callback=f"{receiver.origin}/s")

    twilio.wait_callbacks(WAIT)

    got = [form for _, _, form in receiver.received()]
    assert [form["MessageStatus"] for form in got] == statuses
    assert got[-1]["ErrorCode"] == code
    assert all(_validates(twilio, p, h, f, receiver.origin) for p, h, f in receiver.received())


def test_a_message_through_the_messaging_service_is_queued_first_in_its_callbacks(twilio, receiver):
    sdk_client(twilio).messages.create(to=TO, messaging_service_sid=twilio.messaging_service_sid, body="hi",
                                       status_callback=f"{receiver.origin}/s")  # fmt: skip

    twilio.wait_callbacks(WAIT)

    got = [form for _, _, form in receiver.received()]
    assert [form["MessageStatus"] for form in got] == ["queued", "sent", "delivered"]
    assert {form["MessagingServiceSid"] for form in got} == {twilio.messaging_service_sid}
    assert {form["From"] for form in got} == {twilio.from_number}


def test_a_tampered_callback_does_not_validate(twilio, receiver):
    callback = f"{receiver.origin}/s"
    sdk_client(twilio).messages.create(to=TO, from_=twilio.from_number, body="hi", status_callback=callback)
    twilio.wait_callbacks(WAIT)
    posted = twilio.callbacks[-1]
    validator = RequestValidator(twilio.auth_token)

    assert validator.validate(callback, posted.params, posted.signature)
    assert not validator.validate(callback, {**posted.params, "MessageStatus": "failed"}, posted.signature)
    assert not validator.validate(callback, {**posted.params, "ErrorCode": "30003"}, posted.signature)
    assert not validator.validate(f"{receiver.origin}/other", posted.params, posted.signature)
    assert not RequestValidator("0" * 32).validate(callback, posted.params, posted.signature)


def test_the_apps_answer_to_a_callback_is_recorded(twilio):
    with Receiver((503, "text/plain", "busy")) as app:
        sdk_client(twilio).messages.create(
            to=TO, from_=twilio.from_number, body="hi", status_callback=f"{app.origin}/s"
        )
        twilio.wait_callbacks(WAIT)

    assert [c.status for c in twilio.callbacks] == [503, 503]


def test_callbacks_to_an_app_that_is_down_are_recorded_as_unanswered(twilio):
    with Receiver() as app:
        gone = f"{app.origin}/s"
    sdk_client(twilio).messages.create(to=TO, from_=twilio.from_number, body="hi", status_callback=gone)

    twilio.wait_callbacks(WAIT)

    assert [(c.status, bool(c.error)) for c in twilio.callbacks] == [(None, True), (None, True)]


def test_callbacks_come_callback_delay_apart_and_after_the_answer(receiver):
    with TwilioServer(callback_delay=0.2) as twilio:
        client = sdk_client(twilio)
        sent_at = time.monotonic()
        client.messages.create(to=TO, from_=twilio.from_number, body="hi", status_callback=f"{receiver.origin}/s")
        assert receiver.received() == []  # none before callback_delay

        twilio.wait_callbacks(WAIT)
        done_at = time.monotonic()

    assert len(receiver.received()) == 2 and done_at - sent_at >= 0.4


def test_no_status_callback_means_no_callbacks(twilio, receiver):
    sdk_client(twilio).messages.create(to=TO, from_=twilio.from_number, body="hi")

    twilio.wait_callbacks(WAIT)

    assert twilio.callbacks == [] and receiver.received() == []


# -- inbound messages


def test_inbound_posts_a_signed_incoming_message_and_returns_the_twiml_answer(twilio):
    twiml = '<?xml version="1.0" encoding="UTF-8"?><Response><Message>You are unsubscribed.</Message></Response>'
    with Receiver((200, "text/xml", twiml)) as app:
        status, text = twilio.inbound(f"{app.origin}/hooks/twilio/inbound", "+14155550199", "STOP")
        [(path, headers, form)] = app.received()

    assert (status, text) == (200, twiml)
    assert path == "/hooks/twilio/inbound" and _validates(twilio, path, headers, form, app.origin)
    assert (form["From"], form["To"], form["Body"]) == ("+14155550199", twilio.from_number, "STOP")
    assert (form["NumMedia"], form["NumSegments"], form["SmsStatus"]) == ("0", "1", "received")
    assert SID.match(form["MessageSid"]) and form["SmsMessageSid"] == form["SmsSid"] == form["MessageSid"]
    assert (form["AccountSid"], form["ApiVersion"]) == (twilio.account_sid, "2010-04-01")
    assert "MessagingServiceSid" not in form
    assert [(i.url, i.status) for i in twilio.inbounds] == [(f"{app.origin}/hooks/twilio/inbound", 200)]


def test_inbound_through_a_messaging_service_names_it(twilio, receiver):
    twilio.inbound(f"{receiver.origin}/in", "+14155550199", "hello", to="+14155550100",
                   messaging_service_sid=twilio.messaging_service_sid)  # fmt: skip

    [(path, headers, form)] = receiver.received()
    assert (form["To"], form["MessagingServiceSid"]) == ("+14155550100", twilio.messaging_service_sid)
    assert _validates(twilio, path, headers, form, receiver.origin)


# -- counters


def test_counts_and_reset(twilio):
    client = sdk_client(twilio)
    twilio.script("+14155550111", 21610)
    for to in (TO, TO, "+14155550124", "+14155550111"):
        try:
            client.messages.create(to=to, from_=twilio.from_number, body="hi")
        except TwilioRestException:
            pass

    assert twilio.counts() == {"accepted": 3, "recipients": 2, "refused": 1, "callbacks": 0}
    twilio.reset()
    assert twilio.counts() == {"accepted": 0, "recipients": 0, "refused": 0, "callbacks": 0}
    assert twilio.received == [] and twilio.rejected == []


def test_script_refuses_what_twilio_has_no_answer_for(twilio):
    with pytest.raises(KeyError):
        twilio.script(TO, 12345)
    with pytest.raises(ValueError, match="final"):
        twilio.script(TO, final="read")
    with pytest.raises(KeyError):
        twilio.script(TO, final="undelivered", final_error=21211)


# -- on its own


def test_it_runs_on_its_own_until_sigterm_and_keeps_its_credentials(tmp_path):
    directory = tmp_path / "twilio"

    def serve() -> tuple[subprocess.Popen, dict]:
        settings_file = directory / "settings.json"
        settings_file.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "tests.support.twilio_server", "--port", "0", "--dir", str(directory)]
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_for(lambda: settings_file.exists() or proc.poll() is not None, 30, "settings.json")
        assert proc.poll() is None, proc.stdout.read()
        return proc, json.loads(settings_file.read_text())

    def stop(proc: subprocess.Popen) -> str:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0, output
        return output

    proc, settings = serve()
    try:
        client = Client(settings["TWILIO_ACCOUNT_SID"], settings["TWILIO_AUTH_TOKEN"], environment={})
        client.api.base_url = settings["TWILIO_API_BASE"]
        message = client.messages.create(to=TO, from_=settings["TWILIO_FROM"], body="hello from the demo")
        assert message.status == "queued"
    finally:
        output = stop(proc)
    assert "201 send to …0123: 'hello from the demo'" in output

    again, settings_again = serve()
    stop(again)
    assert {k: v for k, v in settings_again.items() if k != "TWILIO_API_BASE"} == {
        k: v for k, v in settings.items() if k != "TWILIO_API_BASE"
    }
