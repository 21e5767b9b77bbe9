"""Ingest throughput: POST /v1/notifications under gunicorn, against a bare-psycopg baseline doing the same SQL.

    python -m tests.perf.bench_ingest [--seconds 9] [--connections 16] [--max-requests 60000]
                                      [--database hato_bench_ingest] [--redis-db 9]

Uses its own database (`--database`, created and migrated here, dropped at the end) on the server of
DATABASE_URL, and Redis database `--redis-db` on the server of REDIS_URL (flushed before and after). Starts
gunicorn with docs/production.md's settings for an API-only process (`-c
python:app.realtime.gunicorn_conf` with WEB_MAX_SOCKETS=0: gthread, 2 workers x 16 threads, a pool of
one PostgreSQL connection per thread; --workers/--threads to compare others) on a free
127.0.0.1 port, and beside it the same gunicorn configuration serving tests/perf/ingest_baseline.py
(a bare WSGI app sending an ingest's SQL through plain psycopg, and its Redis work; its docstring says
exactly what it does and does not do), then drives them from this process: a few threads, each with
one persistent http.client connection, every scenario bounded by time and by request count. Scenarios:

  (a) trivial      GET /v1/ping: {"ok": true}, no key, no database: the server's ceiling
  (b) baseline     POST to the baseline app, the same body as (c): the same statements in one
                   transaction, the same Redis work, no framework: the ingest's honest ceiling
  (c) ingest       POST /v1/notifications, 1 recipient, a fresh Idempotency-Key and dedupe key each
                   time (so every request writes a notification and an e-mail delivery, enqueues
                   the delivery job and publishes a badge event)
  (d) bulk         the same with 100 recipients per request (notifications/s = requests/s x 100)

Scenarios run in interleaved rounds so that load from other processes on the box hits them alike.
Both servers hold up to workers x threads PostgreSQL connections each (64 by default): on a server with
few free connections, pass a smaller --threads (both servers use it).
The API rate limit is lifted for the run (API_RATE_LIMIT), everything else is as in production. The key has
quotas (issue 32: a rate and a daily quota, far above what the run sends), so each ingest pays their count in
Redis; --no-quota leaves them out.
Besides requests/s and latency, the table shows the CPU time one request costs in the app (gunicorn
processes), in PostgreSQL (the benchmark database's backends) and in this load generator.
Prints a table, then one JSON line with the figures (ingest_ratio = ingest_rps / baseline_rps, the target;
trivial_ratio = ingest_rps / trivial_rps, the figure of earlier rounds).
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.databases import bench_urls, drop_database, fresh_bench_database

BENCH_DB = "hato_bench_ingest"
BENCH_REDIS_DB = 9
USERS = 5000
BULK = 100
WARMUP_SECONDS = 1.5
# docs/production.md's line; --workers/--threads override it to compare settings.
WORKERS, THREADS = 2, 16
ROUNDS = 3
ROOT = Path(__file__).resolve().parents[2]
APP_TARGET = "wsgi:app"
BASELINE_TARGET = "tests.perf.ingest_baseline:app"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _prepare(db_url: str, redis_url: str, quota: bool = True) -> str:
    """Migrate, load a type, USERS recipients and an API key (with quotas set far above the run, unless not
    quota: each request is counted, none refused); return the key."""
    fresh_bench_database(db_url, redis_url)
    import sqlalchemy as sa
    from flask_migrate import upgrade

    from app import create_app
    from app.api_keys.service import create_api_key, key_prefix, set_quota
    from app.extensions import db, redis

    app = create_app()
    with app.app_context():
        upgrade()
        redis.client().flushdb()
        db.session.execute(
            sa.text(
                "INSERT INTO notification_types (type, label, default_in_app, default_email, default_push, priority) "
                "VALUES ('order_shipped', 'Order shipped', true, true, false, 'default')"
            )
        )
        db.session.execute(
            sa.text(
                "INSERT INTO users (external_id, email, display_name) "
                "SELECT 'user-' || n, 'user' || n || '@example.com', 'User ' || n FROM generate_series(1, :n) n"
            ),
            {"n": USERS},
        )
        key = create_api_key(None, "bench")
        if quota:
            set_quota(None, key_prefix(key), 1_000_000, 1_000_000, 1_000_000_000_000)
        db.session.commit()
        db.session.execute(sa.text("ANALYZE"))
        db.session.commit()
        db.engine.dispose()
    return key


def _count_rows(db_url: str) -> tuple[int, int]:
    import psycopg

    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        notifications = conn.execute("SELECT count(*) FROM notifications").fetchone()[0]
        deliveries = conn.execute("SELECT count(*) FROM notification_deliveries").fetchone()[0]
    return notifications, deliveries


class Server:
    """gunicorn running target (wsgi:app unless told) on a free 127.0.0.1 port."""

    def __init__(
        self,
        db_url: str,
        redis_url: str,
        log: Path,
        workers: int,
        threads: int,
        target: str = APP_TARGET,
        ready_path: str = "/v1/ping",
    ) -> None:
        from tests.support.waiting import free_port

        self.port = free_port()
        self.ready_path = ready_path
        # docs/production.md's line for a process that serves the API only: no websockets, `threads` request
        # threads per worker, and one pooled connection per thread (a smaller pool closes and reopens
        # connections under load).
        env = dict(
            os.environ,
            DATABASE_URL=db_url,
            REDIS_URL=redis_url,
            API_RATE_LIMIT="100000000 per minute",
            BASE_URL=f"http://127.0.0.1:{self.port}",
            PYTHONUNBUFFERED="1",
            WEB_WORKERS=str(workers),
            WEB_MAX_SOCKETS="0",
            WEB_REQUEST_THREADS=str(threads),
            DB_POOL_SIZE=str(threads),
        )
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:app.realtime.gunicorn_conf",
                target,
                "--bind",
                f"127.0.0.1:{self.port}",
            ],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"bench: gunicorn did not start, see {log}")
            time.sleep(0.2)

    def _answers(self) -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            conn.request("GET", self.ready_path)
            ok = conn.getresponse().status == 200
            conn.close()
            return ok
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process from /proc (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class CpuMeter:
    """CPU time of the gunicorn processes, the benchmark database's client backends and this load generator.

    Autovacuum and the WAL writer/checkpointer are left out: they run in bursts and would land on
    whichever scenario happens to be running.
    """

    def __init__(self, server_pid: int, db_url: str) -> None:
        import psycopg

        from tests.support.databases import database_name

        self.server_pid = server_pid
        self.database = database_name(db_url)
        self.conn = psycopg.connect(db_url, autocommit=True)
        self.own_backend = self.conn.execute("SELECT pg_backend_pid()").fetchone()[0]

    def _app_pids(self) -> list[int]:
        pids = [self.server_pid]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                if ppid == self.server_pid:
                    pids.append(int(entry.name))
        return pids

    def snapshot(self) -> dict:
        backends = [
            row[0]
            for row in self.conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s AND backend_type = 'client backend'",
                (self.database, self.own_backend),
            )
        ]
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "app": {pid: _cpu_seconds(pid) for pid in self._app_pids()},
            "postgres": {pid: _cpu_seconds(pid) for pid in backends},
            "generator": usage.ru_utime + usage.ru_stime,
        }

    @staticmethod
    def spent(before: dict, after: dict) -> dict[str, float]:
        """CPU seconds per part between two snapshots (a backend that started in between counts in full)."""
        spent = {"generator": after["generator"] - before["generator"]}
        for part in ("app", "postgres"):
            spent[part] = sum(
                (t or 0.0) - (before[part].get(pid) or 0.0) for pid, t in after[part].items() if t is not None
            )
        return spent

    def close(self) -> None:
        self.conn.close()


@dataclass
class Result:
    """One scenario's figures, summed over the rounds."""

    name: str
    per_request: int = 1
    requests: int = 0
    seconds: float = 0.0
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=lambda: {"app": 0.0, "postgres": 0.0, "generator": 0.0})

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0

    def cpu_ms(self, part: str) -> float:
        """CPU milliseconds per request spent by part."""
        return self.cpu[part] / self.requests * 1000 if self.requests else 0.0


