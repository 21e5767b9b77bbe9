"""Scheduled-send release: the sweeper's set-based release against a raw INSERT … SELECT of the same rows.

    python -m tests.perf.bench_scheduler [--users 1000] [--per-user 100] [--rounds 2] [--steady-rate 200]
                                         [--steady-seconds 10] [--keep]

Uses its own database `hato_bench_scheduler` (dropped, created and migrated here, dropped again at the
end unless --keep) on the server of DATABASE_URL, and Redis database 2 on the server of REDIS_URL
(flushed before and after). Loads USERS users with an e-mail address and a type whose inbox and
e-mail are on by default, 10 % of the users with e-mail turned off. Then, in this one process:

  (a) raw      two statements in one transaction: INSERT INTO notifications … SELECT users ×
               generate_series(per-user), then INSERT INTO notification_deliveries … SELECT the e-mail
               rows: the same rows, tables and indexes with nothing else (the physical ceiling here)
  (b) release  USERS × PER_USER rows in scheduled_notifications, all due in the same second (loaded
               untimed); timed: app.sweeper.release_scheduled() (batches of SCHEDULER_BATCH_SIZE, each
               one DELETE … RETURNING (SKIP LOCKED) feeding the ingest's CTEs, committed, its delivery jobs
               and badge events handed to Redis) until all are visible and every job is enqueued

Runs alternate (a), (b), (a), (b) (--rounds 2) and the fastest of each counts (the machine is shared).
Rows are notifications + deliveries. Then the lag: rows fall due at a steady --steady-rate per second
for --steady-seconds while the sweeper's loop runs as `flask sweep` runs it (release_scheduled() every
SCHEDULER_INTERVAL_SECONDS); a row's lag is from its send_at to the end of the release that made it
visible. Prints a table, then one JSON line (ratio = release_rows_per_s / raw_rows_per_s; target >= 0.5).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from tests.support.databases import (
    bench_urls,
    drop_database,
    fresh_bench_database,
    row_counts,
    run_outside_transaction,
)

BENCH_DB = "hato_bench_scheduler"
BENCH_REDIS_DB = 2
TYPE = "reminder"

SETUP_SQL = [
    f"""INSERT INTO notification_types (type, label, default_in_app, default_email, default_push, priority)
        VALUES ('{TYPE}', 'Reminders', true, true, false, 'default')""",
    """INSERT INTO users (external_id, email, display_name)
       SELECT 'user-' || g, 'user' || g || '@example.com', 'User ' || g FROM generate_series(1, :users) g""",
    f"""INSERT INTO notification_preferences (user_id, type, channel, enabled)
        SELECT id, '{TYPE}', 'email', false FROM users WHERE id % 10 = 0""",
]

CONTENT = {"title": "Your trial ends tomorrow", "body": "Pick a plan to keep your projects.", "link_path": "/billing"}

# What the release writes, without the schedule table, batching, preference CTEs, dedupe or RETURNING.
RAW_SQL = [
    f"""INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, data)
        SELECT u.id, '{TYPE}', :title, :body, :link_path, 'remind:' || g, CAST('{{}}' AS jsonb)
        FROM users u CROSS JOIN generate_series(1, :per_user) g""",
    f"""INSERT INTO notification_deliveries (notification_id, user_id, channel, status)
        SELECT n.id, n.user_id, 'email', 'pending'
        FROM notifications n
        LEFT JOIN notification_preferences p ON p.user_id = n.user_id AND p.type = '{TYPE}' AND p.channel = 'email'
        WHERE coalesce(p.enabled, true)""",
]

# Every row due at the same moment (:due is the database time a little ahead).
SCHEDULE_SQL = f"""INSERT INTO scheduled_notifications (user_id, type, title, body, link_path, dedupe_key, send_at)
    SELECT u.id, '{TYPE}', :title, :body, :link_path, 'remind:' || g, :due
    FROM users u CROSS JOIN generate_series(1, :per_user) g"""

# The steady load: row i falls due at :start + i / :rate seconds, spread over the users.
STEADY_SQL = f"""INSERT INTO scheduled_notifications (user_id, type, title, body, link_path, dedupe_key, send_at)
    SELECT 1 + (i % :users), '{TYPE}', :title, :body, :link_path, 'steady:' || i,
           :start + make_interval(secs => i / CAST(:rate AS float))
    FROM generate_series(0, :count - 1) i"""

LAG_SQL = """SELECT n.id, EXTRACT(EPOCH FROM s.send_at) AS send_at
    FROM notifications n JOIN steady s ON s.dedupe_key = n.dedupe_key
    WHERE n.id > :after"""

COUNTS_SQL = """SELECT (SELECT count(*) FROM notifications) AS notifications,
                       (SELECT count(*) FROM notification_deliveries) AS deliveries,
                       (SELECT count(*) FROM scheduled_notifications) AS waiting"""


def _fresh(db, sa, redis) -> None:
    """Empty the written tables and the queues, and checkpoint, so every run starts from the same state."""
    db.session.execute(sa.text("TRUNCATE notification_deliveries, notifications, scheduled_notifications CASCADE"))
    db.session.commit()
    redis.client().flushdb()
    run_outside_transaction(db, "VACUUM ANALYZE scheduled_notifications", "CHECKPOINT")


def _jobs_enqueued(get_queue) -> tuple[int, int]:
    """(jobs, delivery ids) waiting on the default queue."""
    jobs = get_queue("default").get_jobs()
    return len(jobs), sum(len(job.args[1]) for job in jobs)


def _steady(app, db, sa, args, release_scheduled) -> list[float]:
    """Rows fall due at a steady rate while the sweeper loop runs; return each row's lag in ms."""
    count = int(args.steady_rate * args.steady_seconds)
    start = db.session.execute(sa.text("SELECT now() + interval '1 second'")).scalar_one()
    db.session.execute(
        sa.text(STEADY_SQL),
        {**CONTENT, "users": args.users, "rate": args.steady_rate, "count": count, "start": start},
    )
    db.session.execute(sa.text("CREATE TABLE steady AS SELECT dedupe_key, send_at FROM scheduled_notifications"))
    db.session.execute(sa.text("CREATE INDEX ON steady (dedupe_key)"))
    db.session.commit()
    tick = min(app.config["SWEEP_INTERVAL_SECONDS"], app.config["SCHEDULER_INTERVAL_SECONDS"])
    lags: list[float] = []
    after = 0
    deadline = time.monotonic() + args.steady_seconds + 5
    while len(lags) < count and time.monotonic() < deadline:
        release_scheduled()  # as the `flask sweep` loop calls it between full passes
        visible_at = time.time()
        rows = db.session.execute(sa.text(LAG_SQL), {"after": after}).all()
        db.session.rollback()
        for row in rows:
            lags.append((visible_at - float(row.send_at)) * 1000)
            after = max(after, row.id)
        time.sleep(tick)
    return lags


