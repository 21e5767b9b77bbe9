"""Inbox SQL on the seed article's dataset plus one heavy user: buffers and time per statement.

    python -m tests.perf.bench_inbox [--runs 5]

Uses its own database `hato_bench_inbox` (dropped, created and migrated here) on the server of
DATABASE_URL, or DATABASE_URL's own database when its name says it is bench scratch space (contains
`_bench`), so two people on one server can run it side by side. The dataset is the seed's (2,000
users × 100 notifications, newest 5 unread; 50 announcements; users 1–200 read all but the newest
3), built with the seed's set-based INSERT … SELECT, plus user 2001 with 100,000 notifications of
which every tenth (10,000) is unread. Then VACUUM ANALYZE: the state autovacuum keeps these tables
in (announcement_reads is insert-only, so its pages become all-visible and the badge's anti-join is
an index-only scan). --analyze-only skips the VACUUM, as the seed did; every heap page then has to
be visited and the announcement part of the badge reads one page per announcement the user has read.

Each statement is the one the app runs (imported from app.inbox), under EXPLAIN (ANALYZE, BUFFERS)
after a warm-up: buffers are shared hit + read of the whole statement, time is the median of --runs
executions. Writes run inside a transaction that is rolled back, so every run sees the same data.
The badge is also measured with notifications_unread_idx dropped (in a rolled-back transaction).
The unseen badge (BADGE_COUNTS=unseen, issue 15) is measured with a last-seen time that leaves some
unread rows newer (user 42: its 2 newest; the heavy user: the newest 5,000 rows, 500 of them unread),
and so is the statement the websocket frame runs for both badges at once.
Synchronized sequential scans are off, so a sequential scan always starts at the first page.

The replica phase (issue 34; skipped with a reason without PostgreSQL's server binaries, or with --no-replica)
builds a private primary and a streaming standby (tests/support/pgcluster.py), loads the same dataset, and times
the inbox page (GET /inbox through the app) for user 42 and the heavy user with DATABASE_REPLICA_URLS empty and
then set, in the same run: which server answered (app/replicas.py's counters), the primary's tuples read per
page (pg_stat_database), and the read-your-writes cost: a member who writes before every read (archive, unarchive)
and how many of those reads the standby could still answer.
Prints a table, then one JSON line with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import time

from tests.inbox.seed_dataset import SEED_NOTIFICATIONS_SQL, SEED_TYPES_SQL
from tests.support.databases import bench_urls, database_name, fresh_bench_database

BENCH_DB = "hato_bench_inbox"
SEED_USER = 42
HEAVY_USER = 2001
HEAVY_ROWS = 100_000
PAGES_DEEP = 50
TIME_LIMIT_SECONDS = 600

DATASET_SQL = [
    f"""INSERT INTO users (id, email, display_name) OVERRIDING SYSTEM VALUE
        SELECT u, 'bench' || u || '@example.com', 'Bench ' || u FROM generate_series(1, {HEAVY_USER}) u""",
    f"SELECT setval(pg_get_serial_sequence('users', 'id'), {HEAVY_USER})",
    SEED_TYPES_SQL,
    SEED_NOTIFICATIONS_SQL,  # the seed's statements, verbatim
    # The heavy user: unread rows spread through the history (every tenth), the costlier layout.
    f"""INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, read_at, created_at)
        SELECT {HEAVY_USER}, 'comment', '予約 #' || n || ' にコメントが付きました', '本文', '/reservations/' || n,
               'heavy:' || n,
               CASE WHEN n % 10 <> 0 THEN timestamptz '2026-10-01 09:00+09' + n * interval '1 minute' END,
               timestamptz '2026-01-01 09:00+09' + n * interval '2 minutes'
        FROM generate_series(1, {HEAVY_ROWS}) n""",
    """INSERT INTO announcements (title, body, published_at)
       SELECT 'お知らせ ' || n, '本文', timestamptz '2026-08-01 10:00+09' + n * interval '1 day'
       FROM generate_series(1, 50) n""",
    """INSERT INTO announcement_reads (user_id, announcement_id)
       SELECT u, a FROM generate_series(1, 200) u, generate_series(1, 47) a""",
    # Tenants (issue 32): every user belongs to two; their rows alternate between them, so a tenant's part of an
    # inbox is half of it, spread through its history (a scoped feed's counts read notifications_tenant_unread_idx).
    "INSERT INTO tenants (id, key, name) OVERRIDING SYSTEM VALUE VALUES (1, 'acme', 'Acme'), (2, 'globex', 'Globex')",
    f"""INSERT INTO tenant_members (user_id, tenant_id)
        SELECT u, t FROM generate_series(1, {HEAVY_USER}) u, generate_series(1, 2) t""",
    "UPDATE notifications SET tenant_id = 1 + id % 2",
]
TENANT = 1


def _conninfo(url: str, dbname: str | None = None) -> str:
    import psycopg

    params = psycopg.conninfo.conninfo_to_dict(url)
    if dbname:
        params["dbname"] = dbname
    return psycopg.conninfo.make_conninfo(**params)


def build(app, url: str, vacuum: bool = True) -> float:
    """Migrate and load the dataset; return the seconds it took."""
    import psycopg
    import sqlalchemy as sa
    from flask_migrate import upgrade

    from app.extensions import db

    started = time.perf_counter()
    with app.app_context():
        upgrade()
        for statement in DATASET_SQL:
            db.session.execute(sa.text(statement))
        db.session.commit()
        db.session.remove()
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:  # VACUUM cannot run in a transaction
        conn.execute("VACUUM ANALYZE" if vacuum else "ANALYZE")
    return time.perf_counter() - started


# --- measuring ------------------------------------------------------------------------------------


def _nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def explain(statement, params: dict, runs: int, setup: list[str] = ()) -> dict:
    """EXPLAIN (ANALYZE, BUFFERS) statement runs+1 times, each in a rolled-back transaction."""
    import sqlalchemy as sa

    from app.extensions import db

    text = sa.text("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement.text)
    times, result = [], None
    for _ in range(runs + 1):  # the first run warms the cache and is not counted
        try:
            db.session.execute(sa.text("SET LOCAL synchronize_seqscans = off"))
            for sql in setup:
                db.session.execute(sa.text(sql))
            result = db.session.execute(text, params).scalar_one()[0]
        finally:
            db.session.rollback()
        times.append(result["Execution Time"])
    plan = result["Plan"]
    nodes = list(_nodes(plan))
    return {
        "buffers": plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0),
        "ms": statistics.median(times[1:]),
        "sort": any(n["Node Type"] in ("Sort", "Incremental Sort") for n in nodes),
        "indexes": sorted({n["Index Name"] for n in nodes if "Index Name" in n}),
        "nodes": [{k: n.get(k) for k in ("Node Type", "Index Name", "Heap Fetches")} for n in nodes],
        "initplans": [
            n.get("Shared Hit Blocks", 0) + n.get("Shared Read Blocks", 0)
            for n in nodes
            if n.get("Subplan Name", "").startswith("InitPlan")
        ],
    }


def _deep_cursor(user_id: int, pages: int) -> str | None:
    """Walk the list with the app's keyset pagination and return the cursor that opens page `pages`."""
    from app.inbox import queries

    cursor = None
    for _ in range(pages - 1):
        cursor = queries.notification_page(user_id, "all", cursor).next_cursor
        if cursor is None:
            return None
    return cursor


