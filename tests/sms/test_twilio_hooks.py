"""Twilio's status callbacks and replies (issue 29 item 3): signed for BASE_URL's URL, stored once, acted on."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from app.extensions import db
from tests.sms.conftest import (
    PHONE,
    TWILIO_INBOUND,
    TWILIO_STATUS,
    consents,
    count,
    member,
    reachable,
    snapshot,
    user_row,
)
from tests.support.delivery import reload

# -- who may post


@pytest.mark.parametrize(
    "how",
    ["missing", "wrong token", "wrong url", "the request's own host", "tampered"],
)
def test_a_callback_that_is_not_twilios_for_this_url_is_401_and_changes_nothing(twilio_hook, sent_sms, how):
    delivery = sent_sms(member())
    before = snapshot()
    params = {"MessageSid": delivery.provider_message_id, "MessageStatus": "delivered", "To": PHONE}
    if how == "missing":
        response = twilio_hook.post(TWILIO_STATUS, params, signature="")
    elif how == "wrong token":
        from twilio.request_validator import RequestValidator

        url = twilio_hook.app.config["BASE_URL"] + TWILIO_STATUS
        forged = RequestValidator("not-the-token").compute_signature(url, params)
        response = twilio_hook.post(TWILIO_STATUS, params, signature=forged)
    elif how == "wrong url":
        response = twilio_hook.post(
            TWILIO_STATUS, params, signed_url="https://elsewhere.example/hooks/providers/twilio"
        )
    elif how == "the request's own host":  # what the app sees is not what Twilio posted to: BASE_URL is
        response = twilio_hook.post(TWILIO_STATUS, params, signed_url="http://localhost/hooks/providers/twilio")
    else:
        url = twilio_hook.app.config["BASE_URL"] + TWILIO_STATUS
        signature = twilio_hook.server.validator.compute_signature(url, params)
        response = twilio_hook.post(TWILIO_STATUS, {**params, "MessageStatus": "failed"}, signature=signature)

    assert response.status_code == 401
    assert response.mimetype == "application/problem+json" and response.get_json()["status"] == 401
    assert snapshot() == before


def test_an_inbound_stop_that_is_not_signed_changes_nothing(twilio_hook):
    member()
    before = snapshot()
    response = twilio_hook.inbound("STOP", signature="bm90IGEgc2lnbmF0dXJl")
    assert response.status_code == 401 and snapshot() == before


def test_behind_a_proxy_the_public_url_is_base_urls(app, twilio_hook, sent_sms, monkeypatch):
    monkeypatch.setitem(app.config, "BASE_URL", "https://hato.example")
    monkeypatch.setitem(app.config, "TRUSTED_PROXY_HOPS", 1)
    delivery = sent_sms(member())
    proxied = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.7"}

    response = twilio_hook.status(delivery.provider_message_id, "delivered", headers=proxied)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert reload(delivery).provider_status == "delivered"


@pytest.mark.parametrize("path", [TWILIO_STATUS, TWILIO_INBOUND])
def test_without_a_twilio_auth_token_the_hooks_are_not_here(client, path):
    response = client.post(path, data={"MessageSid": "SM1", "MessageStatus": "delivered"})
    assert response.status_code == 404 and response.mimetype == "application/problem+json"


def test_a_body_over_the_limit_is_refused_before_it_is_read(app, twilio_hook, monkeypatch):
    monkeypatch.setitem(app.config, "HOOK_MAX_BODY_BYTES", 1024)
    before = snapshot()
    response = twilio_hook.inbound("STOP" + " " * 2000)
    assert response.status_code == 413 and response.mimetype == "application/problem+json"
    assert snapshot() == before


# -- status callbacks


def test_statuses_rise_and_a_resent_callback_is_stored_once(twilio_hook, sent_sms):
    delivery = sent_sms(member())
    sid = delivery.provider_message_id

    assert twilio_hook.status(sid, "queued").get_json()["recorded"] == 1
    assert reload(delivery).provider_status is None  # queued: recorded, Hato had counted it sent already
    assert twilio_hook.status(sid, "sent").get_json()["recorded"] == 1
    assert reload(delivery).provider_status == "sent"
    assert twilio_hook.status(sid, "delivered").get_json()["recorded"] == 1
    again = twilio_hook.status(sid, "delivered").get_json()
    assert (again["recorded"], again["duplicates"]) == (0, 1)

    row = reload(delivery)
    assert row.provider_status == "delivered" and row.provider_status_at is not None
    events = db.session.execute(
        sa.text("SELECT event FROM provider_events WHERE delivery_id = :d ORDER BY id"), {"d": delivery.id}
    ).scalars()
    assert list(events) == ["queued", "sent", "delivered"]


def test_a_status_that_arrives_late_never_lowers_the_state(twilio_hook, sent_sms):
    delivery = sent_sms(member())
    twilio_hook.status(delivery.provider_message_id, "delivered")
    assert twilio_hook.status(delivery.provider_message_id, "sent").get_json()["recorded"] == 1
    assert reload(delivery).provider_status == "delivered"


def test_undelivered_is_final_and_keeps_its_error_code(twilio_hook, sent_sms):
    delivery = sent_sms(member())
    twilio_hook.status(delivery.provider_message_id, "undelivered", 30003)
    twilio_hook.status(delivery.provider_message_id, "delivered")

    assert reload(delivery).provider_status == "undelivered"
    detail = db.session.execute(
        sa.text("SELECT detail FROM provider_events WHERE delivery_id = :d AND event = 'undelivered'"),
        {"d": delivery.id},
    ).scalar_one()
    assert detail["error_code"] == "30003" and detail["recipient"].endswith("5678") and PHONE not in str(detail)


def test_an_unknown_message_sid_is_counted_not_an_error(twilio_hook):
    answer = twilio_hook.status("SM" + "0" * 32, "delivered")
    assert answer.status_code == 200
    assert (answer.get_json()["recorded"], answer.get_json()["unknown"]) == (1, 1)
    assert count("provider_events", "delivery_id IS NULL AND provider = 'twilio'") == 1


def test_an_e_mail_message_id_is_not_an_sms(twilio_hook, make_delivery):
    email = make_delivery(user=member(), status="sent", provider="smtp")
    email.provider_message_id = "SM" + "1" * 32
    db.session.flush()
    assert twilio_hook.status(email.provider_message_id, "delivered").get_json()["unknown"] == 1
    assert reload(email).provider_status is None


def test_failed_21211_marks_the_number_invalid(twilio_hook, sent_sms):
    user = member(email="sam@example.com")
    delivery = sent_sms(user)
    twilio_hook.status(delivery.provider_message_id, "failed", 21211)

    row = user_row(user)
    assert row["phone_invalidated_at"] is not None and "21211" in row["phone_invalid_reason"]
    assert reload(delivery).provider_status == "failed"
    assert count("email_suppressions") == 0  # an SMS event never touches e-mail


def test_undelivered_21610_withdraws_consent_and_leaves_email_alone(twilio_hook, sent_sms):
    user = member(email="sam@example.com")
    twilio_hook.status(sent_sms(user).provider_message_id, "undelivered", 21610)

    assert user_row(user)["sms_opt_in"] is False and consents(user) == [(False, "keyword")]
    assert count("email_suppressions") == 0


# -- replies


@pytest.mark.parametrize(
    "text", ["STOP", " stop ", "StopAll", "UNSUBSCRIBE", "cancel", "END", "quit", "停止", "ＳＴＯＰ"]
)
def test_a_stop_word_suppresses_the_number_for_every_member_with_it(twilio_hook, text):
    first, second, other = member(), member(), member(phone="+819011112222")

    response = twilio_hook.inbound(text)
    assert response.status_code == 200 and response.mimetype == "text/xml"
    assert response.get_data(as_text=True).endswith("<Response />")  # Twilio's own opt-out answers, not twice
    assert count("sms_suppressions", "phone = :p", p=PHONE) == 1
    for user in (first, second):
        assert user_row(user)["sms_opt_in"] is False and user_row(user)["sms_consent_source"] == "keyword"
        assert consents(user) == [(False, "keyword")] and not reachable(user)
    assert user_row(other)["sms_opt_in"] is True and reachable(other)


@pytest.mark.parametrize("text", ["STOP please", "stop it", "I said stop", "", "STOP STOP"])
def test_other_texts_change_nothing_and_answer_empty(twilio_hook, text):
    user = member()
    response = twilio_hook.inbound(text)
    assert response.status_code == 200 and response.get_data(as_text=True).endswith("<Response />")
    assert count("sms_suppressions") == 0 and reachable(user)


def test_a_second_stop_records_nothing_twice(twilio_hook):
    user = member()
    twilio_hook.inbound("STOP")
    twilio_hook.inbound("STOP")
    assert consents(user) == [(False, "keyword")]


def test_a_stop_posted_again_after_start_changes_nothing(twilio_hook):
    user = member()
    stop = "SM" + "5" * 32
    twilio_hook.inbound("STOP", sid=stop)
    twilio_hook.inbound("START")

    replayed = twilio_hook.inbound("STOP", sid=stop)  # the same signed request, captured and posted again
    assert replayed.status_code == 200 and replayed.get_data(as_text=True).endswith("<Response />")
    assert reachable(user) and consents(user) == [(False, "keyword"), (True, "keyword")]


def test_without_redis_a_reply_is_a_503_to_retry_and_changes_nothing(twilio_hook, monkeypatch):
    from redis.exceptions import ConnectionError as RedisConnectionError

    from app.hooks import sms_events

    class Down:
        def set(self, *args, **kwargs):
            raise RedisConnectionError("Redis is down")

    member()
    before = snapshot()
    monkeypatch.setattr(sms_events, "redis", SimpleNamespace(client=lambda: Down()))  # this check's Redis only
    response = twilio_hook.inbound("STOP")
    assert response.status_code == 503 and response.headers["Retry-After"].isdigit()  # Twilio retries later
    assert snapshot() == before


def test_a_suppressed_number_stays_out_when_the_api_opts_the_member_in_again(twilio_hook):
    user = member()
    twilio_hook.inbound("STOP")
    db.session.execute(sa.text("UPDATE users SET sms_opt_in = true, sms_consent_source = 'api' WHERE id = :u"),
                       {"u": user.id})  # fmt: skip
    assert not reachable(user)  # only START from the number lifts it


@pytest.mark.parametrize("word", ["START", "unstop"])
def test_start_lifts_the_suppression_and_restores_what_a_keyword_took(twilio_hook, word):
    user = member()
    product_withdrew = member(consent=False)
    db.session.execute(sa.text("UPDATE users SET sms_consent_source = 'api' WHERE id = :u"), {"u": product_withdrew.id})
    twilio_hook.inbound("STOP")

    response = twilio_hook.inbound(word)
    assert response.status_code == 200 and response.get_data(as_text=True).endswith("<Response />")
    assert count("sms_suppressions") == 0
    assert reachable(user) and consents(user) == [(False, "keyword"), (True, "keyword")]
    assert not reachable(product_withdrew) and consents(product_withdrew) == []


def test_help_is_answered_with_the_help_text_as_twiml(app, twilio_hook, monkeypatch):
    monkeypatch.setitem(app.config, "SMS_HELP_TEXT", "Hato <alerts> & more: reply STOP to end")
    user = member()
    response = twilio_hook.inbound("help")

    assert response.status_code == 200 and response.mimetype == "text/xml"
    assert response.get_data(as_text=True).endswith(
        "<Response><Message>Hato &lt;alerts&gt; &amp; more: reply STOP to end</Message></Response>"
    )
    assert reachable(user) and consents(user) == []


def test_a_reply_from_a_short_code_changes_nothing(twilio_hook):
    member()
    assert twilio_hook.inbound("STOP", from_="12345").status_code == 200
    assert count("sms_suppressions") == 0


# -- the door itself


def test_the_sms_hooks_are_rate_limited_per_provider_and_client(app, twilio_hook, monkeypatch):
    monkeypatch.setitem(app.config, "HOOK_RATE_LIMIT", "2 per minute")
    answers = [twilio_hook.inbound("hello", signature="bad").status_code for _ in range(3)]
    assert answers == [401, 401, 429]
    assert twilio_hook.inbound("hello").mimetype == "application/problem+json"


def test_the_sms_hooks_need_no_csrf_token_and_set_no_cookie(app, twilio_hook, monkeypatch):
    monkeypatch.setitem(app.config, "WTF_CSRF_ENABLED", True)
    response = twilio_hook.inbound("HELP")
    assert response.status_code == 200 and "Set-Cookie" not in response.headers


@pytest.mark.parametrize("text, ok", [("Reply STOP to stop.", True), ("", False), ("   ", False), ("x" * 321, False)])
def test_the_help_text_is_checked_at_start(text, ok):
    from app.config import Config, check
    from app.providers.registry import registered_names

    found = check(vars(Config({"SECRET_KEY": "k" * 48, "HATO_DEV": "0", "SMS_HELP_TEXT": text})), registered_names())
    assert any(p.startswith("SMS_HELP_TEXT") for p in found) is not ok, found
