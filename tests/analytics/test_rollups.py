"""The rollups against a direct computation on a small ledger: counts and percentiles, each change once."""

from __future__ import annotations

import threading
from collections import defaultdict
from datetime import timedelta

import pytest
import sqlalchemy as sa

from app.analytics import histogram, queries, service
from app.analytics import sweep as analytics_sweep
from app.analytics.histogram import BUCKETS, FACTS
from app.extensions import db
from tests.support import load
from tests.support.rollup_ledger import HOUR, event, make_ledger, update

SQL = sa.text

LEDGER_SQL = SQL(
    """
SELECT d.id, d.created_at, d.channel, coalesce(d.provider, '') AS provider, d.status, d.skip_reason,
       d.provider_status, d.provider_status_at, d.sent_at, n.type, coalesce(n.tenant_id, 0) AS tenant_id,
       EXISTS (SELECT 1 FROM provider_events p WHERE p.delivery_id = d.id AND p.event = 'opened') AS opened,
       EXISTS (SELECT 1 FROM provider_events p WHERE p.delivery_id = d.id AND p.event = 'clicked') AS clicked
FROM notification_deliveries d JOIN notifications n ON n.id = d.notification_id AND n.user_id = d.user_id
"""
)


def direct(delivered_after: dict | None = None) -> dict:
    """The figures computed straight from the ledger, per hour row key.

    delivered_after: {delivery id: time to delivered} for rows complained of after their delivery (the ledger
    keeps only the complaint's time then; the rollup kept the delivery's).
    """
    delivered_after = delivered_after or {}
    figures: dict = defaultdict(lambda: {**dict.fromkeys(FACTS, 0), "sent_hist": [0] * BUCKETS,
                                         "delivered_hist": [0] * BUCKETS})  # fmt: skip
    for r in db.session.execute(LEDGER_SQL):
        skip = (r.skip_reason or "unknown") if r.status == "skipped" else ""
        key = (
            r.created_at.replace(minute=0, second=0, microsecond=0),
            r.type,
            r.channel,
            r.provider,
            r.tenant_id,
            skip,
        )
        f = figures[key]
        delivered = r.provider_status in ("delivered", "read", "complained")
        f["accepted"] += 1
        f["sent"] += r.status == "sent"
        f["delivered"] += delivered
        f["bounced"] += r.provider_status in ("bounced", "undelivered", "failed")
        f["complained"] += r.provider_status == "complained"
        f["failed"] += r.status == "failed"
        f["skipped"] += r.status == "skipped"
        f["opened"] += r.opened
        f["clicked"] += r.clicked
        if r.status == "sent":
            f["sent_hist"][histogram.bucket_of((r.sent_at - r.created_at).total_seconds() * 1000)] += 1
        if delivered:
            took = delivered_after.get(r.id, r.provider_status_at - r.created_at)
            f["delivered_hist"][histogram.bucket_of(took.total_seconds() * 1000)] += 1
    return {k: v for k, v in figures.items() if v["accepted"]}


def rolled(grain: str = "hour") -> dict:
    rows = db.session.execute(
        SQL("SELECT * FROM delivery_rollups WHERE grain = :g AND accepted <> 0"), {"g": grain}
    ).mappings()
    return {
        (r["bucket"], r["type"], r["channel"], r["provider"], r["tenant_id"], r["skip_reason"]): {
            **{name: r[name] for name in FACTS}, "sent_hist": list(r["sent_hist"]),
            "delivered_hist": list(r["delivered_hist"])}
        for r in rows
    }  # fmt: skip


def by_day(figures: dict) -> dict:
    days: dict = {}
    for (hour, *dims), f in figures.items():
        key = (hour.replace(hour=0), *dims)
        into = days.setdefault(key, {**dict.fromkeys(FACTS, 0), "sent_hist": [0] * BUCKETS,
                                     "delivered_hist": [0] * BUCKETS})  # fmt: skip
        for name in FACTS:
            into[name] += f[name]
        into["sent_hist"] = histogram.merge([into["sent_hist"], f["sent_hist"]])
        into["delivered_hist"] = histogram.merge([into["delivered_hist"], f["delivered_hist"]])
    return days


def fold_all(limit: int = 1_000) -> int:
    total = 0
    while folded := service.roll_up(limit):
        total += folded
    return total