# The last-seen time per measured user: user 42's two newest rows (n = 99, 100) are newer; the heavy
# user's newest 5,000 rows are (500 of them unread, so the unseen part reaches the cap).
LAST_SEEN_SQL = """
INSERT INTO notification_last_seen (user_id, seen_at)
SELECT :user_id, created_at FROM notifications WHERE user_id = :user_id
ORDER BY created_at DESC OFFSET :newer LIMIT 1
ON CONFLICT (user_id) DO UPDATE SET seen_at = EXCLUDED.seen_at
"""
NEWER_THAN_SEEN = {SEED_USER: 2, HEAVY_USER: 5000}


def _set_last_seen(user_id: int) -> None:
    """Give the user a last visit (committed: the measured statements run in rolled-back transactions)."""
    import sqlalchemy as sa

    from app.extensions import db

    db.session.execute(sa.text(LAST_SEEN_SQL), {"user_id": user_id, "newer": NEWER_THAN_SEEN[user_id]})
    db.session.commit()


def _index_only(result: dict, index: str = "notifications_unread_idx") -> bool:
    """Whether every scan of index in the plan is an Index Only Scan."""
    scans = [n for n in result["nodes"] if n.get("Index Name") == index]
    return bool(scans) and all(n["Node Type"] == "Index Only Scan" for n in scans)


