"""The Vonage provider against a local Vonage Messages API (tests/support/vonage_server.py)."""

from __future__ import annotations

import pytest

from app.providers import problems
from app.providers.base import Message, PermanentError, TransientError
from app.providers.httpclients import close_all
from app.providers.vonage import VonageProvider
from tests.support.vonage_server import VonageServer

TO = "+819012345678"


@pytest.fixture
def vonage(app):
    with VonageServer() as server:
        yield server
    close_all()


def provider(app, server: VonageServer, **overrides) -> VonageProvider:
    built = VonageProvider.from_config({**app.config, **server.settings(), **overrides})
    assert built is not None
    return built


def sms(text: str = "Your code is 123456", to: str = TO) -> Message:
    return Message(delivery_id=42, channel="sms", to=to, subject="", text=text)


def test_an_sms_goes_with_the_applications_jwt_and_its_uuid_is_the_message_id(app, vonage):
    receipt = provider(app, vonage).send(sms())
    (message,) = vonage.received
    assert (message.to, message.text, message.client_ref, message.auth) == ("819012345678", "Your code is 123456",
                                                                            "42", "jwt")  # fmt: skip
    assert message.claims["application_id"] == vonage.settings()["VONAGE_APPLICATION_ID"]
    assert receipt.provider == "vonage" and receipt.message_id == message.message_uuid


def test_without_an_application_the_api_key_and_secret_authenticate(app, vonage):
    provider(app, vonage, VONAGE_APPLICATION_ID="", VONAGE_PRIVATE_KEY_FILE="").send(sms())
    assert [m.auth for m in vonage.received] == ["basic"]


def test_vonage_is_off_without_a_sender_or_credentials(app, vonage):
    settings = {**app.config, **vonage.settings()}
    assert VonageProvider.from_config({**settings, "VONAGE_FROM": ""}) is None
    no_credentials = {"VONAGE_APPLICATION_ID": "", "VONAGE_PRIVATE_KEY_FILE": "", "VONAGE_API_KEY": ""}
    assert VonageProvider.from_config({**settings, **no_credentials}) is None


def test_an_invalid_recipient_is_permanent_and_names_only_the_numbers_end(app, vonage):
    vonage.script("819012345678", "invalid-params")
    with pytest.raises(PermanentError) as raised:
        provider(app, vonage).send(sms())
    assert raised.value.kind == "invalid_number" and raised.value.response_code == 422
    assert "819012345678" not in str(raised.value)


@pytest.mark.parametrize("error, status", [("throttled", 429), ("internal", 500), ("unavailable", 503)])
def test_throttling_and_server_errors_are_transient(app, vonage, error, status):
    vonage.script("819012345678", error, times=1, retry_after=4 if error == "throttled" else None)
    with pytest.raises(TransientError) as raised:
        provider(app, vonage).send(sms())
    assert raised.value.response_code == status
    if error == "throttled":
        assert (raised.value.kind, raised.value.retry_after) == ("rate_limited", 4.0)
    assert provider(app, vonage).send(sms()).message_id  # the retry goes through


def test_low_balance_waits_and_the_dashboard_says_so_until_a_send_works(app, vonage):
    vonage.script("819012345678", "low-balance", times=1)
    with pytest.raises(TransientError) as raised:
        provider(app, vonage).send(sms())
    assert raised.value.kind == "low_balance"
    assert [p.provider for p in problems.current(["vonage"])] == ["vonage"]
    provider(app, vonage).send(sms())
    assert problems.current(["vonage"]) == []


def test_a_wrong_secret_is_a_configuration_problem(app, vonage):
    wrong = {"VONAGE_APPLICATION_ID": "", "VONAGE_PRIVATE_KEY_FILE": "", "VONAGE_API_SECRET": "wrong"}
    with pytest.raises(PermanentError) as raised:
        provider(app, vonage, **wrong).send(sms())
    assert raised.value.kind == "misconfigured" and raised.value.response_code == 401
