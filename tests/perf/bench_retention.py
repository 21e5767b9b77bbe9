"""Retention under load (issue 18 item 9): deleting 1,000,000 expired rows while inbox pages are served.

    python -m tests.perf.bench_retention [--expired 1000000] [--members 200] [--requests 1500]

Uses its own database `hato_bench_retention` (dropped, created and migrated here, dropped again at the
end) on the server of DATABASE_URL, or DATABASE_URL's own database when its name says it is bench
scratch space (contains `_bench`), and Redis database 9 on REDIS_URL's server. Loads, set-based
(INSERT … SELECT generate_series): --members members with 60 recent notifications each (5 unread, so
their inbox and badge are real), and --expired notifications read 200–400 days ago spread over the
same members (RETENTION_READ_DAYS 180 deletes every one of them), then VACUUM ANALYZE.

Then, in this process through Flask's test client, GET /inbox round-robin over the members:

  (a) idle       --requests pages, no deletion
  (b) deleting   pages for as long as a second process runs the retention step (app/retention, batches
                 of RETENTION_BATCH_SIZE, one short transaction each) until it has deleted everything
  (c) idle again --requests pages after it

and prints p50/p99 of each, the deletion's rows/s, the plan of one retention batch (an index range on
notifications_created_idx, never a sequential scan) and the badge query's plan before, during and after
the deletion (compared by node types and index names, costs ignored). Prints a table, then one JSON
line: deleted, inbox_p99_ms_idle ((a) and (c) pooled), inbox_p99_ms_deleting, p99_ratio
(target ≤ 2), badge_plan_unchanged. Bounded: the deletion is stopped after TIME_LIMIT_SECONDS.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time

from tests.support.databases import bench_database

BENCH_DB = "hato_bench_retention"
BENCH_REDIS_DB = 9
TYPE = "comment"
TIME_LIMIT_SECONDS = 900
LIVE_PER_MEMBER = 60
SETTINGS = {
    "RETENTION_READ_DAYS": 180,
    "RETENTION_ALL_DAYS": 730,
    "RETENTION_LEDGER_DAYS": 90,
    "RETENTION_BATCH_SIZE": 1000,
    "RETENTION_INTERVAL_SECONDS": 0.0,
    "RETENTION_BATCH_PAUSE_SECONDS": 0.1,
}

SETUP_SQL = [
    f"""INSERT INTO notification_types (type, label, default_in_app, default_email, default_push, priority)
        VALUES ('{TYPE}', 'Comments', true, false, false, 'default')""",
    """INSERT INTO users (external_id, email, display_name)
       SELECT 'bench-' || u, 'bench' || u || '@example.com', 'Bench ' || u FROM generate_series(1, :members) u""",
    # The expired history first (lower ids, as it would be): read 200-400 days ago.
    f"""INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, created_at, read_at)
        SELECT 1 + g % :members, '{TYPE}', 'Old comment ' || g, 'An old reply.', '/r/' || g, 'old:' || g,
               now() - make_interval(days => 201 + g % 200) - make_interval(secs => g % 86400),
               now() - make_interval(days => 200 + g % 200)
        FROM generate_series(1, :expired) g""",
    # Every tenth expired row was e-mailed too (the cascade takes its delivery along).
    """INSERT INTO notification_deliveries (notification_id, user_id, channel, status, attempts, provider, sent_at,
                                          created_at)
       SELECT id, user_id, 'email', 'sent', 1, 'smtp', created_at, created_at FROM notifications WHERE id % 10 = 0""",
    # What the members see: recent rows, the newest 5 unread.
    f"""INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, created_at, read_at)
        SELECT u, '{TYPE}', 'Comment ' || g || ' on reservation #' || g, 'A reply to your booking.',
               '/reservations/' || g, 'live:' || g, now() - make_interval(mins => g * 37),
               CASE WHEN g > 5 THEN now() - make_interval(mins => g * 30) END
        FROM generate_series(1, :members) u, generate_series(1, {LIVE_PER_MEMBER}) g""",
    # ... and their recent rows went out by e-mail.
    """INSERT INTO notification_deliveries (notification_id, user_id, channel, status, attempts, provider, sent_at,
                                          created_at)
       SELECT id, user_id, 'email', 'sent', 1, 'smtp', created_at, created_at
       FROM notifications WHERE dedupe_key LIKE 'live:%'""",
]

COUNT_SQL = "SELECT count(*) FROM notifications"


def _plan_shape(node: dict) -> list:
    """The plan's node types and index names, depth first (what a plan change would change)."""
    shape = [(node["Node Type"], node.get("Index Name"), node.get("Relation Name"))]
    for child in node.get("Plans", []):
        shape.extend(_plan_shape(child))
    return shape


