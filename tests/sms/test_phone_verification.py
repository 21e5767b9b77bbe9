"""Verifying a member's number (issue 29): the code goes through the engine to the number being verified and
nowhere else, expires, allows 5 tries, and sends are limited per member and per number."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from app import phones
from app.extensions import db
from app.models import MessageTemplate, NotificationType
from app.notification_types.builtin import PHONE_VERIFICATION
from app.queueing import DELIVER_BATCH_JOB, get_queue
from app.unitofwork import commit, wait_idle
from app.users import phone_verification as pv
from jobs.delivery import deliver_batch
from tests.factories import DeliveryFactory, NotificationFactory, UserFactory
from tests.support.twilio_server import TwilioServer

NEW = "+819011112222"
OLD = "+819033334444"


def _user_row(user_id: int):
    db.session.expire_all()
    return db.session.execute(sa.text("SELECT * FROM users WHERE id = :u"), {"u": user_id}).mappings().one()


def _pending(user_id: int):
    return db.session.execute(sa.text("SELECT * FROM phone_verifications WHERE user_id = :u"), {"u": user_id}).first()


def _code(app, user_id: int) -> str:
    """The code in flight, worked out as the SMS channel does (the tests that go through the engine read the SMS)."""
    return pv.code_for(app.config["SECRET_KEY"], bytes(_pending(user_id).seed))


def _texted_code(server: TwilioServer, to: str) -> str:
    (message,) = server.received_by(to)[-1:]
    return re.search(r"\b(\d{6})\b", message.body).group(1)


# --- through the engine -----------------------------------------------------------------------------------------


@pytest.mark.committed
def test_the_code_goes_on_the_high_queue_to_the_number_being_verified_and_the_ledger_keeps_it_masked(app, twilio):
    user = UserFactory(phone=OLD, phone_verified_at=datetime.now(UTC), sms_opt_in=True, locale="en")
    db.session.commit()

    sent = pv.send_code(user.id, "090-1111-2222", "JP")  # a national number, read in the region given
    commit()
    assert wait_idle(app, 10)
    assert sent.phone == NEW
    jobs = [job for job in get_queue("high").jobs if job.func_name == DELIVER_BATCH_JOB]
    assert [tuple(job.args) for job in jobs] == [("sms", [sent.delivery_id])]

    assert deliver_batch("sms", [sent.delivery_id]).get("sent") == 1
    assert twilio.received_by(OLD) == []  # the member's current number gets nothing
    (message,) = twilio.received_by(NEW)
    code = _texted_code(twilio, NEW)
    assert message.body == f"Your verification code is {code}. It expires in 10 minutes. Never share it with anyone."
    ledger = db.session.execute(sa.text("SELECT status, rendered_body FROM notification_deliveries WHERE id = :d"),
                                {"d": sent.delivery_id}).one()  # fmt: skip
    assert ledger.status == "sent" and code not in ledger.rendered_body and pv.MASKED_CODE in ledger.rendered_body
    # Hidden from the inbox, stored nowhere in the clear.
    note = db.session.execute(sa.text("SELECT in_app, title, body FROM notifications WHERE user_id = :u"),
                              {"u": user.id}).one()  # fmt: skip
    assert note.in_app is False and code not in note.title + note.body

    assert pv.check_code(user.id, code, app.config["SECRET_KEY"]).outcome == "verified"
    db.session.commit()
    row = _user_row(user.id)
    assert row["phone"] == NEW and row["phone_verified_at"] is not None and _pending(user.id) is None


@pytest.mark.committed
def test_a_japanese_member_gets_the_japanese_wording(app, twilio):
    user = UserFactory(locale="ja")
    db.session.commit()
    sent = pv.send_code(user.id, NEW, "JP")
    db.session.commit()

    deliver_batch("sms", [sent.delivery_id])
    (message,) = twilio.received_by(NEW)
    assert "認証コード" in message.body and _texted_code(twilio, NEW) in message.body


@pytest.mark.committed
def test_an_operator_wording_without_the_code_still_sends_it(app, twilio):
    user = UserFactory(locale="en")
    db.session.commit()
    sent = pv.send_code(user.id, NEW, "JP")
    db.session.execute(sa.text("UPDATE message_templates SET body_text = 'Hello from Hato.' WHERE type = :t"),
                       {"t": PHONE_VERIFICATION})  # fmt: skip
    db.session.commit()

    deliver_batch("sms", [sent.delivery_id])
    (message,) = twilio.received_by(NEW)
    assert message.body == f"Hello from Hato. {_code(app, user.id)}"


@pytest.mark.committed
def test_a_replaced_code_is_skipped_and_only_the_new_one_is_sent(app, twilio, monkeypatch):
    user = UserFactory()
    db.session.commit()
    first = pv.send_code(user.id, NEW, "JP")
    second = pv.send_code(user.id, "+819055556666", "JP")
    db.session.commit()

    assert deliver_batch("sms", [first.delivery_id, second.delivery_id]) == {"claimed": 2, "skipped": 1, "sent": 1}
    assert [m.to for m in twilio.received] == ["+819055556666"]
    reason = db.session.execute(sa.text("SELECT skip_reason FROM notification_deliveries WHERE id = :d"),
                                {"d": first.delivery_id}).scalar()  # fmt: skip
    assert reason == "sms_verification_ended"


@pytest.mark.committed
def test_a_notification_of_the_verification_type_made_any_other_way_reaches_no_one(app, twilio):
    """Only a verification names the number: a product's own row of the type has none and is skipped."""
    user = UserFactory(phone=OLD, phone_verified_at=datetime.now(UTC), sms_opt_in=True)
    db.session.commit()
    pv.send_code(user.id, NEW, "JP")  # writes the type, and a live verification for another row
    note = NotificationFactory(user_id=user.id, type=PHONE_VERIFICATION, title="x", body="y")
    forged = DeliveryFactory(notification_id=note.id, channel="sms")
    db.session.commit()

    assert deliver_batch("sms", [forged.id]).get("skipped") == 1
    assert twilio.received == []


