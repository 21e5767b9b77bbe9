"""Aggregation ingest: 20,000 API events over 200 hot group keys, against the same events without group_key.

    python -m tests.perf.aggregation_ingest [--events 20000] [--keys 200] [--connections 16]

Uses its own database `hato_bench_aggregation` (dropped, created and migrated here) on the server of
DATABASE_URL and Redis database 13 on the server of REDIS_URL (flushed before and after). Starts
gunicorn as tests/perf/bench_ingest.py does (docs/production.md's API-only line: gthread, 2 workers x 16
threads) and drives it from keep-alive connections. Scenarios, in interleaved rounds so that load
from other processes on the box hits both alike:

  (a) plain       POST /v1/notifications to one of --keys users, a `like` without group_key:
                  every event writes its own row and e-mail delivery (the one-statement ingest)
  (b) aggregated  the same events with group_key post:<user> (the type aggregates over an hour),
                  each from one of 1,000 actors: they collapse into --keys rows

Prints a table, then one JSON line: agg_events, agg_rows (rows the aggregated events made, expected
--keys), agg_rps, plain_rps and agg_ratio = agg_rps / plain_rps (target >= 0.7).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import tempfile
import uuid
from pathlib import Path

from tests.perf.bench_ingest import Result, Server, drive
from tests.support.databases import bench_urls, fresh_bench_database

BENCH_DB = "hato_bench_aggregation"
BENCH_REDIS_DB = 13
ACTORS = 1000
ROUNDS = 4
WARMUP_EVENTS = 400
WORKERS, THREADS = 2, 16


def _prepare(db_url: str, redis_url: str, keys: int) -> str:
    """Migrate, load the two types and `keys` recipients and an API key; return the key."""
    fresh_bench_database(db_url, redis_url)
    import sqlalchemy as sa
    from flask_migrate import upgrade

    from app import create_app
    from app.api_keys.service import create_api_key
    from app.extensions import db, redis

    app = create_app()
    with app.app_context():
        upgrade()
        redis.client().flushdb()
        db.session.execute(
            sa.text(
                "INSERT INTO notification_types (type, label, default_in_app, default_email, aggregation_window) "
                "VALUES ('like', 'Likes', true, true, 3600), ('warmup', 'Warm-up', true, true, 3600)"
            )
        )
        db.session.execute(
            sa.text(
                "INSERT INTO users (external_id, email, display_name) "
                "SELECT 'user-' || n, 'user' || n || '@example.com', 'User ' || n FROM generate_series(1, :n) n"
            ),
            {"n": keys},
        )
        key = create_api_key(None, "bench")
        db.session.commit()
        db.session.execute(sa.text("ANALYZE"))
        db.session.commit()
        db.engine.dispose()
    return key


def _rows(db_url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(db_url) as conn:
        found = conn.execute(
            "SELECT CASE WHEN group_key IS NULL THEN 'plain' ELSE 'aggregated' END, type, count(*),"
            " sum(event_count) FROM notifications GROUP BY 1, 2"
        ).fetchall()
    return {f"{kind}:{type_}": (rows, events) for kind, type_, rows, events in found}


def _events(key: str, keys: int, grouped: bool, type_: str = "like"):
    """A request factory: one like for a random user's post, from a random actor, fresh dedupe key."""
    auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    rng = random.Random(7 if grouped else 8)
    numbers = itertools.count()
    run = uuid.uuid4().hex[:8]

    def make():
        n, user, actor = next(numbers), rng.randint(1, keys), rng.randint(1, ACTORS)
        body = {
            "type": type_,
            "recipient": f"user-{user}",
            "title": "liked your post",
            "link": f"/posts/{user}",
            "dedupe_key": f"like:{run}:{n}",
            "actor": {"id": f"actor-{actor}", "name": f"Actor {actor}"},
        }
        if grouped:
            body["group_key"] = f"post:{user}"
        return "POST", "/v1/notifications", json.dumps(body), {**auth, "Idempotency-Key": str(uuid.uuid4())}

    return make


def measure(argv: list[str] | None = None) -> dict:
    """Run both scenarios, print the table, return the figures (bench_digest's last line carries them)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20_000, help="events per scenario")
    parser.add_argument("--keys", type=int, default=200, help="hot group keys (one user's post each)")
    parser.add_argument("--connections", type=int, default=16, help="concurrent keep-alive connections")
    args = parser.parse_args(argv)
    db_url, redis_url = bench_urls(BENCH_DB, BENCH_REDIS_DB)
    key = _prepare(db_url, redis_url, args.keys)
    plain, aggregated = Result("plain (no group_key)"), Result("aggregated (group_key)")
    scenarios = [(plain, _events(key, args.keys, False)), (aggregated, _events(key, args.keys, True))]
    with tempfile.TemporaryDirectory(prefix="hato-bench-aggregation-") as tmp:
        server = Server(db_url, redis_url, Path(tmp) / "gunicorn.log", WORKERS, THREADS)
        try:
            for grouped in (False, True):  # warm both paths up on a type of its own (not counted)
                drive(server.port, _events(key, args.keys, grouped, "warmup"), 202, args.connections, 60, WARMUP_EVENTS)
            for _ in range(ROUNDS):
                for result, make in scenarios:
                    requests, elapsed, errors, latencies, failures = drive(
                        server.port, make, 202, args.connections, 600, args.events // ROUNDS
                    )
                    result.requests += requests
                    result.seconds += elapsed
                    result.errors += errors
                    result.latencies_ms += latencies
                    for failure in failures:
                        print(f"  {result.name}: {failure}", file=sys.stderr)
        finally:
            server.stop()
    rows = _rows(db_url)
    from redis import Redis

    Redis.from_url(redis_url).flushdb()
    agg_rows, agg_events = rows.get("aggregated:like", (0, 0))
    plain_rows, _ = rows.get("plain:like", (0, 0))
    ratio = aggregated.rps / plain.rps if plain.rps else 0.0
    print(
        f"\nAggregation ingest: {args.events:,} events per scenario over {args.keys} hot group keys, gunicorn gthread "
        f"{WORKERS}x{THREADS}, {args.connections} connections, {ROUNDS} interleaved rounds, {os.cpu_count()} CPUs"
    )
    print(f"{'scenario':<24} {'events':>7} {'rows':>7} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6}")
    for result, made in ((plain, plain_rows), (aggregated, agg_rows)):
        print(
            f"{result.name:<24} {result.requests:>7} {made:>7} {result.rps:>7.0f} {result.percentile(50):>7.1f} "
            f"{result.percentile(99):>7.1f} {result.errors:>6}"
        )
    print(f"aggregated / plain requests/s: {ratio:.2f} (target >= 0.7); events held by the rows: {agg_events}")
    return {
        "agg_events": aggregated.requests,
        "agg_rows": agg_rows,
        "agg_events_stored": agg_events,
        "agg_rps": round(aggregated.rps, 1),
        "plain_rps": round(plain.rps, 1),
        "plain_rows": plain_rows,
        "agg_ratio": round(ratio, 3),
        "agg_p99_ms": round(aggregated.percentile(99), 2),
        "plain_p99_ms": round(plain.percentile(99), 2),
        "agg_errors": plain.errors + aggregated.errors,
    }


def main(argv: list[str] | None = None) -> int:
    print(json.dumps(measure(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
