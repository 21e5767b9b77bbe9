"""The SMTP provider: message building, header injection, error classification, real round trips."""

from __future__ import annotations

import smtplib
import socket
import threading

import pytest

from app.providers import Message, PermanentError, TransientError, provider_for, smtp
from app.providers.email_message import build_email, clean_header, message_id
from app.providers.smtp import SmtpProvider, classify
from tests.support.smtp import SmtpSink
from tests.support.waiting import free_port


def msg(**overrides) -> Message:
    fields = dict(
        delivery_id=42,
        channel="email",
        to="ada@example.com",
        subject="Hello",
        text="plain",
        html="<p>html</p>",
        to_name="Ada",
    )
    fields.update(overrides)
    return Message(**fields)


@pytest.fixture
def sink():
    server = SmtpSink(free_port()).start()
    yield server
    server.stop()


def test_message_id_is_stable_per_delivery():
    assert message_id(42, "hato.example.com") == "<delivery-42@hato.hato.example.com>"
    assert message_id(42, "x") == message_id(42, "x")


@pytest.mark.parametrize("value", ["a\r\nBcc: evil@example.com", "a\nBcc: evil@example.com", "a\rB", "a\0b"])
def test_clean_header_strips_cr_lf_nul(value):
    assert not any(ch in clean_header(value) for ch in "\r\n\0")


def test_no_value_can_inject_a_header():
    email = build_email(
        msg(
            subject="Hi\r\nBcc: evil@example.com",
            to_name="Ada\nBcc: evil@example.com",
            headers={"List-Unsubscribe": "<https://h/u>\r\nBcc: evil@example.com"},
        ),
        "Hato <hato@example.com>\r\nBcc: evil@example.com",
        "example.com",
    )

    assert email.get_all("Bcc") is None
    raw = email.as_bytes()
    assert b"\nBcc:" not in raw and b"\r\nBcc:" not in raw


def test_recipient_with_newline_is_permanent():
    with pytest.raises(PermanentError) as info:
        build_email(msg(to="ada@example.com\r\nBcc: evil@example.com"), "h@example.com", "example.com")
    assert info.value.kind == "invalid_address"


def test_long_unsubscribe_link_is_not_encoded():
    link = "<https://hato.example.com/unsubscribe/" + "A" * 150 + ">"
    email = build_email(msg(headers={"List-Unsubscribe": link}), "h@example.com", "example.com")

    assert f"List-Unsubscribe: {link}".encode() in email.as_bytes()


@pytest.mark.parametrize(
    ("exc", "cls", "kind"),
    [
        (smtplib.SMTPRecipientsRefused({"a@x": (550, b"no such user")}), PermanentError, "bounce"),
        (smtplib.SMTPRecipientsRefused({"a@x": (452, b"mailbox full")}), TransientError, "smtp_452"),
        (smtplib.SMTPDataError(554, b"spam"), PermanentError, "rejected"),
        (smtplib.SMTPDataError(451, b"later"), TransientError, "smtp_451"),
        (smtplib.SMTPSenderRefused(553, b"bad sender", "h@x"), TransientError, "smtp_553"),
        (smtplib.SMTPServerDisconnected("gone"), TransientError, "connection"),
        (TimeoutError("timed out"), TransientError, "timeout"),
        (ConnectionRefusedError(111, "refused"), TransientError, "refused"),
    ],
)
def test_classify(exc, cls, kind):
    error = classify(exc)
    assert type(error) is cls and error.kind == kind


def test_sends_over_one_connection_and_parks_it(sink):
    provider = SmtpProvider(sink.url, "Hato <hato@example.com>", 5, "hato.example.com")
    with provider:
        receipts = [provider.send(msg(delivery_id=i)) for i in (1, 2, 3)]
        connection = provider._conns.get(threading.get_ident())
    assert connection is not None and not provider._conns
    assert [r.message_id for r in receipts] == [f"<delivery-{i}@hato.hato.example.com>" for i in (1, 2, 3)]
    assert [m.mail_from for m in sink.messages] == ["hato@example.com"] * 3
    assert len({m.peer for m in sink.messages}) == 1


def test_next_batch_reuses_the_parked_connection(sink):
    first = SmtpProvider(sink.url, "h@example.com", 5, "example.com")
    with first:
        first.send(msg(delivery_id=1))
    with SmtpProvider(sink.url, "h@example.com", 5, "example.com") as second:  # a new batch, a new provider
        second.send(msg(delivery_id=2))
    assert sink.messages[0].peer == sink.messages[1].peer


def test_a_stale_or_dead_parked_connection_is_replaced(sink, monkeypatch):
    with SmtpProvider(sink.url, "h@example.com", 5, "example.com") as provider:
        provider.send(msg(delivery_id=1))
    monkeypatch.setattr(smtp, "SMTP_IDLE_REUSE_SECONDS", 0.0)
    with SmtpProvider(sink.url, "h@example.com", 5, "example.com") as provider:
        provider.send(msg(delivery_id=2))  # parked too long: closed, a new session
    monkeypatch.undo()
    parked = smtp._parked[provider._server_key][-1][0]
    parked.sock.shutdown(socket.SHUT_RDWR)  # the server (or a NAT) dropped it while parked: NOOP fails
    with SmtpProvider(sink.url, "h@example.com", 5, "example.com") as provider:
        provider.send(msg(delivery_id=3))
    assert len({m.peer for m in sink.messages}) == 3 and len(sink.messages) == 3


def test_timeout_is_transient():
    # A server that accepts the connection but never sends its greeting.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        provider = SmtpProvider(f"smtp://127.0.0.1:{port}", "h@example.com", 0.3, "example.com")
        with provider, pytest.raises(TransientError) as info:
            provider.send(msg())
    assert info.value.kind == "timeout"


def test_url_parsing():
    provider = SmtpProvider("smtps://user%40x:p%3Ass@mail.example.com", "h@example.com", 5, "example.com")
    assert (provider.scheme, provider.hostname, provider.port) == ("smtps", "mail.example.com", 465)
    assert (provider.username, provider.password) == ("user@x", "p:ss")
    with pytest.raises(ValueError):
        SmtpProvider("http://mail.example.com", "h@example.com", 5, "example.com")


def test_registry_builds_by_channel():
    config = {
        "EMAIL_PROVIDER": "smtp",
        "SMTP_URL": "smtp://127.0.0.1:2525",
        "MAIL_FROM": "h@example.com",
        "SMTP_TIMEOUT": 3,
        "BASE_URL": "https://hato.example.com",
        "PUSH_PROVIDER": "webpush",
    }

    assert isinstance(provider_for("email", config), SmtpProvider)
    assert provider_for("email", {**config, "SMTP_URL": ""}) is None
    assert provider_for("push", config) is None
