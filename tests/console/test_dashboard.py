"""The dashboard: status windows, the SVG chart and its table, latency, DLQ, queues, workers, breakers."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa
from redis.exceptions import ConnectionError as RedisConnectionError
from rq import Worker
from rq.serializers import JSONSerializer

from app import backpressure
from app.console import charts
from app.extensions import db, redis
from app.providers import breaker
from app.queueing import enqueue_deliveries, get_queue
from app.web.templating import duration
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.backpressure import forget_measurements, queued_job
from tests.support.html import attrs, first, one, parse, table_rows, texts


@pytest.fixture
def ledger():
    """Deliveries created now, 30 minutes, 3 hours and 3 days ago, sent after known delays; two failed."""
    NotificationTypeFactory(type="comment")
    note = lambda: NotificationFactory(user_id=UserFactory().id, type="comment").id  # noqa: E731
    rows = []
    for age, status, delay in [
        ("0 minutes", "sent", 1),
        ("0 minutes", "sent", 3),
        ("30 minutes", "sent", 9),
        ("30 minutes", "pending", None),
        ("3 hours", "failed", None),
        ("3 days", "failed", None),
        ("3 hours", "sent", 100),
    ]:
        d = DeliveryFactory(notification_id=note(), channel="email", status=status, error_kind=None)
        db.session.execute(
            sa.text(
                "UPDATE notification_deliveries SET created_at = now() - CAST(:age AS interval), updated_at = now() - "
                "CAST(:age AS interval), sent_at = now() - CAST(:age AS interval) + make_interval(secs => :delay) "
                "WHERE id = :id"
            ),
            {"age": age, "delay": delay, "id": d.id},
        )
        rows.append(d)
    return rows


def test_the_page_shows_windows_latency_dlq_and_a_chart(client, operator, ledger):
    page = client.get("/console/dashboard").get_data(as_text=True)

    # Status now, created in the last hour, in the last day.
    assert table_rows(page, "#status-windows") == [
        ["sent", "3", "4"],
        ["sending", "0", "0"],
        ["pending", "1", "1"],
        ["skipped", "0", "0"],
        ["passed over", "0", "0"],
        ["failed", "0", "1"],
    ]
    assert attrs(page, "#status-windows tbody th .tag", "class") == [
        f"tag tag--{status}" for status in ("sent", "sending", "pending", "skipped", "passed", "failed")
    ]
    # p50/p95 of 1 s, 3 s and 9 s (the last hour's sent rows).
    assert texts(page, "#stat-p50") == ["3.0 s"] and texts(page, "#stat-p95") == ["8.4 s"]
    assert texts(page, "#stat-dlq") == ["2"]
    assert texts(page, ".console-stat .stat__label") == ["in the dead-letter queue · oldest 3 d 0 h"]
    chart = one(page, "svg.ops-chart__svg")
    assert one(chart, "title#chart-title")
    assert "4 deliveries in the last 60 minutes (3 sent, 1 pending)" in one(chart, "desc#chart-desc").get_text()
    assert len(chart.select("rect.ops-chart__bar.ops-chart__bar--sent")) == 2
    assert len(parse(page).select('#chart-table tbody tr > th[scope="row"]')) == 2  # two minutes had deliveries


def test_the_figures_refresh_themselves(client, operator):
    fragment = client.get("/console/dashboard/live").get_data(as_text=True)

    wrapper = first(fragment)
    assert (wrapper.name, wrapper["id"], wrapper["hx-trigger"]) == ("div", "dashboard-live", "every 5s")
    assert "No deliveries were created in the last 60 minutes." in fragment


def test_queues_and_workers_come_from_redis(client, operator, ledger):
    enqueue_deliveries("low", "email", [ledger[3].id])
    worker = Worker([get_queue("high")], connection=redis.client(), name="worker-one", serializer=JSONSerializer)
    worker.register_birth()
    try:
        page = client.get("/console/dashboard/live").get_data(as_text=True)
    finally:
        worker.register_death()

    queues = {row[0]: row[1:] for row in table_rows(page, "#queues")}  # waiting, oldest, running, crashed
    assert queues["low"][0] == "1" and re.fullmatch(r"\d+ ms", queues["low"][1])
    assert queues["high"][:2] == ["0", "—"]
    assert "worker-one" in texts(page, '#workers tbody th[scope="row"] code')


def test_without_workers_or_redis_the_page_says_so(client, operator, monkeypatch):
    assert "No worker is running" in client.get("/console/dashboard/live").get_data(as_text=True)

    def down(*args, **kwargs):
        raise RedisConnectionError("connection refused")

    monkeypatch.setattr("app.queue_state.get_queue", down)
    page = client.get("/console/dashboard/live").get_data(as_text=True)
    assert "Redis does not answer" in page and one(page, "#stat-dlq")


def test_backpressure_is_shown_with_the_high_lag_its_start_and_the_worker_kept_free(client, operator, app, monkeypatch):
    forget_measurements(monkeypatch)
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)

    def panel():
        page = client.get("/console/dashboard/live").get_data(as_text=True)
        return one(page, "#backpressure")["data-held"], " ".join(texts(page, "#backpressure p"))

    held, text = panel()
    assert held == "false" and "the high queue's oldest work has waited 0 ms" in text and "0 holds so far" in text

    job_id = queued_job("high", waited=90)
    backpressure.keep_free_after_interactive("worker-one")
    held, text = panel()
    assert held == "true" and re.search(r"is held since \d{4}-\d\d-\d\d \d\d:\d\d JST", text)
    assert "has waited 1 min 30 s, longer than 2.0 s" in text and "1 hold so far" in text
    assert "Kept free of low-priority work for interactive work: worker-one." in text
    queues = {row[0]: row[1:] for row in table_rows(client.get("/console/dashboard/live").get_data(as_text=True),
                                                     "#queues")}  # fmt: skip
    assert queues["high"][:2] == ["1", "1 min 30 s"]

    get_queue("high").remove(job_id)  # drained
    held, text = panel()
    assert held == "false" and "1 hold so far" in text

    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 0)
    held, text = panel()
    assert held == "false" and text.startswith("Backpressure is off")


def _providers(client) -> list[list[str]]:
    """Each provider row: channel, provider, breaker state, and the classes of the breaker's tag."""
    page = client.get("/console/dashboard/live").get_data(as_text=True)
    return [
        [*texts(row, "th, td"), *attrs(row, "td:last-child > .tag", "class")]
        for row in parse(page).select("#providers tbody tr")
    ]


