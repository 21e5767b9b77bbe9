"""Delivery analytics at scale (issue 33 item 3): the page over 30 days of a 10,000,000-row ledger, and the rollup
keeping up with 2,000 deliveries/s.

    python -m tests.perf.bench_analytics [--rows 10000000] [--days 30] [--requests 300] [--arrival-seconds 20]

Uses its own database `hato_bench_analytics` (dropped, created and migrated here, dropped again at the end) on the
server of DATABASE_URL, or DATABASE_URL's own database when its name says it is bench scratch space (`_bench`),
and Redis database 13; holds an exclusive flock on /tmp/hato-bench.lock while it runs, so benchmarks on a shared
machine take turns.

1. Load, set-based (INSERT … SELECT generate_series, in chunks): --rows ledger rows over --days days, two per
   notification (e-mail by smtp, and push by webpush/fcm/apns or SMS by twilio), 8 types, 10 tenants; 90 % sent
   (log-spread times to the provider), 95 % of e-mail delivered, 2 % bounced, 0.1 % complained, 3 % failed, 5 %
   skipped for three reasons, and an open for 5 % of the delivered e-mail. The ledger's triggers queue one change
   per row (and per first open), as they do in production.
2. Roll the whole backlog up with the sweeper's step (app/analytics/sweep.py), timing it.
3. GET /console/analytics over the last --days days as an operator, --requests times, rotating the grouping and
   filters: p50 / p99 (target p99 ≤ 200 ms). The page reads the rollups only.
4. While a second process writes 2,000 deliveries/s for --arrival-seconds (insert pending, then sent, then
   delivered: three changes each), this process runs the sweeper's rollup step back to back: the changes folded
   per second of its work, and the backlog left when the arrivals stop (it keeps up when that is under a second's
   worth of changes).

Prints a table, then one JSON line: ledger_rows, page_p50_ms, page_p99_ms, rollup_rows_per_s (changes folded per
second during step 4), arrival_changes_per_s, backlog_after, keeps_up, initial_rollup_rows_per_s, rollup_table_rows.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import multiprocessing
import statistics
import time
from contextlib import contextmanager

from tests.support.databases import bench_database

BENCH_DB = "hato_bench_analytics"
BENCH_REDIS_DB = 13
LOCK_PATH = "/tmp/hato-bench.lock"
CHUNK = 1_000_000  # ledger rows per loading statement
TYPES = ("comment", "invoice", "booking", "reminder", "security", "digest_note", "promo", "mention")
TENANTS = 10
USERS = 20_000
ARRIVAL_RATE = 2_000  # deliveries per second in step 4
SETTINGS = {"ANALYTICS_ROLLUP_BATCH": 20_000, "ANALYTICS_ROLLUP_PASS_SECONDS": 5.0}

SETUP_SQL = [
    "INSERT INTO notification_types (type, label, default_in_app, default_email, default_push, priority) "
    "SELECT t, initcap(t), true, true, false, 'default' FROM unnest(CAST(:types AS text[])) t",
    "INSERT INTO tenants (key, name) SELECT 'tenant-' || t, 'Tenant ' || t FROM generate_series(1, :tenants) t",
    "INSERT INTO users (external_id, email, display_name, role) SELECT 'bench-' || u, 'bench' || u || '@example.com', "
    "'Bench ' || u, 'member' FROM generate_series(1, :users) u",
    "INSERT INTO users (external_id, email, display_name, role) "
    "VALUES ('bench-op', 'op@example.com', 'Op', 'operator')",
]

# Notification g (from :first to :last) is created at a time spread evenly over the range, oldest first.
NOTIFICATIONS_SQL = """
INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, created_at, tenant_id)
SELECT 1 + g % :users, (CAST(:types AS text[]))[1 + g % 8], 'Bench ' || g, 'Body', '/b/' || g, 'b:' || g,
       now() - make_interval(secs => :span * (1 - g::float8 / :total)), CASE WHEN g % 3 = 0 THEN NULL
       ELSE (SELECT min(id) FROM tenants) + g % :tenants END
FROM generate_series(:first, :last) g
"""

# Two ledger rows per notification, in their final state; h is a stable pseudo-random 0..9999 per row.
LEDGER_SQL = """
INSERT INTO notification_deliveries (notification_id, user_id, channel, status, attempts, provider, sent_at,
                                     skip_reason, provider_status, provider_status_at, created_at, updated_at)