@pytest.mark.committed
def test_a_number_the_provider_refuses_does_not_touch_the_members_own(app, twilio):
    user = UserFactory(phone=OLD, phone_verified_at=datetime.now(UTC), sms_opt_in=True)
    db.session.commit()
    twilio.script(NEW, 21211)
    sent = pv.send_code(user.id, NEW, "JP")
    db.session.commit()

    deliver_batch("sms", [sent.delivery_id])
    row = _user_row(user.id)
    assert row["phone"] == OLD and row["phone_invalidated_at"] is None and row["sms_opt_in"] is True


@pytest.mark.committed
def test_a_number_that_replied_stop_gets_no_code(app, twilio):
    """Asked before the STOP: the code in flight is not sent; asked after: refused with why, nothing written."""
    user = UserFactory()
    db.session.commit()
    sent = pv.send_code(user.id, NEW, "JP")
    db.session.execute(sa.text("INSERT INTO sms_suppressions (phone, provider) VALUES (:p, 'twilio')"), {"p": NEW})
    db.session.commit()

    assert deliver_batch("sms", [sent.delivery_id]).get("sent", 0) == 0
    assert twilio.received_by(NEW) == []
    with pytest.raises(phones.InvalidPhone) as refused:
        pv.send_code(user.id, NEW, "JP")
    assert refused.value.reason == "stopped"
    assert db.session.execute(sa.text("SELECT count(*) FROM phone_verifications")).scalar() == 1  # the first only


@pytest.mark.committed
def test_the_code_ignores_quiet_hours(app, twilio):
    from datetime import time

    user = UserFactory(timezone="UTC", quiet_hours_start=time(0), quiet_hours_end=time(23, 59, 59))
    db.session.commit()
    sent = pv.send_code(user.id, NEW, "JP")
    db.session.commit()

    assert deliver_batch("sms", [sent.delivery_id]).get("sent") == 1


# --- the built-in type ----------------------------------------------------------------------------------------------


