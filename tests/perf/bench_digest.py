"""Digest throughput: N users each with 5 unread e-mails waiting for the same hourly digest, to a local sink.

    python -m tests.perf.bench_digest [--full] [--users N] [--agg-events N]

By default 20,000 users and 5,000 aggregation events per scenario (a few minutes); --full runs the
issue's size, 100,000 users and 20,000 events (about 25 minutes on the 2-vCPU machine). Each ratio is
measured against its baseline in the same run, at the same size.

Uses its own database `hato_bench_digest` (dropped, created and migrated here) on the server of
DATABASE_URL, and Redis database 12 on the server of REDIS_URL. The sink runs in its own process. Phases:

  raw loop     one precomputed SQL result (every user's address and items), then in one process the
               same messages built (the digest renderer, then the EmailMessage) and sent over one
               smtplib connection
  digest       the sweeper's step (open the due runs set-based, one statement per DIGEST_BATCH_SIZE
               waiting e-mails; enqueue their jobs, SWEEP_LIMIT runs per pass, a pass a second) in this
               process, and one worker (`--simple`, the same process count as the raw loop) claiming,
               loading, rendering, sending and recording;
               timed from the step's start until the sink has every digest and every run is recorded

Prints a table, then one JSON line (digest_users, digest_per_s, raw_per_s, digest_ratio, …).
"""

from __future__ import annotations

import argparse
import json
import os
import smtplib
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from tests.perf import aggregation_ingest
from tests.support.databases import bench_urls, fresh_bench_database

BENCH_DB = "hato_bench_digest"
BENCH_REDIS_DB = 12
ITEMS_PER_USER = 5
# (users, aggregation events per scenario): the default finishes in minutes, --full is the size.
DEFAULT_SIZE, FULL_SIZE = (20_000, 5_000), (100_000, 20_000)
TIME_LIMIT_SECONDS = 1800

SEED_SQL = [
    """INSERT INTO notification_types (type, label, default_email, email_frequency, priority)
       VALUES ('like', 'Likes', true, 'hourly', 'low')""",
    """INSERT INTO users (email, display_name, external_id)
       SELECT 'user' || g || '@example.com', 'User ' || g, 'u-' || g FROM generate_series(1, :users) g""",
    """INSERT INTO notifications (user_id, type, title, body, dedupe_key, link_path, created_at)
       SELECT u.id, 'like', 'Someone liked your post ' || g, 'Body ' || g, 'b:' || u.id || ':' || g,
              '/posts/' || g, :created
       FROM users u CROSS JOIN generate_series(1, :per_user) g""",
    """INSERT INTO notification_deliveries (notification_id, user_id, channel, status, skip_reason)
       SELECT id, user_id, 'email', 'skipped', 'digested' FROM notifications ORDER BY id""",
]

# The baseline's one precomputed result: what a hand-written digest sender would read.
RAW_SQL = """
SELECT u.id, u.email, u.display_name, u.locale, n.id AS nid, n.type, t.label, n.title, n.body, n.link_path,
       n.created_at
FROM notification_deliveries d
JOIN notifications n ON n.id = d.notification_id
JOIN notification_types t ON t.type = n.type
JOIN users u ON u.id = n.user_id
WHERE d.skip_reason = 'digested' AND n.read_at IS NULL
ORDER BY u.id, t.label, n.type, n.created_at DESC, n.id DESC
"""


