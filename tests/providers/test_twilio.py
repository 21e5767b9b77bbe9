"""The Twilio provider against a local Twilio that speaks its REST protocol (tests/support/twilio_server.py)."""

from __future__ import annotations

import pytest

from app.providers import problems
from app.providers.base import Message, PermanentError, TransientError
from app.providers.httpclients import close_all
from app.providers.twilio import TwilioProvider
from tests.support.twilio_server import TwilioServer

TO = "+819012345678"


@pytest.fixture
def twilio(app):
    with TwilioServer(callback_delay=0) as server:
        yield server
    close_all()


def provider(app, server: TwilioServer, **overrides) -> TwilioProvider:
    config = {**app.config, **server.settings(), **overrides}
    built = TwilioProvider.from_config(config)
    assert built is not None
    return built


def sms(text: str = "Your code is 123456", to: str = TO) -> Message:
    return Message(delivery_id=1, channel="sms", to=to, subject="", text=text)


def test_an_sms_is_queued_at_twilio_with_its_sid_as_the_message_id(app, twilio):
    receipt = provider(app, twilio).send(sms())
    (message,) = twilio.received
    assert (message.to, message.body, message.from_) == (TO, "Your code is 123456", twilio.from_number)
    assert receipt.provider == "twilio" and receipt.message_id == message.sid and message.sid.startswith("SM")


def test_a_messaging_service_picks_the_sender(app, twilio):
    service = twilio.messaging_service_sid
    provider(app, twilio, TWILIO_MESSAGING_SERVICE_SID=service).send(sms())
    assert twilio.received[0].messaging_service_sid == service


def test_twilio_is_off_until_the_sid_the_token_and_a_sender_are_set(app, twilio):
    for missing in ("TWILIO_ACCOUNT_SID", "TWILIO_AUTH_TOKEN", "TWILIO_FROM"):
        assert TwilioProvider.from_config({**app.config, **twilio.settings(), missing: ""}) is None


@pytest.mark.parametrize(
    "code, kind", [(21211, "invalid_number"), (21610, "unsubscribed"), (21408, "region_not_enabled")]
)
def test_a_refused_recipient_is_a_permanent_failure_of_its_kind(app, twilio, code, kind):
    twilio.script(TO, code)
    with pytest.raises(PermanentError) as raised:
        provider(app, twilio).send(sms())
    assert raised.value.kind == kind and raised.value.response_code == 400
    assert TO not in str(raised.value)  # the number is the member's: an error quoting it shows its end only


def test_too_many_requests_is_transient_with_twilios_retry_after(app, twilio):
    twilio.script(TO, 20429, retry_after="7")
    with pytest.raises(TransientError) as raised:
        provider(app, twilio).send(sms())
    assert (raised.value.kind, raised.value.retry_after) == ("rate_limited", 7.0)


@pytest.mark.parametrize("code", [20500, 20503])
def test_a_server_error_is_transient(app, twilio, code):
    twilio.script(TO, code, times=1)
    with pytest.raises(TransientError):
        provider(app, twilio).send(sms())
    assert provider(app, twilio).send(sms()).message_id  # the retry goes through


def test_a_wrong_token_is_a_configuration_problem_the_dashboard_shows_until_a_send_works(app, twilio):
    with pytest.raises(PermanentError) as raised:
        provider(app, twilio, TWILIO_AUTH_TOKEN="0" * 32).send(sms())
    assert raised.value.kind == "misconfigured" and raised.value.response_code == 401
    assert [p.provider for p in problems.current(["twilio"])] == ["twilio"]
    provider(app, twilio).send(sms())
    assert problems.current(["twilio"]) == []


def test_an_unreachable_twilio_is_transient(app, twilio):
    with pytest.raises(TransientError) as raised:
        provider(app, twilio, TWILIO_API_BASE="http://127.0.0.1:9").send(sms())
    assert raised.value.kind == "connection"


def test_a_message_without_a_number_is_permanent(app, twilio):
    with pytest.raises(PermanentError) as raised:
        provider(app, twilio).send(sms(to=""))
    assert raised.value.kind == "no_number" and twilio.received == []