def test_breaker_states_come_from_the_providers(client, operator, app, monkeypatch):
    monkeypatch.setitem(app.config, "EMAIL_PROVIDER", "fake")
    assert ["E-mail", "fake", "closed", "tag tag--sent"] in _providers(client)

    settings = breaker.Settings.from_config(app.config)
    tripped = breaker.CircuitBreaker(redis.realtime(), "fake", settings)
    for _ in range(settings.failures):
        tripped.failure()

    assert ["E-mail", "fake", "open", "tag tag--failed"] in _providers(client)


def test_a_half_open_breaker_and_an_unconfigured_fallback_are_shown(client, operator, app, monkeypatch):
    monkeypatch.setitem(app.config, "EMAIL_PROVIDER", "smtp")
    monkeypatch.setitem(app.config, "SMTP_FALLBACK_URL", "")  # named as smtp's fallback, not configured
    settings = breaker.Settings.from_config(app.config)
    clock = [time.time()]
    smtp = breaker.CircuitBreaker(redis.realtime(), "smtp", settings, clock=lambda: clock[0])
    for _ in range(settings.failures):
        smtp.failure()
    clock[0] += settings.cooldown + 1
    assert smtp.allow().allowed  # the cooldown is over: this caller probes

    page = client.get("/console/dashboard/live").get_data(as_text=True)
    rows = table_rows(page, "#providers")
    assert ["E-mail", "smtp", "half-open"] in rows
    assert ["E-mail", "smtp_fallback not configured", "n/a"] in rows