def test_the_built_in_type_is_mandatory_high_sms_only_and_skips_quiet_hours_with_en_and_ja_wording():
    user = UserFactory()
    pv.send_code(user.id, NEW, "JP")

    kind = db.session.get(NotificationType, PHONE_VERIFICATION)
    assert (kind.mandatory, kind.priority, kind.bypass_quiet_hours) == (True, "high", True)
    assert (kind.channels, kind.default_channels, kind.default_in_app) == (["sms"], ["sms"], False)
    wordings = {t.locale: t.body_text for t in db.session.query(MessageTemplate).filter_by(type=PHONE_VERIFICATION)}
    assert set(wordings) == {"en", "ja"} and all("{{ code }}" in body for body in wordings.values())


# --- typing the code ------------------------------------------------------------------------------------------------


def test_five_wrong_tries_end_the_code_even_for_the_right_one_after(app):
    user = UserFactory()
    pv.send_code(user.id, NEW, "JP")
    right = _code(app, user.id)
    wrong = str((int(right) + 1) % 10**6).zfill(6)

    outcomes = [pv.check_code(user.id, wrong, app.config["SECRET_KEY"]) for _ in range(5)]
    assert [(c.outcome, c.tries_left) for c in outcomes] == [("wrong", 4), ("wrong", 3), ("wrong", 2), ("wrong", 1),
                                                             ("used_up", 0)]  # fmt: skip
    assert pv.check_code(user.id, right, app.config["SECRET_KEY"]).outcome == "used_up"
    assert _user_row(user.id)["phone"] is None


def test_a_code_past_its_ten_minutes_is_expired(app):
    user = UserFactory()
    pv.send_code(user.id, NEW, "JP")
    lifetime = db.session.execute(sa.text("SELECT expires_at - created_at FROM phone_verifications")).scalar()
    assert lifetime == pv.CODE_TTL
    # The database's clock decides: move the code's end just behind it.
    db.session.execute(sa.text("UPDATE phone_verifications SET expires_at = now() - interval '1 second'"))

    checked = pv.check_code(user.id, _code(app, user.id), app.config["SECRET_KEY"])
    assert checked.outcome == "expired" and _user_row(user.id)["phone"] is None
    assert pv.state(user.id).pending_phone is None


@pytest.mark.parametrize("typed", ["", "12345", "1234567", "abcdef", "１２３４５６"])
def test_a_malformed_code_spends_no_try(app, typed):
    user = UserFactory()
    pv.send_code(user.id, NEW, "JP")

    assert pv.check_code(user.id, typed, app.config["SECRET_KEY"]).outcome == "malformed"
    assert _pending(user.id).tries_left == pv.CODE_TRIES


def test_no_code_in_flight(app):
    assert pv.check_code(UserFactory().id, "123456", app.config["SECRET_KEY"]).outcome == "none"


def test_one_members_code_does_not_verify_another(app):
    alice, bob = UserFactory(), UserFactory()
    pv.send_code(alice.id, NEW, "JP")

    assert pv.check_code(bob.id, _code(app, alice.id), app.config["SECRET_KEY"]).outcome == "none"
    assert _user_row(bob.id)["phone"] is None and _pending(alice.id).tries_left == pv.CODE_TRIES


def test_verifying_clears_an_earlier_refusal():
    user = UserFactory(phone=OLD, phone_verified_at=datetime.now(UTC), phone_invalidated_at=datetime.now(UTC),
                       phone_invalid_reason="21211 invalid")  # fmt: skip
    pv.send_code(user.id, OLD, "JP")
    from flask import current_app

    assert pv.check_code(user.id, _code(current_app, user.id), current_app.config["SECRET_KEY"]).outcome == "verified"
    row = _user_row(user.id)
    assert row["phone_invalidated_at"] is None and row["phone_invalid_reason"] is None
    assert pv.state(user.id).verified


def test_the_code_depends_on_the_servers_key_and_the_seed():
    assert pv.code_for("key-a", b"seed") == pv.code_for("key-a", b"seed")
    assert re.fullmatch(r"\d{6}", pv.code_for("key-a", b"seed"))
    assert len({pv.code_for("key-a", bytes([n])) for n in range(200)}) > 150
    # Another server key gives other codes for the same seeds (a stolen table alone gives none away).
    same = sum(pv.code_for("key-a", bytes([n])) == pv.code_for("key-b", bytes([n])) for n in range(200))
    assert same <= 1


