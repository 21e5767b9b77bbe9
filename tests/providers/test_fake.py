"""The fake provider records sends and fails on request."""

from __future__ import annotations

import pytest

from app.providers import Message, PermanentError, TransientError, provider_for
from app.providers.fake import FAKE, FakeProvider


def test_records_and_fails_in_order():
    fake = FakeProvider()
    message = Message(delivery_id=1, channel="email", to="a@example.com", subject="s", text="t")
    fake.fail_next(TransientError("slow", kind="timeout"))
    fake.fail_next(PermanentError("no", kind="rejected"))

    with fake:
        with pytest.raises(TransientError):
            fake.send(message)
        with pytest.raises(PermanentError):
            fake.send(message)
        receipt = fake.send(message)

    assert receipt.message_id == "<fake-1@hato.test>" and fake.sent == [message]
    assert (fake.calls, fake.sessions) == (3, 1)


def test_registry_returns_the_shared_fake():
    assert provider_for("email", {"EMAIL_PROVIDER": "fake"}) is FAKE