SELECT n.id, n.user_id, c.channel,
       CASE WHEN h < 9000 THEN 'sent' WHEN h < 9300 THEN 'failed' WHEN h < 9800 THEN 'skipped' ELSE 'sent' END,
       1, CASE WHEN h >= 9300 AND h < 9800 THEN NULL ELSE c.provider END,
       CASE WHEN h < 9000 OR h >= 9800 THEN n.created_at + make_interval(secs => 0.02 * power(1.0009, h)) END,
       CASE WHEN h >= 9300 AND h < 9800 THEN (ARRAY['preference', 'quiet_hours', 'digested'])[1 + h % 3] END,
       CASE WHEN c.channel <> 'email' OR NOT (h < 9000 OR h >= 9800) THEN NULL
            WHEN h % 1000 = 7 THEN 'complained' WHEN h % 50 = 3 THEN 'bounced'
            WHEN h % 20 <> 1 THEN 'delivered' END,
       n.created_at + make_interval(secs => 1 + (h % 600) * 0.1),
       n.created_at, n.created_at
FROM (SELECT *, (id * 7919) % 10000 AS h FROM notifications WHERE id BETWEEN :first AND :last) n
CROSS JOIN LATERAL (VALUES ('email', 'smtp'),
                           (CASE WHEN n.id % 4 = 0 THEN 'sms' ELSE 'push' END,
                            CASE WHEN n.id % 4 = 0 THEN 'twilio' WHEN n.id % 4 = 1 THEN 'webpush'
                                 WHEN n.id % 4 = 2 THEN 'fcm' ELSE 'apns' END)) AS c(channel, provider)