# --- bad numbers and limits -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("typed", ["", "hello", "090-1234", "+1 555", "+81 90 1234 5678 ext. 9"])
def test_a_bad_number_is_refused_and_writes_nothing(typed):
    user = UserFactory()
    with pytest.raises(phones.InvalidPhone):
        pv.send_code(user.id, typed, "JP")
    assert _pending(user.id) is None
    assert db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar() == 0


def test_sends_are_limited_per_member(app, monkeypatch):
    monkeypatch.setitem(app.config, "PHONE_CODE_USER_RATE_LIMIT", "2 per hour")
    monkeypatch.setitem(app.config, "PHONE_CODE_NUMBER_RATE_LIMIT", "100 per hour")
    user = UserFactory()
    pv.send_code(user.id, NEW, "JP")
    pv.send_code(user.id, "+819055556666", "JP")

    with pytest.raises(pv.TooManyCodes) as refused:
        pv.send_code(user.id, "+819077778888", "JP")
    assert 0 < refused.value.retry_after <= 3600
    assert _pending(user.id).phone == "+819055556666"  # the refused send changed nothing
    pv.send_code(UserFactory().id, "+819077778888", "JP")  # another member is not held back


def test_sends_are_limited_per_number_whoever_asks(app, monkeypatch):
    monkeypatch.setitem(app.config, "PHONE_CODE_USER_RATE_LIMIT", "100 per hour")
    monkeypatch.setitem(app.config, "PHONE_CODE_NUMBER_RATE_LIMIT", "2 per hour")
    pv.send_code(UserFactory().id, NEW, "JP")
    pv.send_code(UserFactory().id, "090-1111-2222", "JP")  # the same number, typed another way

    victim = UserFactory()
    with pytest.raises(pv.TooManyCodes):
        pv.send_code(victim.id, NEW, "JP")
    assert _pending(victim.id) is None
    pv.send_code(victim.id, "+819055556666", "JP")  # another number is not held back


def test_a_refused_send_uses_up_no_slot_of_the_other_limit(app, monkeypatch):
    monkeypatch.setitem(app.config, "PHONE_CODE_USER_RATE_LIMIT", "3 per hour")
    monkeypatch.setitem(app.config, "PHONE_CODE_NUMBER_RATE_LIMIT", "1 per hour")
    user = UserFactory()
    pv.send_code(user.id, NEW, "JP")
    for _ in range(3):
        with pytest.raises(pv.TooManyCodes):
            pv.send_code(user.id, NEW, "JP")
    pv.send_code(user.id, "+819055556666", "JP")  # the member's own limit was not spent by the refusals


# --- consent and removal --------------------------------------------------------------------------------------------


def test_consent_given_and_withdrawn_by_the_member_is_recorded_once_per_change():
    user = UserFactory(phone=OLD, phone_verified_at=datetime.now(UTC))
    assert pv.set_consent(user.id, True) and not pv.set_consent(user.id, True)
    assert pv.set_consent(user.id, False)

    rows = db.session.execute(sa.text("SELECT phone, opted_in, source, detail FROM sms_consents WHERE user_id = :u "
                                      "ORDER BY id"), {"u": user.id}).all()  # fmt: skip
    assert [tuple(r) for r in rows] == [(OLD, True, "member", "preferences page"), (OLD, False, "member",
                                                                                     "preferences page")]  # fmt: skip
    row = _user_row(user.id)
    assert row["sms_opt_in"] is False and row["sms_consent_source"] == "member"


def test_removing_the_number_forgets_it_and_any_code_in_flight():
    user = UserFactory(phone=OLD, phone_verified_at=datetime.now(UTC), sms_opt_in=True)
    pv.send_code(user.id, NEW, "JP")
    pv.remove_number(user.id)

    row = _user_row(user.id)
    assert (row["phone"], row["phone_verified_at"]) == (None, None) and _pending(user.id) is None
    state = pv.state(user.id)
    assert state.phone is None and not state.verified and state.pending_phone is None