def badge_plan(db, sa, user_id: int) -> list:
    """The badge statement's plan shape for user_id."""
    from app.inbox.queries import BADGE_CAP, BADGE_SQL

    plan = db.session.execute(
        sa.text("EXPLAIN (FORMAT JSON) " + BADGE_SQL.text), {"user_id": user_id, "cap": BADGE_CAP}
    ).scalar_one()
    db.session.rollback()
    return _plan_shape(plan[0]["Plan"])


def batch_plan(db, sa) -> list[str]:
    """EXPLAIN of one retention batch from the start of the walk (rolled back), as text lines."""
    from app.clock import db_now
    from app.retention import queries
    from app.retention.service import START, Cutoffs

    cutoffs = Cutoffs.at(db_now(), SETTINGS | {"RETENTION_ANNOUNCEMENT_READS_DAYS": 30})
    params = {
        "window": max(cutoffs.read, cutoffs.all),
        "after_at": START[0],
        "after_id": START[1],
        "limit": SETTINGS["RETENTION_BATCH_SIZE"],
        "read_cutoff": cutoffs.read,
        "all_cutoff": cutoffs.all,
    }
    rows = db.session.execute(sa.text("EXPLAIN (ANALYZE, COSTS OFF) " + queries.NOTIFICATIONS_SQL.text), params)
    lines = [row[0] for row in rows]
    db.session.rollback()  # EXPLAIN ANALYZE deleted the batch: put it back
    return lines


def _delete_all(results, started_event, settings: dict) -> None:
    """The second process: run the retention step until its walk is complete (or the time limit)."""
    from app import create_app
    from app.retention import service as retention

    app = create_app(settings)
    with app.app_context():
        deleted = batches = 0
        began = time.monotonic()
        started_event.set()
        while time.monotonic() - began < TIME_LIMIT_SECONDS:
            progress = retention.sweep(app.config, seconds=30)
            deleted += sum(progress.deleted.values())
            batches += progress.batches
            if progress.complete:
                break
        results.put({"deleted": deleted, "batches": batches, "seconds": time.monotonic() - began})


def _pages(clients, count: int) -> list[float]:
    """Serve count inbox pages round-robin; return each one's milliseconds."""
    times = []
    i = 0
    while i < count:
        client = clients[i % len(clients)]
        started = time.perf_counter()
        page = client.get("/inbox")
        times.append((time.perf_counter() - started) * 1000)
        assert page.status_code == 200, page.status_code
        i += 1
    return times


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def run(args) -> dict:
    """Load, measure idle / deleting / idle again, and the plans."""
    import sqlalchemy as sa
    from flask_migrate import upgrade

    from app import create_app
    from app.auth import sessions
    from app.extensions import db, redis
    from app.models import User
    from tests.support.databases import run_outside_transaction

    app = create_app(dict(SETTINGS))
    figures: dict = {"expired": args.expired, "members": args.members, "pause": args.pause}
    with app.app_context():
        upgrade()
        redis.client().flushdb()
        began = time.monotonic()
        for statement in SETUP_SQL:
            db.session.execute(sa.text(statement), {"members": args.members, "expired": args.expired})
        db.session.commit()
        run_outside_transaction(db, "VACUUM ANALYZE")
        figures["setup_s"] = time.monotonic() - began
        figures["rows_before"] = db.session.execute(sa.text(COUNT_SQL)).scalar_one()
        members = [(u.id, u.session_version) for u in db.session.query(User).order_by(User.id)]
        db.session.rollback()
        figures["batch_plan"] = batch_plan(db, sa)
        figures["badge_before"] = badge_plan(db, sa, members[0][0])
    clients = []
    for user_id, version in members:
        client = app.test_client()
        with client.session_transaction() as session:
            session.update({"_user_id": str(user_id), "_fresh": True, **sessions.stamp(user_id, version)})
        clients.append(client)
    _pages(clients, count=len(clients))  # warm-up: every member's first page once

    figures["idle_ms"] = _pages(clients, count=args.requests)

    context = multiprocessing.get_context("spawn")
    results, started_event = context.Queue(), context.Event()
    settings = {**SETTINGS, "RETENTION_BATCH_PAUSE_SECONDS": args.pause}
    deleter = context.Process(target=_delete_all, args=(results, started_event, settings))
    deleter.start()
    assert started_event.wait(60), "the deleting process did not start"
    badge_during: list = []

    def done() -> bool:
        if not badge_during and len(figures.get("deleting_ms", [])) > 200:
            with app.app_context():
                badge_during.append(badge_plan(db, sa, members[0][0]))
        return not deleter.is_alive()

    figures["deleting_ms"] = []
    figures["deleting_ms"] = _pages_until(clients, figures["deleting_ms"], done)
    deleter.join(10)
    figures["deletion"] = results.get(timeout=10)
    figures["badge_during"] = badge_during[0] if badge_during else figures["badge_before"]
    figures["idle_after_ms"] = _pages(clients, count=args.requests)
    with app.app_context():
        figures["rows_after"] = db.session.execute(sa.text(COUNT_SQL)).scalar_one()
        db.session.rollback()
        figures["badge_after"] = badge_plan(db, sa, members[0][0])
        run_outside_transaction(db, "ANALYZE notifications")
        figures["badge_after_analyze"] = badge_plan(db, sa, members[0][0])
    return figures