"""

OPENS_SQL = """
INSERT INTO provider_events (delivery_id, user_id, provider, provider_event_id, event, occurred_at)
SELECT d.id, d.user_id, 'smtp', 'open-' || d.id, 'opened', d.provider_status_at + interval '1 minute'
FROM notification_deliveries d
WHERE d.id BETWEEN :first_d AND :last_d AND d.provider_status = 'delivered' AND d.id % 40 IN (0, 1)
"""

# Step 4, each second: new notifications with their two pending ledger rows, the previous second's rows sent, and
# those of the second before delivered.
ARRIVE_SQL = """
WITH n AS (
  INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, created_at)
  SELECT 1 + g % :users, (CAST(:types AS text[]))[1 + g % 8], 'Live ' || g, 'Body', '/l/' || g,
         'live:' || :tick || ':' || g, now() FROM generate_series(1, :half) g
  RETURNING id, user_id, created_at
)
INSERT INTO notification_deliveries (notification_id, user_id, channel, created_at)
SELECT n.id, n.user_id, c, n.created_at FROM n, unnest(ARRAY['email', 'push']) c
RETURNING id
"""
SEND_SQL = """UPDATE notification_deliveries SET status = 'sent', attempts = 1, sent_at = now(),
              provider = CASE channel WHEN 'email' THEN 'smtp' ELSE 'webpush' END
              WHERE id = ANY(CAST(:ids AS bigint[]))"""
DELIVER_SQL = """UPDATE notification_deliveries SET provider_status = 'delivered', provider_status_at = now()
                 WHERE id = ANY(CAST(:ids AS bigint[]))"""


@contextmanager
def bench_lock():
    """Take the shared benchmark lock (waiting for another benchmark to finish)."""
    with open(LOCK_PATH, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def load(db, sa, rows: int, days: int) -> dict:
    """Step 1: the ledger, set-based in chunks; returns its counts."""
    params = {"types": list(TYPES), "tenants": TENANTS, "users": USERS}
    for statement in SETUP_SQL:
        db.session.execute(sa.text(statement), params)
    db.session.commit()
    total = rows // 2
    span = days * 86400 - 3600  # the newest rows an hour old, so step 4's hour stays apart
    began = time.monotonic()
    for first in range(1, total + 1, CHUNK // 2):
        last = min(first + CHUNK // 2 - 1, total)
        chunk = {**params, "first": first, "last": last, "total": total, "span": span}
        db.session.execute(sa.text(NOTIFICATIONS_SQL), chunk)
        ids = db.session.execute(sa.text("SELECT min(id), max(id) FROM notifications WHERE dedupe_key = ANY(:k)"),
                                 {"k": [f"b:{first}", f"b:{last}"]}).one()  # fmt: skip
        before = db.session.execute(sa.text("SELECT coalesce(max(id), 0) FROM notification_deliveries")).scalar()
        db.session.execute(sa.text(LEDGER_SQL), {"first": ids[0], "last": ids[1]})
        after = db.session.execute(sa.text("SELECT max(id) FROM notification_deliveries")).scalar()
        db.session.execute(sa.text(OPENS_SQL), {"first_d": before + 1, "last_d": after})
        db.session.commit()
        print(f"  loaded {2 * last:,} ledger rows ({time.monotonic() - began:.0f} s)", flush=True)
    counts = {
        "ledger_rows": db.session.execute(sa.text("SELECT count(*) FROM notification_deliveries")).scalar(),
        "opens": db.session.execute(sa.text("SELECT count(*) FROM provider_events")).scalar(),
        "changes": db.session.execute(sa.text("SELECT count(*) FROM delivery_rollup_changes")).scalar(),
        "load_s": time.monotonic() - began,
    }
    db.session.commit()
    return counts


def _arrive(seconds: float, started, results) -> None:
    """Step 4's second process: ARRIVAL_RATE deliveries/s, each inserted, then sent, then delivered."""
    import sqlalchemy as sa

    from app import create_app
    from app.extensions import db

    app = create_app(dict(SETTINGS))
    with app.app_context():
        started.set()
        began, tick, written, waves = time.monotonic(), 0, 0, [[], []]
        while time.monotonic() - began < seconds:
            tick_start = time.monotonic()
            params = {"users": USERS, "types": list(TYPES), "half": ARRIVAL_RATE // 2, "tick": tick}
            new = list(db.session.execute(sa.text(ARRIVE_SQL), params).scalars())
            db.session.execute(sa.text(SEND_SQL), {"ids": waves[-1]})
            db.session.execute(sa.text(DELIVER_SQL), {"ids": waves[-2]})
            db.session.commit()
            waves = [waves[-1], new]
            written += len(new)
            tick += 1
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick_start)))
        results.put({"deliveries": written, "seconds": time.monotonic() - began})


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def run(args) -> dict:
    """Steps 1-4."""
    import sqlalchemy as sa
    from flask_migrate import upgrade

    from app import create_app
    from app.analytics import sweep as analytics
    from app.auth import sessions
    from app.extensions import db, redis
    from tests.support.databases import run_outside_transaction

    app = create_app(dict(SETTINGS))
    figures: dict = {"rows": args.rows, "days": args.days}
    with app.app_context():
        upgrade()
        redis.client().flushdb()
        figures.update(load(db, sa, args.rows, args.days))
        run_outside_transaction(db, "VACUUM ANALYZE")
        began, folded = time.monotonic(), 0
        while True:
            step = analytics.sweep(app.config, seconds=60)
            folded += step
            if step < SETTINGS["ANALYTICS_ROLLUP_BATCH"]:
                break
        figures["initial_rollup_s"] = time.monotonic() - began
        figures["initial_folded"] = folded
        run_outside_transaction(db, "VACUUM ANALYZE delivery_rollups", "VACUUM ANALYZE delivery_rollup_changes")
        figures["rollup_table_rows"] = db.session.execute(sa.text("SELECT count(*) FROM delivery_rollups")).scalar()
        operator = db.session.execute(sa.text("SELECT id, session_version FROM users WHERE role = 'operator'")).one()
        tenant = db.session.execute(sa.text("SELECT key FROM tenants ORDER BY id LIMIT 1")).scalar()
        db.session.commit()
    client = app.test_client()
    with client.session_transaction() as session:
        session.update({"_user_id": str(operator[0]), "_fresh": True, **sessions.stamp(*operator)})
    variants = [
        {"period": f"{args.days}d" if f"{args.days}d" in ("7d", "30d", "90d") else "30d"},
        {"group": "channel"}, {"group": "provider"}, {"group": "tenant"},
        {"type": "invoice"}, {"channel": "email", "group": "provider"}, {"tenant": tenant, "group": "type"},
        {"period": "24h"},
    ]  # fmt: skip
    times = []
    for i in range(args.requests + len(variants)):
        query = {"period": "30d", **variants[i % len(variants)]}
        started = time.perf_counter()
        page = client.get("/console/analytics", query_string=query)
        elapsed = (time.perf_counter() - started) * 1000
        assert page.status_code == 200, page.status_code
        if i >= len(variants):  # the first round warms the caches
            times.append(elapsed)
    figures["page_ms"] = times

    context = multiprocessing.get_context("spawn")
    results, started = context.Queue(), context.Event()
    writer = context.Process(target=_arrive, args=(args.arrival_seconds, started, results))
    writer.start()
    assert started.wait(60), "the arriving process did not start"
    with app.app_context():
        folded, busy = 0, 0.0
        while writer.is_alive():
            began = time.monotonic()
            step = analytics.sweep(app.config)
            folded += step
            busy += time.monotonic() - began if step else 0.0
            if not step:
                time.sleep(0.2)
        writer.join(10)
        figures["arrivals"] = results.get(timeout=10)
        figures["backlog_after"] = db.session.execute(sa.text("SELECT count(*) FROM delivery_rollup_changes")).scalar()
        db.session.commit()
        figures["arrival_folded"], figures["arrival_busy_s"] = folded, busy
    return figures