def drive(
    port: int, make_request, expected: int, connections: int, seconds: float, max_requests: int
) -> tuple[int, float, int, list[float], list[str]]:
    """Send requests from `connections` threads (one keep-alive connection each) until time or count runs out.

    Returns (requests, elapsed seconds, errors, latencies in ms, a few failure descriptions).
    """
    numbers = itertools.count()
    latencies: list[list[float]] = [[] for _ in range(connections)]
    errors = [0] * connections
    failures: list[str] = []
    deadline = time.perf_counter() + seconds

    def worker(slot: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = latencies[slot]
        while next(numbers) < max_requests and time.perf_counter() < deadline:
            method, path, body, headers = make_request()
            started = time.perf_counter()
            try:
                conn.request(method, path, body, headers)
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                errors[slot] += 1
                failures.append(f"{type(exc).__name__}: {exc}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            mine.append((time.perf_counter() - started) * 1000)
            if response.status != expected:
                errors[slot] += 1
                failures.append(f"{response.status} {data[:200]!r}")
        conn.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + 60)
    elapsed = time.perf_counter() - started
    flat = [x for slot in latencies for x in slot]
    return len(flat), elapsed, sum(errors), flat, failures[:5]


def _scenarios(key: str, run_id: str, app: Server, baseline: Server):
    """(result, request maker, expected status, server) per scenario, in the order of the table."""
    auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    rng = random.Random(42)
    user_ids = [f"user-{n}" for n in range(1, USERS + 1)]
    numbers = itertools.count()

    def ping():
        return "GET", "/v1/ping", None, {}

    def one_recipient() -> str:
        n = next(numbers)
        body = {
            "type": "order_shipped",
            "recipient": rng.choice(user_ids),
            "title": f"Order {n} has shipped",
            "body": "It should arrive on Thursday.",
            "link": f"/orders/{n}",
            "data": {"order": n},
            "dedupe_key": f"order:{run_id}:{n}",
        }
        return json.dumps(body)

    def ingest():
        return "POST", "/v1/notifications", one_recipient(), {**auth, "Idempotency-Key": str(uuid.uuid4())}

    def baseline_ingest():
        return "POST", "/", one_recipient(), {**auth, "Idempotency-Key": str(uuid.uuid4())}

    def bulk():
        n = next(numbers)
        start = (n * BULK) % USERS
        recipients = (user_ids[start:] + user_ids[:start])[:BULK]
        body = {
            "type": "order_shipped",
            "recipients": recipients,
            "title": f"Sale {n} starts now",
            "body": "Everything is 20% off.",
            "link": "/sale",
            "dedupe_key": f"sale:{run_id}:{n}",
        }
        return "POST", "/v1/notifications", json.dumps(body), {**auth, "Idempotency-Key": str(uuid.uuid4())}

    return [
        (Result("trivial GET /v1/ping"), ping, 200, app),
        (Result("baseline, bare psycopg"), baseline_ingest, 202, baseline),
        (Result("ingest, 1 recipient"), ingest, 202, app),
        (Result(f"bulk, {BULK} recipients", per_request=BULK), bulk, 202, app),
    ]


def run(meters: dict[int, CpuMeter], scenarios, args) -> None:
    """Warm every scenario up, then measure them in interleaved rounds (fair on a box others share).

    meters: the CPU meter of each server, by port (a scenario's app CPU is its own server's).
    """
    for _, make, expected, server in scenarios:
        drive(server.port, make, expected, args.connections, WARMUP_SECONDS, args.max_requests)
    for _ in range(ROUNDS):
        for result, make, expected, server in scenarios:
            cap = max(1, args.max_requests // ROUNDS // result.per_request)
            meter = meters[server.port]
            before = meter.snapshot()
            requests, elapsed, errors, latencies, failures = drive(
                server.port, make, expected, args.connections, args.seconds / ROUNDS, cap
            )
            for part, seconds in CpuMeter.spent(before, meter.snapshot()).items():
                result.cpu[part] += seconds
            result.requests += requests
            result.seconds += elapsed
            result.errors += errors
            result.latencies_ms += latencies
            for failure in failures:
                print(f"  {result.name}: {failure}", file=sys.stderr)


def ratio_bound(trivial: Result, single: Result) -> float:
    """The ratio if the app spent on an ingest only what it spends on a ping.

    Every part runs on the same CPUs, so requests/s go as 1 / (CPU per request, all parts summed):
    the ceiling costs app + generator; an ingest with a free app would still cost PostgreSQL's and
    the generator's share of it.
    """
    ping_cost = trivial.cpu_ms("app") + trivial.cpu_ms("postgres") + trivial.cpu_ms("generator")
    ingest_cost = trivial.cpu_ms("app") + single.cpu_ms("postgres") + single.cpu_ms("generator")
    return ping_cost / ingest_cost if ingest_cost else 0.0


def report(results: list[Result], args, rows: tuple[int, int]) -> None:
    """Print the table and the final JSON line."""
    trivial, baseline, single, many = results
    print(
        f"\nIngest benchmark: gunicorn gthread {args.workers} workers x {args.threads} threads "
        f"(DB_POOL_SIZE={args.threads}), {args.connections} "
        f"connections, {ROUNDS} interleaved rounds; {os.cpu_count()} CPUs shared by the server, PostgreSQL, "
        f"Redis and this load generator"
    )
    print(
        f"{'scenario':<24} {'requests':>8} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6} "
        f"{'notif/s':>8}   CPU ms per request: app / PostgreSQL / generator"
    )
    for r in results:
        notifications = f"{r.rps * r.per_request:>8.0f}" if r not in (trivial, baseline) else f"{'-':>8}"
        print(
            f"{r.name:<24} {r.requests:>8} {r.rps:>7.0f} {r.percentile(50):>7.1f} {r.percentile(99):>7.1f} "
            f"{r.errors:>6} {notifications}   {r.cpu_ms('app'):.2f} / {r.cpu_ms('postgres'):.2f} / "
            f"{r.cpu_ms('generator'):.2f}"
        )
    ratio = single.rps / baseline.rps if baseline.rps else 0.0
    trivial_ratio = single.rps / trivial.rps if trivial.rps else 0.0
    bound = ratio_bound(trivial, single)
    print(
        f"ingest ratio (c)/(b): {ratio:.2f} (target >= 0.6; quotas {'on' if args.quota else 'off'}); rows written: "
        f"{rows[0]} notifications, "
        f"{rows[1]} deliveries (warm-up and baseline included)"
    )
    print(
        f"against the trivial GET (c)/(a): {trivial_ratio:.2f}; its bound on this machine: {bound:.2f} -- what it "
        f"would be if an ingest cost the app no more CPU than a ping (PostgreSQL's and the generator's share alone)"
    )
    print(
        json.dumps(
            {
                "trivial_rps": round(trivial.rps, 1),
                "trivial_p50_ms": round(trivial.percentile(50), 2),
                "trivial_p99_ms": round(trivial.percentile(99), 2),
                "baseline_rps": round(baseline.rps, 1),
                "baseline_p50_ms": round(baseline.percentile(50), 2),
                "baseline_p99_ms": round(baseline.percentile(99), 2),
                "ingest_rps": round(single.rps, 1),
                "ingest_ratio": round(ratio, 3),
                "trivial_ratio": round(trivial_ratio, 3),
                "trivial_ratio_bound": round(bound, 3),
                "ingest_p50_ms": round(single.percentile(50), 2),
                "ingest_p99_ms": round(single.percentile(99), 2),
                "bulk_rps": round(many.rps, 1),
                "bulk_notifications_per_s": round(many.rps * BULK, 1),
                "bulk_p50_ms": round(many.percentile(50), 2),
                "bulk_p99_ms": round(many.percentile(99), 2),
                "app_cpu_ms": {r.name: round(r.cpu_ms("app"), 3) for r in results},
                "postgres_cpu_ms": {r.name: round(r.cpu_ms("postgres"), 3) for r in results},
                "errors": sum(r.errors for r in results),
                "connections": args.connections,
                "workers": args.workers,
                "threads": args.threads,
                "quota": args.quota,
            }
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--no-quota", dest="quota", action="store_false", help="give the bench key no quotas (on by default)"
    )
    parser.add_argument("--seconds", type=float, default=9.0, help="measured time per scenario (over all rounds)")
    parser.add_argument("--connections", type=int, default=16, help="concurrent keep-alive connections")
    parser.add_argument("--max-requests", type=int, default=60_000, help="request cap per scenario")
    parser.add_argument("--workers", type=int, default=WORKERS, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=THREADS, help="gunicorn threads per worker")
    parser.add_argument("--database", default=BENCH_DB, help="scratch database (dropped and recreated; _bench in it)")
    parser.add_argument("--redis-db", type=int, default=BENCH_REDIS_DB, help="Redis database (flushed)")
    args = parser.parse_args(argv)
    db_url, redis_url = bench_urls(args.database, args.redis_db)
    key = _prepare(db_url, redis_url, args.quota)
    with tempfile.TemporaryDirectory(prefix="hato-bench-ingest-") as tmp, ExitStack() as stack:
        servers = []
        for name, target, ready in (("app", APP_TARGET, "/v1/ping"), ("baseline", BASELINE_TARGET, "/")):
            log = Path(tmp) / f"gunicorn-{name}.log"
            servers.append(Server(db_url, redis_url, log, args.workers, args.threads, target, ready))
            stack.callback(servers[-1].stop)
        meters = {server.port: CpuMeter(server.proc.pid, db_url) for server in servers}
        for meter in meters.values():
            stack.callback(meter.close)
        scenarios = _scenarios(key, uuid.uuid4().hex[:8], *servers)
        run(meters, scenarios, args)
    rows = _count_rows(db_url)
    drop_database(db_url)
    from redis import Redis

    Redis.from_url(redis_url).flushdb()
    report([result for result, _, _, _ in scenarios], args, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
