"""Webhook throughput: 10,000 events to a local verifying receiver, against a raw keep-alive loop.

    python -m tests.perf.bench_webhooks [--count 10000] [--db hato_bench_webhooks] [--redis-db 9]

Uses its own database (dropped, created and migrated here) on the server of DATABASE_URL and its own
Redis database. The receiver (tests/webhooks/receiver.py) runs in its own process, verifies every
request with the standardwebhooks package and stores each webhook-id once. Phases (same run):

  raw loop           the same signed bodies POSTed in a plain loop over one keep-alive http.client
                     connection (sign each with a fresh timestamp, send, read the answer); run first and last
  1 worker           the events are in the outbox already; deliver_batch jobs (100 rows each) enqueued, one
                     `flask worker --simple` claims, signs, posts and records them; timed from enqueue until
                     the receiver has every webhook-id and every row is `sent`; run first and last
  engine in-process  the same rows through app.delivery.engine.deliver_batch in this process (no RQ)

Prints a table, then one JSON line: events, raw_per_s, webhook_per_s (1 worker, the better run), ratio.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.support.databases import bench_urls, fresh_bench_database

BATCH = 100
TIME_LIMIT_SECONDS = 300


class Bench:
    """Owns the app, the receiver process and the worker of one run."""

    def __init__(self, count: int, workdir: Path, db_name: str, redis_db: int) -> None:
        from tests.support.waiting import free_port

        self.count = count
        self.workdir = workdir
        self.db_url, self.redis_url = bench_urls(db_name, redis_db)
        fresh_bench_database(self.db_url, self.redis_url)
        from flask_migrate import upgrade

        from app import create_app

        settings = {"DELIVERY_BATCH_SIZE": BATCH, "WEBHOOK_ALLOW_HTTP_ENDPOINTS": True,
                    "WEBHOOK_ALLOW_PRIVATE_ADDRESSES": True}  # fmt: skip
        self.app = create_app(settings)
        self.ctx = self.app.app_context()
        self.ctx.push()
        upgrade()
        from tests.support import processes

        self.processes = processes
        self.port = free_port()
        self.env = dict(os.environ, DELIVERY_BATCH_SIZE=str(BATCH), WEBHOOK_ALLOW_HTTP_ENDPOINTS="1",
                        WEBHOOK_ALLOW_PRIVATE_ADDRESSES="1", PYTHONUNBUFFERED="1")  # fmt: skip
        from app.unitofwork import commit
        from app.webhooks import service

        created = service.create_endpoint(None, f"http://127.0.0.1:{self.port}/hooks/hato", ["notification.created"])
        commit()
        self.secret = created.secret
        self.receiver = processes.spawn(["-m", "tests.webhooks.receiver", str(self.port), self.secret], self.env,
                                        workdir / "receiver.log")  # fmt: skip
        self._wait(lambda: self._figures() is not None, 30, "the receiver")
        self.procs: list = []

    def close(self) -> None:
        for proc in self.procs + [self.receiver]:
            self.processes.stop(proc)
        self.ctx.pop()

    def _figures(self) -> dict | None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            conn.request("GET", "/count")
            return json.loads(conn.getresponse().read())
        except OSError:
            return None

    def reset(self) -> None:
        import sqlalchemy as sa

        from app.extensions import db, redis

        db.session.rollback()
        db.session.execute(sa.text("TRUNCATE webhook_attempts, webhook_deliveries RESTART IDENTITY"))
        db.session.commit()
        redis.client().flushdb()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        conn.request("GET", "/reset")
        conn.getresponse().read()

    def _wait(self, predicate, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not predicate():
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: timed out waiting for {what}")
            time.sleep(0.02)

    def emit(self) -> list[int]:
        """Put count events in the outbox (untimed); return their row ids."""
        import sqlalchemy as sa

        from app.extensions import db
        from app.unitofwork import commit
        from app.webhooks import service

        self.reset()
        for start in range(0, self.count, 1000):
            items = [{"notification_id": i, "user_id": i % 97, "type": "comment"}
                     for i in range(start, min(start + 1000, self.count))]  # fmt: skip
            service.emit_many("notification.created", items)
            commit().wait()
        from app.extensions import redis

        redis.client().flushdb()  # the jobs the commits enqueued: each phase enqueues its own
        return list(db.session.execute(sa.text("SELECT id FROM webhook_deliveries ORDER BY id")).scalars())

    def bodies(self) -> list[tuple[str, bytes]]:
        import sqlalchemy as sa

        from app.extensions import db

        rows = db.session.execute(sa.text("SELECT webhook_id, payload FROM webhook_deliveries ORDER BY id")).all()
        db.session.rollback()
        return [(r.webhook_id, r.payload.encode()) for r in rows]

    def raw(self, bodies: list[tuple[str, bytes]]) -> float:
        """POST the signed bodies over one keep-alive connection; return events/s."""
        from app.webhooks import signing

        key = signing.secret_bytes(self.secret)
        self.reset()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        started = time.perf_counter()
        for webhook_id, body in bodies:
            conn.request(
                "POST", "/hooks/hato", body=body, headers=signing.headers(key, webhook_id, int(time.time()), body)
            )
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"bench: the receiver answered {response.status}")
        elapsed = time.perf_counter() - started
        conn.close()
        figures = self._figures()
        if figures["stored"] != len(bodies):
            raise SystemExit(f"bench: raw loop stored {figures}")
        return len(bodies) / elapsed

    def _check(self, ids: list[int], what: str) -> None:
        import sqlalchemy as sa

        from app.extensions import db

        def done() -> bool:
            db.session.rollback()
            sent = db.session.execute(sa.text("SELECT count(*) FROM webhook_deliveries WHERE status = 'sent'")).scalar()
            return sent == len(ids)

        self._wait(done, 30, f"{what}: every row recorded sent")
        figures = self._figures()
        if figures["stored"] != len(ids) or figures["rejected"]:
            raise SystemExit(f"bench: {what} stored {figures}")

    def worker(self) -> tuple[float, int]:
        """Deliver the outbox with one RQ worker; return (events/s, wire duplicates)."""
        from rq import Worker

        from app.extensions import redis
        from app.queueing import enqueue_deliveries

        ids = self.emit()
        self.procs.append(self.processes.spawn(self.processes.flask_args("worker", "--simple"), self.env,
                                               self.workdir / "worker.log"))  # fmt: skip
        self._wait(lambda: len(Worker.all(connection=redis.client())) >= 1, 60, "the worker")
        time.sleep(0.5)
        started = time.perf_counter()
        assert enqueue_deliveries("default", "webhook", ids)
        self._wait(lambda: (self._figures() or {}).get("stored", 0) >= len(ids), TIME_LIMIT_SECONDS, "1 worker")
        elapsed = time.perf_counter() - started
        self._check(ids, "1 worker")
        duplicates = self._figures()["wire"] - len(ids)
        while self.procs:
            self.processes.stop(self.procs.pop())
        return len(ids) / elapsed, duplicates

    def in_process(self) -> float:
        """Deliver the outbox through the engine in this process, batch after batch; return events/s."""
        from flask import current_app

        from app.delivery import engine

        ids = self.emit()
        started = time.perf_counter()
        for start in range(0, len(ids), BATCH):
            engine.deliver_batch("webhook", ids[start : start + BATCH], current_app.config)
        elapsed = time.perf_counter() - started
        self._check(ids, "engine in-process")
        return len(ids) / elapsed


def _runs(rates: list[float]) -> str:
    return " / ".join(f"{rate:.0f}" for rate in rates)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--db", default="hato_bench_webhooks")
    parser.add_argument("--redis-db", type=int, default=9)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hato-bench-") as tmp:
        bench = Bench(args.count, Path(tmp), args.db, args.redis_db)
        try:
            bench.emit()
            bodies = bench.bodies()
            # A shared machine: the baseline and the headline are each taken first and last; the better counts.
            raw_runs = [bench.raw(bodies)]
            first, dup_first = bench.worker()
            engine_rate = bench.in_process()
            last, dup_last = bench.worker()
            raw_runs.append(bench.raw(bodies))
        finally:
            bench.close()
    raw, webhook = max(raw_runs), max(first, last)
    rows = [
        ("raw loop, 1 keep-alive connection", raw, f"baseline (best of {_runs(raw_runs)})"),
        (
            "1 worker (SimpleWorker), webhook channel",
            webhook,
            f"{webhook / raw:.2f}x raw (best of {_runs([first, last])})",
        ),
        ("engine in-process, no RQ", engine_rate, f"{engine_rate / raw:.2f}x raw"),
    ]
    print(f"\nWebhook benchmark: {args.count} events to a local verifying receiver, batches of {BATCH}, "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'phase':<42} {'per second':>12}  note")
    for name, rate, note in rows:
        print(f"{name:<42} {rate:>12.0f}  {note}")
    print(f"wire duplicates: {dup_first} (first run), {dup_last} (last run)")
    print(json.dumps({"events": args.count, "raw_per_s": round(raw, 1), "webhook_per_s": round(webhook, 1),
                      "ratio": round(webhook / raw, 3)}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