def report(f: dict) -> None:
    """Print the table and the JSON line."""
    arrivals = f["arrivals"]
    arrival_changes = 3 * arrivals["deliveries"] / arrivals["seconds"]
    rollup_rate = f["arrival_folded"] / max(f["arrival_busy_s"], 1e-9)
    initial_rate = f["initial_folded"] / max(f["initial_rollup_s"], 1e-9)
    page = f["page_ms"]
    keeps_up = f["backlog_after"] <= arrival_changes
    print(f"ledger {f['ledger_rows']:,} rows over {f['days']} days, {f['opens']:,} opens; "
          f"{f['changes']:,} changes queued; load {f['load_s']:.0f} s")  # fmt: skip
    print(f"initial rollup: {f['initial_folded']:,} changes in {f['initial_rollup_s']:.1f} s "
          f"({initial_rate:,.0f}/s) → {f['rollup_table_rows']:,} rollup rows")  # fmt: skip
    print(f"{'GET /console/analytics':<32}{'pages':>8}{'p50 ms':>10}{'p99 ms':>10}")
    print(f"{'30 days, groupings and filters':<32}{len(page):>8}{_p(page, 50):>10.2f}{_p(page, 99):>10.2f}")
    print(f"arrivals: {arrivals['deliveries']:,} deliveries in {arrivals['seconds']:.1f} s "
          f"({arrivals['deliveries'] / arrivals['seconds']:,.0f}/s, {arrival_changes:,.0f} changes/s); rollup folded "
          f"{f['arrival_folded']:,} in {f['arrival_busy_s']:.1f} s of work ({rollup_rate:,.0f}/s); "
          f"backlog after: {f['backlog_after']:,} ({'keeps up' if keeps_up else 'FALLS BEHIND'})")  # fmt: skip
    line = {
        "ledger_rows": f["ledger_rows"],
        "page_p50_ms": round(_p(page, 50), 2),
        "page_p99_ms": round(_p(page, 99), 2),
        "rollup_rows_per_s": round(rollup_rate),
        "arrival_changes_per_s": round(arrival_changes),
        "arrival_deliveries_per_s": round(arrivals["deliveries"] / arrivals["seconds"]),
        "backlog_after": f["backlog_after"],
        "keeps_up": keeps_up,
        "initial_rollup_rows_per_s": round(initial_rate),
        "rollup_table_rows": f["rollup_table_rows"],
    }
    print(json.dumps(line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000, help="ledger rows to load (two per notification)")
    parser.add_argument("--days", type=int, default=30, help="days the ledger spans")
    parser.add_argument("--requests", type=int, default=300, help="analytics pages to time")
    parser.add_argument("--arrival-seconds", type=float, default=20.0, help="seconds of 2,000 deliveries/s")
    args = parser.parse_args()
    with bench_lock(), bench_database(BENCH_DB, BENCH_REDIS_DB, reuse_own=True):
        figures = run(args)
    report(figures)


if __name__ == "__main__":
    main()