def test_chart_geometry():
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    counts = {(now, "sent"): 30, (now, "failed"): 10, (now - timedelta(minutes=59), "pending"): 5}

    chart = charts.deliveries_per_minute(now, counts, ZoneInfo("Asia/Tokyo"))

    assert chart.peak == 40 and chart.totals["sent"] == 30
    last = [s for s in chart.segments if s.label == "21:00"]
    assert [s.status for s in last] == ["sent", "failed"]  # stacked bottom-up
    assert last[0].height == pytest.approx(chart.plot_height * 30 / 40, abs=0.01)
    assert last[1].y + last[1].height == pytest.approx(last[0].y, abs=0.01)
    assert [t.label for t in chart.y_ticks] == ["0", "10", "20", "30", "40"]
    assert [row[0] for row in chart.rows] == ["20:01", "21:00"] and chart.x_ticks[0].label == "20:01"


@pytest.mark.parametrize("value, expected", [(1, 1), (7, 10), (11, 20), (120, 200), (4999, 5000), (0, 1)])
def test_nice_ceiling(value, expected):
    assert charts.nice_ceiling(value) == expected


@pytest.mark.parametrize(
    "seconds, text",
    [
        (None, "—"),
        (0.25, "250 ms"),
        (4.21, "4.2 s"),
        (185, "3 min 5 s"),
        (7800, "2 h 10 min"),
        (3 * 86400 + 4 * 3600, "3 d 4 h"),
    ],
)
def test_duration(seconds, text):
    assert duration(seconds) == text


@pytest.mark.parametrize(
    "peak, ticks",
    [(0, ["0", "1"]), (1, ["0", "1"]), (7, ["0", "2", "4", "6", "8"]), (1234, ["0", "500", "1,000", "1,500"])],
)
def test_the_y_axis_uses_round_steps(peak, ticks):
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    chart = charts.deliveries_per_minute(now, {(now, "sent"): peak} if peak else {}, ZoneInfo("UTC"))

    assert [t.label for t in chart.y_ticks] == ticks
    assert chart.y_ticks[0].position == chart.baseline and chart.y_ticks[-1].position >= chart.top


def test_a_providers_word_on_the_configuration_is_shown_until_a_send_works_again(
    client, operator, app, fcm_server, tmp_path, monkeypatch
):
    from app.providers import Message, PermanentError
    from app.providers.fcm import FcmProvider
    from app.providers.mobile import DeviceTarget, MobileAlert, MobilePush

    settings = fcm_server.settings(fcm_server.service_account(tmp_path))
    for name, value in settings.items():
        if name.startswith("FCM_"):
            monkeypatch.setitem(app.config, name, value)
    provider = FcmProvider.from_config(app.config)
    phone = DeviceTarget(1, "android", "fcm-token-dashboard")
    message = Message(0, "push", "user:1", "t", "t", targets=(phone,),
                      mobile=MobilePush(alerts={"": MobileAlert("Hello", "there")}))  # fmt: skip
    fcm_server.script(phone.token, "SENDER_ID_MISMATCH", times=1)
    with provider, pytest.raises(PermanentError):
        provider.send(message)

    problem = one(client.get("/console/dashboard/live").get_data(as_text=True), "#provider-problem-fcm")
    assert "fcm refuses this installation's configuration" in problem.get_text()
    assert "SENDER_ID_MISMATCH" in problem.get_text() and problem.select_one("time")

    with provider:
        provider.send(message)  # works again: the warning goes
    assert parse(client.get("/console/dashboard/live").get_data(as_text=True)).select("#provider-problem-fcm") == []