def measure_user(user_id: int, runs: int) -> dict:
    """Measure every inbox statement for one user."""
    import sqlalchemy as sa

    from app.extensions import db
    from app.inbox import queries, service
    from app.pagination import Cursor

    _set_last_seen(user_id)
    badge_params = {"user_id": user_id, "cap": queries.BADGE_CAP}
    page_params = {"user_id": user_id, "limit": queries.PAGE_SIZE + 1}
    newest_unread = db.session.execute(
        sa.text("SELECT id FROM notifications WHERE user_id = :u AND read_at IS NULL ORDER BY created_at DESC LIMIT 1"),
        {"u": user_id},
    ).scalar_one()
    rows = {
        "badge": explain(queries.BADGE_SQL, badge_params, runs),
        "badge, no partial index": explain(
            queries.BADGE_SQL, badge_params, runs, setup=["DROP INDEX notifications_unread_idx"]
        ),
        "unseen badge": explain(queries.UNSEEN_SQL, badge_params, runs),
        "both badges (frame)": explain(queries.COUNTS_SQL, badge_params, runs),
        "tenant's badges (frame)": explain(queries.TENANT_COUNTS_SQL, {**badge_params, "tenant_id": TENANT}, runs),
        "first page": explain(queries._page_sql("all", keyset=False), page_params, runs),
        "mark-read": explain(service.MARK_READ_SQL, {"id": newest_unread, "user_id": user_id}, runs),
        "read-all (personal)": explain(service.READ_ALL_SQL, {"user_id": user_id}, runs),
        "read-all (announcements)": explain(service.READ_ALL_ANNOUNCEMENTS_SQL, {"user_id": user_id}, runs),
    }
    cursor = Cursor.decode(_deep_cursor(user_id, PAGES_DEEP))
    if cursor is not None:
        deep = {**page_params, "cursor_created_at": cursor.created_at, "cursor_id": cursor.id}
        rows[f"page {PAGES_DEEP} (keyset)"] = explain(queries._page_sql("all", keyset=True), deep, runs)
    return rows


