"""SMS (like push and chat: rendering.message_context) signs an unsubscribe link only for a template naming it
(the bench's cheap win), and such a template still gets a working one."""

from __future__ import annotations

import pytest

from app.delivery.unsubscribe import make_token
from app.extensions import db
from app.models import MessageTemplate
from jobs.delivery import deliver_batch
from tests.delivery.test_sms_channel import member, sms_row, twilio  # noqa: F401  (the fixture)


@pytest.mark.committed
def test_a_template_naming_the_unsubscribe_link_gets_it_signed(app, twilio):  # noqa: F811
    user = member()
    delivery = sms_row(user)
    db.session.add(MessageTemplate(type="sign-in", channel="sms", locale="en", subject="",
                                   body_text="Code inside. Stop: {{ unsubscribe_url }}"))  # fmt: skip
    db.session.commit()

    deliver_batch("sms", [delivery.id])
    expected = f"{app.config['BASE_URL']}/unsubscribe/{make_token(user.id, 'sign-in')}"
    assert [m.body for m in twilio.received] == [f"Code inside. Stop: {expected}"]


@pytest.mark.committed
def test_the_built_in_text_and_other_templates_sign_nothing(app, twilio, monkeypatch):  # noqa: F811
    signed = []
    monkeypatch.setattr("app.delivery.rendering.unsubscribe_url", lambda *args: signed.append(args) or "x")
    first = sms_row(member())
    deliver_batch("sms", [first.id])
    db.session.add(MessageTemplate(type="sign-in", channel="sms", locale="en", subject="", body_text="Code {{ data }}"))
    db.session.commit()
    second = sms_row(member(phone="+819012345679"))
    deliver_batch("sms", [second.id])
    assert len(twilio.received) == 2 and signed == []