def run(args) -> dict:
    """Load, run (a) and (b) alternately, then the steady lag; return the figures."""
    import sqlalchemy as sa
    from flask_migrate import upgrade

    from app import create_app, unitofwork
    from app.extensions import db, redis
    from app.queueing import get_queue
    from app.sweeper import release_scheduled

    app = create_app({})
    figures: dict = {"users": args.users, "per_user": args.per_user, "raw_runs": [], "release_runs": []}
    figures["batch"] = app.config["SCHEDULER_BATCH_SIZE"]
    figures["interval"] = app.config["SCHEDULER_INTERVAL_SECONDS"]
    params = {**CONTENT, "users": args.users, "per_user": args.per_user}
    with app.app_context():
        upgrade()
        redis.client().flushdb()
        for statement in SETUP_SQL:
            db.session.execute(sa.text(statement), params)
        db.session.commit()
        run_outside_transaction(db, "VACUUM ANALYZE users", "VACUUM ANALYZE notification_preferences")
        for _ in range(args.rounds):
            # (a) raw
            _fresh(db, sa, redis)
            started = time.perf_counter()
            for statement in RAW_SQL:
                db.session.execute(sa.text(statement), params)
            db.session.commit()
            figures["raw_runs"].append(time.perf_counter() - started)
            raw = row_counts(db, sa, COUNTS_SQL)
            # (b) the release, from the moment the rows are due
            _fresh(db, sa, redis)
            due = db.session.execute(sa.text("SELECT now() + interval '2 seconds'")).scalar_one()
            db.session.execute(sa.text(SCHEDULE_SQL), {**params, "due": due})
            db.session.commit()
            run_outside_transaction(db, "VACUUM ANALYZE scheduled_notifications", "CHECKPOINT")
            while db.session.execute(sa.text("SELECT now() < :due"), {"due": due}).scalar_one():
                db.session.rollback()
                time.sleep(0.01)
            db.session.rollback()
            started = time.perf_counter()
            released = release_scheduled()
            assert unitofwork.wait_idle(app, 120), "delivery jobs not handed to Redis"
            figures["release_runs"].append(time.perf_counter() - started)
            real = row_counts(db, sa, COUNTS_SQL)
            figures["released"] = released
            figures["jobs"], figures["enqueued"] = _jobs_enqueued(get_queue)
        figures["same_counts"] = (raw["notifications"], raw["deliveries"]) == (
            real["notifications"],
            real["deliveries"],
        )
        figures["waiting"] = real["waiting"]
        _fresh(db, sa, redis)
        lags = _steady(app, db, sa, args, release_scheduled)
        figures["steady_rows"] = len(lags)
        redis.client().flushdb()
        db.session.remove()
        db.engine.dispose()

    lags.sort()
    rows = real["notifications"] + real["deliveries"]
    raw_s, release_s = min(figures["raw_runs"]), min(figures["release_runs"])
    figures.update(
        rows=rows,
        notifications=real["notifications"],
        deliveries=real["deliveries"],
        raw_s=raw_s,
        release_s=release_s,
        raw_rows_per_s=(raw["notifications"] + raw["deliveries"]) / raw_s,
        release_rows_per_s=rows / release_s,
        lag_p50_ms=statistics.median(lags) if lags else float("nan"),
        lag_p99_ms=lags[min(len(lags) - 1, int(len(lags) * 0.99))] if lags else float("nan"),
        lag_max_ms=lags[-1] if lags else float("nan"),
        steady_rate=args.steady_rate,
        steady_seconds=args.steady_seconds,
    )
    figures["ratio"] = figures["release_rows_per_s"] / figures["raw_rows_per_s"]
    return figures