def report(results: dict[int, dict], build_seconds: float, vacuumed: bool) -> dict:
    """Print the table and return the summary figures."""
    names = {SEED_USER: "user 42", HEAVY_USER: "heavy"}
    state = "VACUUM ANALYZE" if vacuumed else "ANALYZE only"
    print(
        f"\nInbox SQL, EXPLAIN (ANALYZE, BUFFERS), warm cache, after {state}; dataset built in {build_seconds:.1f} s\n"
    )
    print(f"{'statement':<28}{'user':<10}{'buffers':>9}{'ms':>10}  {'sort':<5} index")
    print("-" * 96)
    for user_id, rows in results.items():
        for name, r in rows.items():
            index = ", ".join(r["indexes"]) or "-"
            print(
                f"{name:<28}{names[user_id]:<10}{r['buffers']:>9}{r['ms']:>10.3f}"
                f"  {'yes' if r['sort'] else 'no':<5} {index}"
            )
        badge = rows["badge"]["initplans"]
        if badge:
            print(f"{'  badge parts (pers., ann.)':<28}{names[user_id]:<10}{' + '.join(map(str, badge)):>9}")
        scans = [
            f"{name}: {n['Node Type']}, heap fetches {n['Heap Fetches']}"
            for name in ("badge", "unseen badge", "both badges (frame)")
            for n in rows[name]["nodes"]
            if n.get("Index Name") == "notifications_unread_idx"
        ]
        for line in scans:
            print(f"  {names[user_id]}, notifications_unread_idx in {line}")
        print()
    seed, heavy = results[SEED_USER], results[HEAVY_USER]
    page50 = heavy.get(f"page {PAGES_DEEP} (keyset)")
    summary = {
        "badge_buffers_user42": seed["badge"]["buffers"],
        "badge_personal_buffers_user42": seed["badge"]["initplans"][0] if seed["badge"]["initplans"] else None,
        "badge_buffers_heavy": heavy["badge"]["buffers"],
        "badge_buffers_no_partial_index": seed["badge, no partial index"]["buffers"],
        "badge_buffers_no_partial_index_heavy": heavy["badge, no partial index"]["buffers"],
        "page1_buffers": heavy["first page"]["buffers"],
        "page50_buffers": page50["buffers"] if page50 else None,
        "page1_buffers_user42": seed["first page"]["buffers"],
        "first_page_has_sort": seed["first page"]["sort"] or heavy["first page"]["sort"],
        "page50_has_sort": bool(page50 and page50["sort"]),
        "badge_ms_user42": round(seed["badge"]["ms"], 3),
        "badge_ms_heavy": round(heavy["badge"]["ms"], 3),
        "mark_read_buffers_user42": seed["mark-read"]["buffers"],
        "read_all_buffers_user42": seed["read-all (personal)"]["buffers"],
        "read_all_buffers_heavy": heavy["read-all (personal)"]["buffers"],
        "unseen_buffers_user42": seed["unseen badge"]["buffers"],
        "unseen_buffers_heavy": heavy["unseen badge"]["buffers"],
        "both_badges_buffers_user42": seed["both badges (frame)"]["buffers"],
        "both_badges_buffers_heavy": heavy["both badges (frame)"]["buffers"],
        "tenant_badges_buffers_user42": seed["tenant's badges (frame)"]["buffers"],
        "tenant_badges_buffers_heavy": heavy["tenant's badges (frame)"]["buffers"],
        "tenant_badges_index_only": all(
            _index_only(r["tenant's badges (frame)"], "notifications_tenant_unread_idx") for r in (seed, heavy)
        ),
        "unseen_ms_user42": round(seed["unseen badge"]["ms"], 3),
        "unseen_ms_heavy": round(heavy["unseen badge"]["ms"], 3),
        "badges_index_only": all(
            _index_only(rows[name])
            for rows in (seed, heavy)
            for name in ("badge", "unseen badge", "both badges (frame)")
        ),
    }
    summary["badge_no_partial_index_ratio"] = round(
        summary["badge_buffers_no_partial_index"] / summary["badge_buffers_user42"], 1
    )
    checks = [
        ("badge for user 42 reads <= 10 buffers", summary["badge_buffers_user42"] <= 10),
        ("a tenant's badges for user 42 read <= 10 buffers", summary["tenant_badges_buffers_user42"] <= 10),
        ("a tenant's badges: Index Only Scans of its unread index", summary["tenant_badges_index_only"]),
        ("heavy badge bounded by the cap (< 10,000 unread rows)", summary["badge_buffers_heavy"] < 200),
        ("unseen badge for user 42 reads <= 10 buffers", summary["unseen_buffers_user42"] <= 10),
        ("heavy unseen badge reads <= 10 buffers", summary["unseen_buffers_heavy"] <= 10),
        ("badge, unseen badge and frame: Index Only Scans of the unread index", summary["badges_index_only"]),
        ("first page has no Sort node", not summary["first_page_has_sort"]),
        (
            "page 50 within a few buffers of page 1",
            page50 is not None and abs(summary["page50_buffers"] - summary["page1_buffers"]) <= 5,
        ),
    ]
    for label, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    summary["targets_met"] = all(ok for _, ok in checks)
    return summary


