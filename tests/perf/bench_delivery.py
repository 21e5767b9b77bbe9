"""Delivery throughput: 10,000 e-mails to a local aiosmtpd sink, against a raw smtplib loop.

    python -m tests.perf.bench_delivery [--count 10000]

Uses its own database `hato_bench_delivery` (dropped, created and migrated here) on the server of
DATABASE_URL, and Redis database 8 on the server of REDIS_URL. The sink runs in its own process so it
does not share a GIL with the workers. Phases, each timed from the moment the jobs are enqueued (the
workers are already up and idle) until the sink has every message:

  raw smtplib        the same 10,000 rendered messages in a plain loop over one smtplib connection:
                     build the EmailMessage, send_message() (run first and last; the better counts)
  raw wire           the same, with the bytes flattened before the clock starts (transport only)
  1 worker (simple)  `flask worker --simple`: jobs run in the worker process (first and last, best)
  1 worker (fork)    `flask worker --fork`: a work horse is forked per job (per batch)
  2 workers          two workers of the default class
  no-op jobs         2,000 empty RQ jobs through one worker of each class: the fixed cost of a job

Prints a table, then one JSON line with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import smtplib
import sys
import tempfile
import time
from datetime import UTC
from pathlib import Path

from tests.support.databases import bench_urls, fresh_bench_database

BENCH_DB = "hato_bench_delivery"
BENCH_REDIS_DB = 8
BATCH = 100
NOOP_JOBS = 2000
COUNTER_KEY = "hato:bench:noop"
TIME_LIMIT_SECONDS = 300


def noop() -> None:
    """An RQ job that does nothing but count itself (to time the per-job overhead)."""
    from rq import get_current_job

    get_current_job().connection.incr(COUNTER_KEY)


class SmtpWire:
    """A message flattened to the bytes send_message() would write."""

    def __init__(self, to: str, email) -> None:
        self.to = to
        self.data = email.as_bytes(policy=email.policy.clone(linesep="\r\n"))


class Bench:
    """Owns the app, the sink process and the worker processes of one benchmark run."""

    def __init__(self, count: int, workdir: Path, database: str = BENCH_DB, redis_db: int = BENCH_REDIS_DB) -> None:
        from tests.support.waiting import free_port

        self.count = count
        self.workdir = workdir
        self.db_url, self.redis_url = bench_urls(database, redis_db)
        fresh_bench_database(self.db_url, self.redis_url)
        from flask_migrate import upgrade

        from app import create_app

        self.app = create_app({"DELIVERY_BATCH_SIZE": BATCH})
        self.ctx = self.app.app_context()
        self.ctx.push()
        upgrade()
        self.port = free_port()
        self.sink_log = workdir / "sink.log"
        self.env = dict(
            os.environ,
            SMTP_URL=f"smtp://127.0.0.1:{self.port}",
            EMAIL_PROVIDER="smtp",
            DELIVERY_BATCH_SIZE=str(BATCH),
            PYTHONUNBUFFERED="1",
        )
        from tests.support import load, processes

        self.processes, self.load = processes, load
        self.sink = processes.start_sink(self.port, self.sink_log, workdir / "sink.out")
        self.procs: list = []

    def close(self) -> None:
        for proc in self.procs + [self.sink]:
            self.processes.stop(proc)
        self.reset()
        self.ctx.pop()

    def reset(self) -> None:
        import sqlalchemy as sa

        from app.extensions import db, redis

        db.session.rollback()
        db.session.execute(
            sa.text(
                "TRUNCATE notification_deliveries, delivery_attempts, notifications, users RESTART IDENTITY CASCADE"
            )
        )
        db.session.commit()
        redis.client().flushdb()
        self.sink_log.write_text("")

    def arrived(self) -> int:
        with open(self.sink_log, "rb") as log:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: log.read(1 << 16), b""))

    def start_workers(self, n: int, *flags: str) -> None:
        from rq import Worker

        from app.extensions import redis

        before = len(Worker.all(connection=redis.client()))
        for _ in range(n):
            self.procs.append(
                self.processes.spawn(
                    self.processes.flask_args("worker", *flags),
                    self.env,
                    self.workdir / f"worker-{len(self.procs)}.log",
                )
            )
        self._wait(lambda: len(Worker.all(connection=redis.client())) >= before + n, 60, "workers to start")
        time.sleep(0.5)  # let them reach the blocking dequeue

    def stop_workers(self) -> None:
        while self.procs:
            self.processes.stop(self.procs.pop())

    def _wait(self, predicate, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not predicate():
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: timed out waiting for {what}")
            time.sleep(0.02)

    def rendered_messages(self) -> list:
        """The exact messages the workers send (rendered once, outside any timing)."""
        from datetime import datetime

        from app.delivery import policy, queries, service
        from app.delivery.channels import channel_for
        from app.extensions import db

        ids = self.load.create_email_deliveries(self.count, prefix="raw")
        claim = service.claim("email", ids, 600)
        rows = queries.claimed_batch(claim.ids)
        db.session.rollback()
        email = channel_for("email")
        plan = policy.plan(rows, True, datetime.now(UTC), email.skip_reason)
        templates = queries.templates_for("email", {r.type for r in plan.send})
        messages = [email.build_message(row, templates, self.app.config) for row in plan.send]
        self.reset()
        return messages

    def raw_smtplib(self, messages: list, prebuilt: bool = False) -> float:
        """Send messages in a plain loop over one smtplib connection; return messages/s.

        Default: build each EmailMessage in the loop and send_message() it (what any sender must do).
        prebuilt: the wire bytes are made before the clock starts, so only the SMTP transport is timed.
        """
        from app.providers.email_message import build_email

        mail_from = self.app.config["MAIL_FROM"]
        wires = [SmtpWire(m.to, build_email(m, mail_from, "127.0.0.1")) for m in messages] if prebuilt else None
        started = time.perf_counter()
        with smtplib.SMTP("127.0.0.1", self.port, timeout=10) as conn:
            if wires is not None:
                for wire in wires:
                    conn.sendmail("hato@localhost", [wire.to], wire.data)
            else:
                for message in messages:
                    conn.send_message(build_email(message, mail_from, "127.0.0.1"), "hato@localhost", [message.to])
        self._wait(lambda: self.arrived() >= len(messages), TIME_LIMIT_SECONDS, "the raw loop's mail")
        elapsed = time.perf_counter() - started
        self.reset()
        return len(messages) / elapsed

    def workers(self, n: int, *flags: str) -> float:
        """Deliver count e-mails with n workers; return deliveries/s (enqueue to last arrival)."""
        from app.queueing import enqueue_deliveries

        ids = self.load.create_email_deliveries(self.count, prefix=f"w{n}")
        self.start_workers(n, *flags)
        started = time.perf_counter()
        assert enqueue_deliveries("default", "email", ids)
        self._wait(lambda: self.arrived() >= len(ids), TIME_LIMIT_SECONDS, f"{n} worker(s) to deliver")
        elapsed = time.perf_counter() - started
        # The sink logs a message before the worker has committed its row: give the last commit a moment.
        self._wait(lambda: self.load.status_counts().get("sent") == len(ids), 10, "the last rows to be recorded")
        counts = self.load.status_counts()
        self.stop_workers()
        if counts.get("sent") != len(ids) or self.arrived() != len(ids):
            raise SystemExit(f"bench: expected {len(ids)} sent once, got {counts} / {self.arrived()} arrivals")
        self.reset()
        return len(ids) / elapsed

    def noop_jobs(self, *flags: str) -> float:
        """Run NOOP_JOBS empty jobs through one worker; return jobs/s."""
        from rq import Queue

        from app.extensions import redis
        from app.queueing import get_queue

        queue = get_queue("default")
        jobs = [Queue.prepare_data("tests.perf.bench_delivery.noop", result_ttl=0) for _ in range(NOOP_JOBS)]
        self.start_workers(1, *flags)
        client = redis.client()
        client.delete(COUNTER_KEY)
        started = time.perf_counter()
        with client.pipeline() as pipe:
            queue.enqueue_many(jobs, pipeline=pipe)
            pipe.execute()
        self._wait(lambda: int(client.get(COUNTER_KEY) or 0) >= NOOP_JOBS, TIME_LIMIT_SECONDS, "no-op jobs")
        elapsed = time.perf_counter() - started
        self.stop_workers()
        self.reset()
        return NOOP_JOBS / elapsed


def _runs(rates: list[float]) -> str:
    return " / ".join(f"{rate:.0f}" for rate in rates)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--database", default=BENCH_DB, help="Scratch database name (dropped and created).")
    parser.add_argument("--redis-db", type=int, default=BENCH_REDIS_DB, help="Redis database number (flushed).")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hato-bench-") as tmp:
        bench = Bench(args.count, Path(tmp), args.database, args.redis_db)
        try:
            # The machine is shared: the baseline and the headline figure are each taken twice, at the
            # start and at the end, and the better run of each counts.
            messages = bench.rendered_messages()
            raw_wire = bench.raw_smtplib(messages, prebuilt=True)
            raw_runs = [bench.raw_smtplib(messages)]
            one_runs = [bench.workers(1, "--simple")]
            one_fork = bench.workers(1, "--fork")
            two = bench.workers(2, "--simple")
            noop_simple = bench.noop_jobs("--simple")
            noop_fork = bench.noop_jobs("--fork")
            one_runs.append(bench.workers(1, "--simple"))
            raw_runs.append(bench.raw_smtplib(messages))
        finally:
            bench.close()
    raw, one_simple = max(raw_runs), max(one_runs)
    rows = [
        ("raw smtplib loop, 1 connection", raw, f"baseline (best of {_runs(raw_runs)})"),
        ("raw smtplib, pre-flattened bytes", raw_wire, "transport only: no MIME building"),
        ("1 worker, SimpleWorker (default)", one_simple, f"{one_simple / raw:.2f}x raw (best of {_runs(one_runs)})"),
        ("1 worker, forking Worker", one_fork, f"{one_fork / raw:.2f}x raw"),
        ("2 workers, SimpleWorker", two, f"{two / raw:.2f}x raw"),
        ("no-op RQ jobs, SimpleWorker", noop_simple, f"{1000 / noop_simple:.2f} ms/job"),
        ("no-op RQ jobs, forking Worker", noop_fork, f"{1000 / noop_fork:.2f} ms/job"),
    ]
    print(
        f"\nDelivery benchmark: {args.count} e-mails to a local aiosmtpd sink, batches of {BATCH}, "
        f"{os.cpu_count()} CPUs"
    )
    print(f"{'phase':<36} {'per second':>12}  note")
    for name, rate, note in rows:
        print(f"{name:<36} {rate:>12.0f}  {note}")
    per_message_ms = 1000 / one_simple
    print(
        f"job overhead per message at batch {BATCH}: {1000 / noop_simple / BATCH:.3f} ms (simple), "
        f"{1000 / noop_fork / BATCH:.3f} ms (fork), against {per_message_ms:.2f} ms per delivered message"
    )
    print(
        json.dumps(
            {
                "count": args.count,
                "batch_size": BATCH,
                "raw_smtplib_per_s": round(raw, 1),
                "raw_wire_per_s": round(raw_wire, 1),
                "one_worker_per_s": round(one_simple, 1),
                "one_worker_fork_per_s": round(one_fork, 1),
                "two_workers_per_s": round(two, 1),
                "ratio_one_worker": round(one_simple / raw, 3),
                "ratio_one_worker_fork": round(one_fork / raw, 3),
                "ratio_two_workers": round(two / raw, 3),
                "ratio_one_worker_vs_wire": round(one_simple / raw_wire, 3),
                "noop_jobs_per_s": round(noop_simple, 1),
                "noop_jobs_fork_per_s": round(noop_fork, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