def _pages_until(clients, times: list[float], done) -> list[float]:
    """Serve inbox pages round-robin into times until done(); return times."""
    i = 0
    while not done():
        client = clients[i % len(clients)]
        started = time.perf_counter()
        page = client.get("/inbox")
        times.append((time.perf_counter() - started) * 1000)
        assert page.status_code == 200, page.status_code
        i += 1
    return times


def report(figures: dict) -> None:
    """Print the table and the JSON line."""
    deletion = figures["deletion"]
    idle, idle_after, deleting = figures["idle_ms"], figures["idle_after_ms"], figures["deleting_ms"]
    p99_idle = _p(idle + idle_after, 99)  # both idle phases pooled: the machine's noise on either side
    p99_deleting = _p(deleting, 99)
    plans = [figures[k] for k in ("badge_before", "badge_during", "badge_after", "badge_after_analyze")]
    unchanged = all(plan == plans[0] for plan in plans)
    print(
        f"{figures['members']} members × {LIVE_PER_MEMBER} live rows + {figures['expired']:,} expired rows "
        f"(setup {figures['setup_s']:.1f} s); notifications {figures['rows_before']:,} → {figures['rows_after']:,}"
    )
    print(f"{'GET /inbox':<28}{'pages':>8}{'p50 ms':>10}{'p99 ms':>10}")
    for label, values in (("(a) idle", idle), ("(b) while deleting", deleting), ("(c) idle again", idle_after)):
        print(f"{label:<28}{len(values):>8}{_p(values, 50):>10.2f}{_p(values, 99):>10.2f}")
    pooled = idle + idle_after
    print(f"{'(a) + (c) pooled':<28}{len(pooled):>8}{_p(pooled, 50):>10.2f}{p99_idle:>10.2f}")
    print(f"{'p99 ratio (b) / (a + c)':<28}{'':>8}{'':>10}{p99_deleting / p99_idle:>10.2f}")
    print(
        f"deletion: {deletion['deleted']:,} rows in {deletion['batches']:,} batches of "
        f"{SETTINGS['RETENTION_BATCH_SIZE']} with {figures['pause'] * 1000:.0f} ms pauses, {deletion['seconds']:.1f} s "
        f"({deletion['deleted'] / max(deletion['seconds'], 1e-9):,.0f} rows/s)"
    )
    print("badge plan before / during / after / after ANALYZE: " + ("unchanged" if unchanged else "CHANGED"))
    for node in plans[0]:
        print("   ", " ".join(str(part) for part in node if part))
    print("one retention batch (EXPLAIN ANALYZE, costs off):")
    for line in figures["batch_plan"]:
        print("   ", line)
    line = {
        "deleted": deletion["deleted"],
        "inbox_p99_ms_idle": round(p99_idle, 2),
        "inbox_p99_ms_deleting": round(p99_deleting, 2),
        "p99_ratio": round(p99_deleting / p99_idle, 3),
        "badge_plan_unchanged": unchanged,
        "seq_scan_in_batch": any("Seq Scan" in line for line in figures["batch_plan"]),
        "deleted_per_s": round(deletion["deleted"] / max(deletion["seconds"], 1e-9)),
    }
    print(json.dumps(line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expired", type=int, default=1_000_000, help="expired rows to delete")
    parser.add_argument("--members", type=int, default=200, help="members whose inbox is served")
    parser.add_argument("--requests", type=int, default=1500, help="pages per idle phase")
    parser.add_argument("--pause", type=float, default=0.1, help="RETENTION_BATCH_PAUSE_SECONDS of the deletion")
    args = parser.parse_args()
    with bench_database(BENCH_DB, BENCH_REDIS_DB, reuse_own=True):
        figures = run(args)
    report(figures)


if __name__ == "__main__":
    main()