# --- the replica phase -----------------------------------------------------------------------------

TUPLE_PAGES = 20
REPLICA_REDIS_DB = 14  # keys are namespaced by the private cluster's URL, so nothing is flushed
TUPLES_SQL = "SELECT tup_returned + tup_fetched FROM pg_stat_database WHERE datname = current_database()"


def _signed_in(app, user_id: int):
    from app.auth import sessions

    client = app.test_client()
    with client.session_transaction() as sess:
        sess.update({"_user_id": str(user_id), "_fresh": True, **sessions.stamp(user_id, 0)})
    return client


def _primary_tuples(url: str) -> int:
    import psycopg

    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return conn.execute(TUPLES_SQL).fetchone()[0]


def _pages(apps: dict, url: str, user_id: int, requests: int) -> dict:
    """GET /inbox for one member through each app, interleaved (a loaded machine slows both alike): p50/p99 ms,
    then the primary's tuples read per page through each app alone."""
    clients = {label: _signed_in(app, user_id) for label, app in apps.items()}
    times: dict[str, list[float]] = {label: [] for label in apps}
    for client in clients.values():
        client.get("/inbox")  # warm-up (templates, pools)
    for _ in range(requests):
        for label, client in clients.items():
            started = time.perf_counter()
            assert client.get("/inbox").status_code == 200
            times[label].append((time.perf_counter() - started) * 1000)
    results = {}
    for label, client in clients.items():
        before = _primary_tuples(url)
        for _ in range(TUPLE_PAGES):
            client.get("/inbox")
        time.sleep(0.6)  # PostgreSQL's statistics reach pg_stat_database within half a second
        ordered = sorted(times[label])
        results[label] = {"p50": statistics.median(ordered), "p99": ordered[int(len(ordered) * 0.99) - 1],
                          "tuples": (_primary_tuples(url) - before) / TUPLE_PAGES}  # fmt: skip
    return results


def _own_writes(app, user_id: int, rounds: int) -> dict:
    """A member who archives or unarchives a row before every read: where their next read went."""
    import sqlalchemy as sa
    from itsdangerous import URLSafeTimedSerializer

    from app import replicas
    from app.extensions import db

    client = _signed_in(app, user_id)
    with app.app_context():
        row = db.session.execute(
            sa.text("SELECT max(id) FROM notifications WHERE user_id = :u"), {"u": user_id}
        ).scalar_one()
    with client.session_transaction() as sess:
        raw = sess.setdefault("csrf_token", secrets.token_hex(20))
    headers = {"X-CSRFToken": URLSafeTimedSerializer(app.secret_key, salt="wtf-csrf-token").dumps(raw)}
    counts = replicas.replica_set(app).reads
    before = dict(counts)
    for n in range(rounds):
        action = "archive" if n % 2 == 0 else "unarchive"
        client.post(f"/inbox/notifications/{row}/{action}", headers=headers)
        client.get("/inbox?filter=archived")  # no last-seen write of its own: only the action's
    return {server: counts[server] - before.get(server, 0) for server in counts}