class Bench:
    """Owns the app, the sink process and the worker of one benchmark run."""

    def __init__(self, users: int, workdir: Path) -> None:
        from tests.support.waiting import free_port

        self.users = users
        self.workdir = workdir
        self.db_url, self.redis_url = bench_urls(BENCH_DB, BENCH_REDIS_DB)
        fresh_bench_database(self.db_url, self.redis_url)
        from flask_migrate import upgrade

        from app import create_app

        self.app = create_app()
        self.ctx = self.app.app_context()
        self.ctx.push()
        upgrade()
        self.port = free_port()
        self.sink_log = workdir / "sink.log"
        self.env = dict(
            os.environ, SMTP_URL=f"smtp://127.0.0.1:{self.port}", EMAIL_PROVIDER="smtp", PYTHONUNBUFFERED="1"
        )
        from tests.support import processes

        self.processes = processes
        self.sink = processes.start_sink(self.port, self.sink_log, workdir / "sink.out")
        self.procs: list = []
        self.now = datetime.now(UTC).replace(minute=0, second=30, microsecond=0)

    def close(self) -> None:
        for proc in self.procs + [self.sink]:
            self.processes.stop(proc)
        self.ctx.pop()

    def seed(self) -> float:
        """Insert the users, their items and the waiting e-mails; return the seconds it took."""
        import sqlalchemy as sa

        from app.extensions import db, redis

        started = time.perf_counter()
        db.session.execute(sa.text("TRUNCATE digest_runs, notification_deliveries, notifications, users CASCADE"))
        db.session.execute(sa.text("DELETE FROM notification_types"))
        params = {"users": self.users, "per_user": ITEMS_PER_USER, "created": self.now.replace(minute=0, second=0)
                  - __import__("datetime").timedelta(minutes=30)}  # fmt: skip
        for statement in SEED_SQL:
            db.session.execute(sa.text(statement), params)
        db.session.commit()
        db.session.execute(sa.text("ANALYZE"))
        db.session.commit()
        redis.client().flushdb()
        self.sink_log.write_text("")
        return time.perf_counter() - started

    def arrived(self) -> int:
        with open(self.sink_log, "rb") as log:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: log.read(1 << 16), b""))

    def _wait(self, predicate, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not predicate():
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: timed out waiting for {what}")
            time.sleep(0.05)

    def raw_loop(self) -> float:
        """The baseline: one query, then build and send every digest over one connection; return digests/s."""
        from itertools import groupby

        import sqlalchemy as sa

        from app.digests import rendering
        from app.digests.queries import Item
        from app.extensions import db
        from app.providers import Message
        from app.providers.email_message import build_email

        config, base_url = self.app.config, self.app.config["BASE_URL"]
        started = time.perf_counter()
        rows = db.session.execute(sa.text(RAW_SQL)).all()
        db.session.rollback()
        with smtplib.SMTP("127.0.0.1", self.port, timeout=10) as conn:
            for user_id, items in groupby(rows, key=lambda r: r.id):
                items = list(items)
                first = items[0]
                listed = [Item(r.nid, r.type, r.label, r.title, r.body, r.link_path, r.created_at) for r in items]
                context = rendering.digest_context(first.display_name, first.email, first.locale, "hourly", listed,
                                                   base_url)  # fmt: skip
                rendered = rendering.render_digest(context, config)
                message = Message(delivery_id=user_id, channel="email", to=first.email, to_name=first.display_name,
                                  subject=rendered.subject, text=rendered.text, html=rendered.html)  # fmt: skip
                conn.send_message(build_email(message, config["MAIL_FROM"], "127.0.0.1"), "hato@localhost",
                                  [first.email])  # fmt: skip
        self._wait(lambda: self.arrived() >= self.users, TIME_LIMIT_SECONDS, "the raw loop's mail")
        return self.users / (time.perf_counter() - started)

    def digest(self) -> tuple[float, float]:
        """The system: the sweeper's step here, one worker sending; return (digests/s, seconds of the step)."""
        import sqlalchemy as sa
        from rq import Worker

        from app.digests.sweep import sweep
        from app.extensions import db, redis

        self.procs.append(
            self.processes.spawn(self.processes.flask_args("worker", "--simple"), self.env, self.workdir / "worker.log")
        )
        self._wait(lambda: len(Worker.all(connection=redis.client())) >= 1, 60, "the worker to start")
        time.sleep(0.5)
        started = time.perf_counter()
        result = sweep(self.app.config, self.now)
        step = time.perf_counter() - started
        assert result["opened"] == self.users, result
        enqueued = result["enqueued"]
        while enqueued < self.users:  # the sweeper's next passes: SWEEP_LIMIT runs handed to jobs per pass
            time.sleep(1)
            enqueued += sweep(self.app.config, self.now)["enqueued"]
        self._wait(lambda: self.arrived() >= self.users, TIME_LIMIT_SECONDS, "the digests")

        def recorded() -> bool:
            db.session.rollback()
            return db.session.execute(sa.text("SELECT count(*) FROM digest_runs WHERE status = 'sent'")).scalar() == (
                self.users
            )

        self._wait(recorded, 30, "every run to be recorded")
        elapsed = time.perf_counter() - started
        ids = self.processes.message_ids(self.sink_log)
        if len(ids) != self.users or len(set(ids)) != self.users:
            raise SystemExit(f"bench: expected {self.users} digests once each, got {len(ids)} ({len(set(ids))} unique)")
        return self.users / elapsed, step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--full", action="store_true", help=f"the full size: {FULL_SIZE[0]:,} users, {FULL_SIZE[1]:,} events"
    )
    parser.add_argument("--users", type=int, help=f"users with a digest (default {DEFAULT_SIZE[0]:,})")
    parser.add_argument(
        "--agg-events", type=int, help=f"aggregation ingest: events per scenario (default {DEFAULT_SIZE[1]:,})"
    )
    args = parser.parse_args(argv)
    size = FULL_SIZE if args.full else DEFAULT_SIZE
    args.users = args.users or size[0]
    args.agg_events = args.agg_events or size[1]
    with tempfile.TemporaryDirectory(prefix="hato-bench-") as tmp:
        bench = Bench(args.users, Path(tmp))
        try:
            seeded = bench.seed()
            raw = bench.raw_loop()
            bench.seed()
            digest, step = bench.digest()
        finally:
            bench.close()
    print(
        f"\nDigest benchmark: {args.users:,} users × {ITEMS_PER_USER} unread e-mails due in the same hourly digest, "
        f"local aiosmtpd sink, {os.cpu_count()} CPUs (seed {seeded:.1f} s)"
    )
    print(f"{'phase':<44} {'digests/s':>10}  note")
    print(f"{'raw loop (1 query, render, smtplib, 1 conn)':<44} {raw:>10.0f}  baseline, one process")
    print(f"{'sweeper step + 1 worker (SimpleWorker)':<44} {digest:>10.0f}  {digest / raw:.2f}x raw; "
          f"opening {args.users:,} runs took {step:.1f} s")  # fmt: skip
    # The second figure: the aggregation ingest (tests/perf/aggregation_ingest.py), same run.
    aggregation = aggregation_ingest.measure(["--events", str(args.agg_events)])
    print(
        json.dumps(
            {
                **aggregation,
                "digest_users": args.users,
                "digest_items_per_user": ITEMS_PER_USER,
                "digest_open_seconds": round(step, 2),
                "digest_per_s": round(digest, 1),
                "raw_per_s": round(raw, 1),
                "digest_ratio": round(digest / raw, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