def test_rollups_match_the_ledger_through_every_change():
    ids = make_ledger()
    assert fold_all(limit=5) == 12  # accepted, in three batches

    # Sent after 40 ms … 40 s, some delivered, bounced or complained; failures; skips with reasons.
    for n, delivery_id in enumerate(ids[:8]):
        update([delivery_id], status="'sent'", provider="'smtp'", sent_at=f"created_at + interval '{40 * 3**n} ms'")
    update(ids[8:10], status="'failed'", provider="'smtp'")
    update(ids[10:11], status="'skipped'", skip_reason="'preference'")
    update(ids[11:12], status="'skipped'", skip_reason="'quiet_hours'")
    assert fold_all(limit=3) == 12
    update(ids[0:4], provider_status="'delivered'", provider_status_at="created_at + interval '2 s'")
    update(ids[4:5], provider_status="'bounced'", provider_status_at="created_at + interval '3 s'")
    update(ids[0:1], provider_status="'complained'", provider_status_at="created_at + interval '90 s'")
    event(ids[1], "opened", "o1")
    event(ids[1], "opened", "o2")  # a second open of the same message counts once
    event(ids[1], "clicked", "c1")
    update(ids[2:4], status="status")  # no change of a figure: nothing queued
    assert fold_all(limit=2) == 8  # 4 delivered, a bounce, a complaint, one open, one click

    # A late open (the first hour rolled long ago), a replay from the DLQ, then its send.
    event(ids[2], "opened", "late")
    update(ids[8:9], status="'pending'", provider="NULL")
    update(ids[8:9], status="'sent'", provider="'smtp'", sent_at="created_at + interval '5 s'")
    assert fold_all() == 3

    expected = direct({ids[0]: timedelta(seconds=2)})
    assert rolled("hour") == expected
    assert rolled("day") == by_day(expected)
    total = {name: sum(f[name] for f in expected.values()) for name in FACTS}
    assert total["accepted"] == 12 and total["opened"] == 2 and total["clicked"] == 1 and total["failed"] == 1


def test_report_percentiles_match_a_direct_computation():
    ids = make_ledger()
    for n, delivery_id in enumerate(ids):
        update([delivery_id], status="'sent'", provider="'smtp'", sent_at=f"created_at + interval '{25 * 2**n} ms'")
    fold_all()
    report = queries.report(queries.Query(since=HOUR - timedelta(days=1), until=HOUR + timedelta(days=2)))
    true = sorted(25 * 2**n for n in range(12))  # ms
    p50, p99 = report.total.times["sent_p50_ms"], report.total.times["sent_p99_ms"]
    assert true[5] <= p50 < true[5] * histogram.RATIO  # the 6th of 12 is the median's rank (ceil(0.5 × 12))
    assert true[11] <= p99 < true[11] * histogram.RATIO
    assert report.query.grain == "day"
    assert report.total.counts["sent"] == 12 and {g.key for g in report.groups} == {"comment", "invoice"}
    assert sum(g.counts["accepted"] for g in report.groups) == 12


def test_histogram_buckets_match_the_sql_twin():
    values = [0, 5, 10, 14, 15, 16, 100, 1_000, 12_345, 86_400_000, 2_000_000_000]
    got = db.session.execute(SQL("SELECT hato_rollup_bucket(v) FROM unnest(CAST(:v AS int[])) v"), {"v": values})
    assert list(got.scalars()) == [histogram.bucket_of(v) for v in values]


@pytest.mark.committed
def test_concurrent_passes_count_each_change_once(app):
    with app.app_context():
        load.create_email_deliveries(600, prefix="rollrace")
        db.session.execute(SQL("UPDATE notification_deliveries SET status = 'sent', sent_at = now()"))
        db.session.commit()
    barrier = threading.Barrier(3)
    folded: list[int] = []

    def worker():
        with app.app_context():
            barrier.wait()
            folded.append(analytics_sweep.sweep({"ANALYTICS_ROLLUP_BATCH": 50, "ANALYTICS_ROLLUP_PASS_SECONDS": 30}))

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    with app.app_context():
        day = db.session.execute(SQL("SELECT sum(accepted), sum(sent) FROM delivery_rollups WHERE grain = 'day'")).one()
        hour = db.session.execute(SQL("SELECT sum(accepted) FROM delivery_rollups WHERE grain = 'hour'")).scalar()
        waiting = db.session.execute(SQL("SELECT count(*) FROM delivery_rollup_changes")).scalar()
    assert sum(folded) == 1200 and waiting == 0
    assert tuple(day) == (600, 600) and hour == 600