def replica_phase(requests: int) -> dict:
    """The inbox page against the primary alone and with a streaming standby, on a private cluster."""
    from tests.support import pgcluster

    if not pgcluster.available():
        print("\nreplica phase skipped: needs PostgreSQL's server binaries (initdb, pg_basebackup)")
        return {}
    from app import create_app, replicas
    from app.config import sqlalchemy_url

    with pgcluster.primary_with_replica() as (primary, standby):
        url = primary.create_database(BENCH_DB)
        _, redis_url = bench_urls(BENCH_DB, REPLICA_REDIS_DB)
        base = {"SQLALCHEMY_DATABASE_URI": sqlalchemy_url(url), "DATABASE_URL": url, "REDIS_URL": redis_url,
                "REALTIME_REDIS_URL": redis_url, "REDIS_NAMESPACE": f"bench-replica-{primary.port}",
                "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(48)}  # fmt: skip
        plain = create_app(base)
        build_seconds = build(plain, url)
        standby.wait_caught_up()
        routed = create_app({**base, "DATABASE_REPLICA_URLS": [standby.url(BENCH_DB)]})
        results = {}
        for user_id in (SEED_USER, HEAVY_USER):
            for label, figures in _pages({"primary": plain, "replica": routed}, url, user_id, requests).items():
                results[(label, user_id)] = figures
        answered = dict(replicas.replica_set(routed).reads)
        own = _own_writes(routed, SEED_USER, requests)
    names = {SEED_USER: "user 42", HEAVY_USER: "heavy"}
    print(f"\nInbox page (GET /inbox, in-process, the two apps interleaved), {requests} requests each; "
          f"dataset built in {build_seconds:.1f} s\n")  # fmt: skip
    print(f"{'reads from':<12}{'user':<10}{'p50 ms':>9}{'p99 ms':>9}{'primary tuples/page':>22}")
    for (label, user_id), r in results.items():
        print(f"{label:<12}{names[user_id]:<10}{r['p50']:>9.2f}{r['p99']:>9.2f}{r['tuples']:>22.0f}")
    print(f"\nreads answered (with the standby): {answered}")
    print(f"a member writing before each read, where the read went: {own}")
    standby_share = own.get("replica0", 0) / max(1, sum(own.values()))
    return {
        "replica_page_p50_ms_user42": round(results[("replica", SEED_USER)]["p50"], 2),
        "primary_page_p50_ms_user42": round(results[("primary", SEED_USER)]["p50"], 2),
        "replica_page_p50_ms_heavy": round(results[("replica", HEAVY_USER)]["p50"], 2),
        "primary_page_p50_ms_heavy": round(results[("primary", HEAVY_USER)]["p50"], 2),
        "primary_tuples_per_page_alone_heavy": round(results[("primary", HEAVY_USER)]["tuples"]),
        "primary_tuples_per_page_with_replica_heavy": round(results[("replica", HEAVY_USER)]["tuples"]),
        "replica_reads_share": round(answered.get("replica0", 0) / max(1, sum(answered.values())), 3),
        "ryw_reads_on_standby_share": round(standby_share, 3),
    }


def main() -> None:
    """Build the dataset, measure both users, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="measured executions per statement")
    parser.add_argument("--analyze-only", action="store_true", help="ANALYZE without VACUUM, as the seed did")
    parser.add_argument("--no-replica", action="store_true", help="skip the replica phase (private primary + standby)")
    parser.add_argument(
        "--page-requests", type=int, default=200, help="inbox pages per member and server (replica phase)"
    )
    args = parser.parse_args()
    started = time.monotonic()
    own = database_name(os.environ.get("DATABASE_URL", ""))
    url, _ = bench_urls(own if "_bench" in own else BENCH_DB, 0)
    fresh_bench_database(url)  # EXPLAIN only: no Redis
    from app import create_app
    from app.config import sqlalchemy_url
    from app.extensions import db

    app = create_app({"SQLALCHEMY_DATABASE_URI": sqlalchemy_url(url), "DATABASE_URL": url})
    build_seconds = build(app, url, vacuum=not args.analyze_only)
    results = {}
    with app.app_context():
        for user_id in (SEED_USER, HEAVY_USER):
            if time.monotonic() - started > TIME_LIMIT_SECONDS:
                raise SystemExit(f"stopped: over {TIME_LIMIT_SECONDS} s")
            results[user_id] = measure_user(user_id, max(1, args.runs))
        db.session.remove()
        db.engine.dispose()
    summary = report(results, build_seconds, vacuumed=not args.analyze_only)
    if not args.no_replica:
        summary.update(replica_phase(max(10, args.page_requests)))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