def report(f: dict) -> None:
    """Print the table, then the JSON line."""
    print(
        f"\nScheduled release: {f['users']:,} users × {f['per_user']} = {f['users'] * f['per_user']:,} rows due in "
        f"the same second (10 % with e-mail off), batches of {f['batch']:,}"
    )
    print(f"{'':<36}{'seconds':>10}{'notifications':>15}{'deliveries':>12}{'rows/s':>12}")
    print(
        f"{'(a) raw INSERT … SELECT':<36}{f['raw_s']:>10.2f}{f['notifications']:>15,}{f['deliveries']:>12,}"
        f"{f['raw_rows_per_s']:>12,.0f}"
    )
    print(
        f"{'(b) release, visible + enqueued':<36}{f['release_s']:>10.2f}{f['notifications']:>15,}"
        f"{f['deliveries']:>12,}{f['release_rows_per_s']:>12,.0f}"
    )
    print(f"{'ratio (b)/(a)':<36}{f['ratio']:>10.2f}   target >= 0.50")
    runs = lambda key: ", ".join(f"{s:.2f}" for s in f[key])  # noqa: E731
    print(f"runs, alternating, fastest counted: (a) {runs('raw_runs')} s · (b) {runs('release_runs')} s")
    print(
        f"same counts in (a) and (b): {f['same_counts']} · left scheduled: {f['waiting']} · delivery jobs on "
        f"default: {f['jobs']:,} holding {f['enqueued']:,} ids"
    )
    print(
        f"steady {f['steady_rate']} due rows/s for {f['steady_seconds']} s ({f['steady_rows']:,} rows), sweeper "
        f"releasing every {f['interval']} s: lag p50 {f['lag_p50_ms']:.0f} ms, p99 {f['lag_p99_ms']:.0f} ms, "
        f"max {f['lag_max_ms']:.0f} ms"
    )
    keys = ("rows", "raw_rows_per_s", "release_rows_per_s", "ratio", "lag_p50_ms", "lag_p99_ms")
    print(json.dumps({k: round(f[k], 3) if isinstance(f[k], float) else f[k] for k in keys}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--per-user", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2, help="Alternating (a)/(b) runs; the fastest of each counts.")
    parser.add_argument("--steady-rate", type=float, default=200.0, help="Rows falling due per second.")
    parser.add_argument("--steady-seconds", type=float, default=10.0)
    parser.add_argument("--keep", action="store_true", help="Keep the benchmark database afterwards.")
    args = parser.parse_args()
    args.rounds = max(args.rounds, 1)
    db_url, redis_url = bench_urls(BENCH_DB, BENCH_REDIS_DB)
    fresh_bench_database(db_url, redis_url)
    try:
        figures = run(args)
    finally:
        if not args.keep:
            drop_database(db_url)
    report(figures)


if __name__ == "__main__":
    main()
