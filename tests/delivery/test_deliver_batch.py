"""deliver_batch end to end against a real SMTP server and the fake provider."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.extensions import db, redis
from app.models import DeliveryAttempt, EmailSuppression, MessageTemplate
from app.providers import PermanentError, TransientError
from jobs.delivery import deliver_batch
from tests.factories import NotificationTypeFactory, PreferenceFactory, UserFactory
from tests.support.delivery import reload


def attempts_of(delivery):
    return db.session.scalars(
        sa.select(DeliveryAttempt).where(DeliveryAttempt.delivery_id == delivery.id).order_by(DeliveryAttempt.id)
    ).all()


# The engine records each send on its own autocommit connection (as in production), so these tests commit.
pytestmark = pytest.mark.committed


def test_real_email_content_and_headers(app, smtp_sink, make_delivery):
    user = UserFactory(email="Ada@Example.com", display_name="Ada Lovelace")
    delivery = make_delivery(user=user, title="Your report is ready", body="Line one\nLine <two>")

    assert deliver_batch("email", [delivery.id]) == {"claimed": 1, "sent": 1}

    [received] = smtp_sink.messages
    msg = received.message
    assert received.rcpt_tos == ["Ada@Example.com"]
    assert msg["Subject"] == "Your report is ready"
    assert msg["To"] == "Ada Lovelace <Ada@Example.com>"
    assert msg["Message-ID"] == f"<delivery-{delivery.id}@hato.127.0.0.1>"
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    link = msg["List-Unsubscribe"]
    assert link.startswith(f"<{app.config['BASE_URL']}/unsubscribe/") and link.endswith(">")
    assert msg.get_content_type() == "multipart/alternative"
    text = msg.get_body(("plain",)).get_content().replace("\r\n", "\n")
    html = msg.get_body(("html",)).get_content()
    assert "Line one\nLine <two>" in text and link[1:-1] in text
    assert "Line <two>" not in html and "Line &lt;two&gt;" in html
    row = reload(delivery)
    assert (row.status, row.attempts, row.provider) == ("sent", 1, "smtp")
    assert row.provider_message_id == msg["Message-ID"] and row.sent_at is not None
    assert row.rendered_subject == "Your report is ready" and "Line one" in row.rendered_body
    [attempt] = attempts_of(delivery)
    assert (attempt.outcome, attempt.provider, attempt.error) == ("sent", "smtp", None)


def test_one_connection_for_the_whole_batch(app, smtp_sink, make_delivery, monkeypatch):
    import smtplib

    opened = []
    original = smtplib.SMTP.connect

    def counting_connect(self, *args, **kwargs):
        opened.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(smtplib.SMTP, "connect", counting_connect)
    monkeypatch.setitem(app.config, "DELIVERY_SEND_CONCURRENCY", 1)
    ids = [make_delivery().id for _ in range(5)]

    assert deliver_batch("email", ids)["sent"] == 5
    assert len(smtp_sink.messages) == 5 and len(opened) == 1


def test_concurrent_sends_keep_one_message_sent_and_unrecorded_at_most(app, smtp_sink, make_delivery, monkeypatch):
    # What a SIGKILL could leave behind at any moment: messages the sink has whose row is not recorded.
    from app.delivery import service

    recorded, worst, record = [0], [0], service.record_result

    def counting_record(result, *args):
        state = record(result, *args)
        recorded[0] += 1
        return state

    handle = smtp_sink.handler.handle_DATA

    async def watching_handle(server, session, envelope):
        worst[0] = max(worst[0], len(smtp_sink.messages) - recorded[0] + 1)  # this message counts too
        return await handle(server, session, envelope)

    monkeypatch.setattr(service, "record_result", counting_record)
    monkeypatch.setattr(smtp_sink.handler, "handle_DATA", watching_handle)
    monkeypatch.setitem(app.config, "DELIVERY_SEND_CONCURRENCY", 4)
    ids = [make_delivery().id for _ in range(40)]

    assert deliver_batch("email", ids) == {"claimed": 40, "sent": 40}
    ids_sent = sorted(m.message["Message-ID"] for m in smtp_sink.messages)
    assert ids_sent == sorted(f"<delivery-{i}@hato.127.0.0.1>" for i in ids)  # each once
    assert 1 < len({m.peer for m in smtp_sink.messages}) <= 4  # several connections, one per lane at most
    assert worst[0] == 1
    attempts = db.session.execute(
        sa.text("SELECT count(*) FROM delivery_attempts WHERE delivery_id = ANY(:ids)"), {"ids": ids}
    ).scalar()
    assert attempts == 40


def test_a_record_that_fails_stops_the_other_sends_before_their_point_of_no_return(
    app, smtp_sink, make_delivery, monkeypatch
):
    # PostgreSQL going away mid-batch, seen from the engine: the fifth record raises.
    from app.delivery import service

    calls, record = [0], service.record_result

    def failing_record(result, *args):
        calls[0] += 1
        if calls[0] == 5:
            raise ConnectionError("the database went away")
        return record(result, *args)

    monkeypatch.setattr(service, "record_result", failing_record)
    monkeypatch.setitem(app.config, "DELIVERY_SEND_CONCURRENCY", 4)
    ids = [make_delivery().id for _ in range(40)]

    with pytest.raises(ConnectionError):
        deliver_batch("email", ids)

    sent = db.session.execute(
        sa.text("SELECT count(*) FROM notification_deliveries WHERE id = ANY(:ids) AND status = 'sent'"), {"ids": ids}
    ).scalar()
    assert sent == 4 and len(smtp_sink.messages) == 5  # the one whose record failed is the only duplicate to come


def test_rerun_is_idempotent(app, smtp_sink, make_delivery):
    delivery = make_delivery()

    deliver_batch("email", [delivery.id])
    assert deliver_batch("email", [delivery.id]) == {"claimed": 0}

    assert len(smtp_sink.messages) == 1
    assert len(attempts_of(delivery)) == 1


def test_recipient_5xx_is_permanent_and_lands_in_the_dlq(app, smtp_sink, make_delivery):
    smtp_sink.handler.reject["gone@example.com"] = "550 5.1.1 No such user"
    delivery = make_delivery(user=UserFactory(email="gone@example.com"))

    assert deliver_batch("email", [delivery.id])["failed"] == 1

    row = reload(delivery)
    assert (row.status, row.error_kind, row.attempts) == ("failed", "bounce", 1)
    assert "550" in row.last_error
    [attempt] = attempts_of(delivery)
    assert attempt.outcome == "permanent" and "No such user" in attempt.error


def test_recipient_4xx_is_transient_with_backoff(app, smtp_sink, make_delivery):
    smtp_sink.handler.reject["busy@example.com"] = "451 4.3.0 Try again later"
    delivery = make_delivery(user=UserFactory(email="busy@example.com"))
    before = db.session.execute(sa.text("SELECT now()")).scalar_one()

    assert deliver_batch("email", [delivery.id])["pending"] == 1

    row = reload(delivery)
    assert (row.status, row.attempts, row.error_kind) == ("pending", 1, None)
    ceiling = app.config["RETRY_BASE_SECONDS"]
    assert before <= row.next_attempt_at <= before + timedelta(seconds=ceiling)
    assert attempts_of(delivery)[0].outcome == "transient"


def test_refused_connection_is_transient_and_fails_the_rest_fast(app, make_delivery, monkeypatch):
    from tests.support.waiting import free_port

    monkeypatch.setitem(app.config, "SMTP_URL", f"smtp://127.0.0.1:{free_port()}")
    monkeypatch.setitem(app.config, "EMAIL_PROVIDER", "smtp")
    monkeypatch.setitem(app.config, "DELIVERY_SEND_CONCURRENCY", 1)
    first, second = make_delivery(), make_delivery()

    assert deliver_batch("email", [first.id, second.id])["pending"] == 2

    assert "refused" in attempts_of(first)[0].error
    assert "earlier in this batch" in attempts_of(second)[0].error

    # Sending on 3 connections at once: each lane tries its connection at most once, the rest fail fast.
    monkeypatch.setitem(app.config, "DELIVERY_SEND_CONCURRENCY", 3)
    rows = [make_delivery() for _ in range(9)]
    redis.client().flushdb()  # the first batch's failures count towards the breaker: start this one closed
    counts = deliver_batch("email", [row.id for row in rows])
    assert counts["pending"] + counts.get("waiting", 0) == 9  # the breaker may open part-way and hold the rest
    errors = [attempts[0].error for attempts in map(attempts_of, rows) if attempts]
    assert 1 <= sum("refused" in e and "earlier" not in e for e in errors) <= 3


def test_transient_failures_exhaust_into_the_dlq(app, fake_provider, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "RETRY_MAX_ATTEMPTS", 3)
    delivery = make_delivery()
    fake_provider.fail_next(TransientError("timeout", kind="timeout"), times=3)

    for expected in ("pending", "pending", "failed"):
        deliver_batch("email", [delivery.id])
        row = reload(delivery)
        assert row.status == expected
        # Make the retry due now (the test's transaction has a frozen now()).
        db.session.execute(
            sa.text("UPDATE notification_deliveries SET next_attempt_at = now() WHERE id = :id"), {"id": delivery.id}
        )

    row = reload(delivery)
    assert (row.attempts, row.error_kind) == (3, "exhausted")
    assert [a.outcome for a in attempts_of(delivery)] == ["transient"] * 3
    assert fake_provider.sent == []


def test_permanent_provider_error(app, fake_provider, make_delivery):
    delivery = make_delivery()
    fake_provider.fail_next(PermanentError("mailbox disabled", kind="rejected"))

    deliver_batch("email", [delivery.id])

    assert (reload(delivery).status, reload(delivery).error_kind) == ("failed", "rejected")


def test_render_error_is_permanent(app, fake_provider, make_delivery, email_type):
    db.session.add(
        MessageTemplate(
            type=email_type.type, channel="email", locale="en", subject="{{ ''.__class__.__mro__ }}", body_text="x"
        )
    )
    delivery = make_delivery()

    deliver_batch("email", [delivery.id])

    row = reload(delivery)
    assert (row.status, row.error_kind) == ("failed", "render")
    assert attempts_of(delivery)[0].error.startswith("render: SecurityError")
    assert fake_provider.calls == 0


def test_preference_off_is_skipped(app, fake_provider, make_delivery, email_type):
    user = UserFactory()
    PreferenceFactory(user_id=user.id, type=email_type.type, channel="email", enabled=False)
    delivery = make_delivery(user=user)

    assert deliver_batch("email", [delivery.id])["skipped"] == 1

    row = reload(delivery)
    assert (row.status, row.skip_reason) == ("skipped", "preference_off")
    assert fake_provider.calls == 0 and attempts_of(delivery) == []


def test_mandatory_type_ignores_the_preference(app, fake_provider, make_delivery):
    security = NotificationTypeFactory(type="security", default_email=True, mandatory=True)
    user = UserFactory()
    PreferenceFactory(user_id=user.id, type="security", channel="email", enabled=False)

    deliver_batch("email", [make_delivery(user=user, type_=security).id])

    assert len(fake_provider.sent) == 1


def test_suppressed_address_is_skipped(app, fake_provider, make_delivery):
    db.session.add(EmailSuppression(address="bounced@example.com", reason="bounce"))
    delivery = make_delivery(user=UserFactory(email="Bounced@Example.COM"))

    deliver_batch("email", [delivery.id])

    assert (reload(delivery).status, reload(delivery).skip_reason) == ("skipped", "suppressed")
    assert fake_provider.calls == 0


def _quiet_around_now(user, tz="Asia/Tokyo"):
    local_now = datetime.now(UTC).astimezone(__import__("zoneinfo").ZoneInfo(tz))
    user.timezone = tz
    user.quiet_hours_start = (local_now - timedelta(hours=1)).time().replace(microsecond=0)
    user.quiet_hours_end = (local_now + timedelta(hours=1)).time().replace(second=0, microsecond=0)
    db.session.flush()
    return local_now


def test_quiet_hours_defer_without_burning_an_attempt(app, fake_provider, make_delivery):
    user = UserFactory()
    local_now = _quiet_around_now(user)
    delivery = make_delivery(user=user)

    assert deliver_batch("email", [delivery.id])["deferred"] == 1

    row = reload(delivery)
    assert (row.status, row.attempts) == ("pending", 0)
    expected_end = (local_now + timedelta(hours=1)).replace(second=0, microsecond=0)
    assert row.next_attempt_at == expected_end
    [attempt] = attempts_of(delivery)
    assert attempt.outcome == "deferred" and attempt.error.startswith("quiet hours until")
    assert fake_provider.calls == 0


def test_high_priority_types_ignore_quiet_hours(app, fake_provider, make_delivery):
    urgent = NotificationTypeFactory(type="otp", default_email=True, priority="high")
    user = UserFactory()
    _quiet_around_now(user)

    deliver_batch("email", [make_delivery(user=user, type_=urgent).id])

    assert len(fake_provider.sent) == 1


def test_push_rows_are_skipped_until_push_is_configured(app, fake_provider, make_delivery):
    delivery = make_delivery(channel="push")

    assert deliver_batch("push", [delivery.id])["skipped"] == 1

    assert (reload(delivery).status, reload(delivery).skip_reason) == ("skipped", "push_not_configured")


def test_only_due_pending_rows_of_the_channel_are_claimed(app, fake_provider, make_delivery):
    later = make_delivery()
    db.session.execute(
        sa.text("UPDATE notification_deliveries SET next_attempt_at = now() + interval '1 hour' WHERE id = :id"),
        {"id": later.id},
    )
    sent = make_delivery(status="sent")
    push = make_delivery(channel="push")

    assert deliver_batch("email", [later.id, sent.id, push.id, 999999]) == {"claimed": 0}
    assert reload(push).status == "pending"


def test_rows_left_when_the_lease_runs_out_go_back_untried(app, fake_provider, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "LEASE_MARGIN_SECONDS", 10_000)  # the deadline has already passed
    first, second = make_delivery(), make_delivery()

    assert deliver_batch("email", [first.id, second.id])["released"] == 2

    for delivery in (first, second):
        row = reload(delivery)
        assert (row.status, row.attempts, row.locked_until) == ("pending", 0, None)
        assert row.next_attempt_at > row.updated_at  # due right after its last touch: the sweeper takes it
    assert fake_provider.calls == 0


def test_a_stale_lease_cannot_overwrite_a_newer_claim(app, fake_provider, make_delivery):
    from app.delivery import queries, service
    from app.delivery.sending import Result
    from app.delivery.source import Try

    delivery = make_delivery()
    claim = service.claim("email", [delivery.id], 60)
    [row] = queries.claimed_batch(claim.ids)
    stale = claim.lease - timedelta(seconds=30)
    result = Result(row, "sent", "fake", datetime.now(UTC), 1, message_id="<x>")

    service.record_result(Try(result, "sent"), stale, db.session)

    assert reload(delivery).status == "sending" and attempts_of(delivery) == []


def test_template_from_the_database_follows_the_locale_chain(app, fake_provider, make_delivery, email_type):
    for locale, subject in (("en", "New comment"), ("pt", "Novo comentário de {{ data.who }}")):
        db.session.add(
            MessageTemplate(
                type=email_type.type,
                channel="email",
                locale=locale,
                subject=subject,
                body_text="{{ notification.body }}",
                body_html="",
            )
        )
    db.session.add(MessageTemplate(type=email_type.type, channel="push", locale="pt-BR", subject="push only"))
    brazilian = make_delivery(user=UserFactory(locale="pt-BR"), data={"who": "Ana"})
    japanese = make_delivery(user=UserFactory(locale="ja"))

    deliver_batch("email", [brazilian.id, japanese.id])

    subjects = {m.delivery_id: m.subject for m in fake_provider.sent}
    assert subjects == {brazilian.id: "Novo comentário de Ana", japanese.id: "New comment"}
    assert reload(brazilian).rendered_subject == "Novo comentário de Ana"
