"""End-to-end latency: from each POST /v1/notifications 202 to the recipient's badge frame and to the e-mail.

    python -m tests.perf.bench_e2e [--seconds 60] [--sockets 1000] [--rate R] [--burst-seconds 10] [--workers 1]

The real stack on 127.0.0.1, against its own scratch database `hato_h_e2e_bench` and Redis DB 7 (on the
servers of DATABASE_URL / REDIS_URL; BENCH_E2E_DB / BENCH_E2E_REDIS_DB choose others): two web
processes (gunicorn with the production config app.realtime.gunicorn_conf, one gthread worker each,
on two ports), one RQ worker (`flask worker`; --workers for more), the sweeper (`flask sweep`) and
the recording SMTP sink (tests/support/smtp.py, in its own process, stamping each message on
receipt). Production settings throughout, except the API rate limit, which is lifted, and database
pools of 8 (+4 overflow) per process so that the run fits a shared server's max_connections.

Phases: set up (users, signed session cookies, an API key); open --sockets signed-in websockets,
half on each web process; "burst": closed-loop ingest from --connections keep-alive connections for
--burst-seconds, which measures the stack's maximum ingest rate, then wait (bounded) until the worker
has sent the burst's e-mails; "paced": open-loop ingest at half that maximum (or --rate) for
--seconds, over both web processes, each request for one recipient with an open socket (in turn, so
no user gets two events within the badge's coalescing window); then wait for the last frames and
e-mails until none has arrived for --drain-seconds (300 s at most). A notification with no badge
frame or no e-mail by then is lost; a late one counts in the latencies.

Latencies run from the 202 (time.perf_counter for frames, time.time for e-mails: same machine).
Besides the two targets the table shows where the time goes: "badge floor" is the 202 to the badge
event reaching a bare Redis subscriber in this process, "web part of badge" what the web processes add (each
event's frame arrival minus its floor arrival);
"mail queue" is the 202 to the worker starting the SMTP send (after commit enqueue, RQ pick-up,
claim, preference re-check, render), "mail smtp" the send itself as the ledger recorded it; a CPU
line gives each process's CPU seconds over the paced phase and their share of the machine (against the
wall time: a process that used little CPU yet was slow was waiting on another; measured, the badge's
tail is CPU contention: its web part grows with the share of the two cores in use, p99 11 ms at a
quarter of the maximum rate, 32-42 ms at half). --profile-worker FILE runs the worker under
cProfile and prints the top of its profile.
Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import resource
import secrets
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
import sqlalchemy as sa

from tests.perf.bench_realtime import Clients, RedisFloor, percentile, raise_fd_limit
from tests.support import processes
from tests.support.databases import bench_database
from tests.support.ingest_load import drive_in_process
from tests.support.load import insert_users
from tests.support.smtp import stamped_arrivals
from tests.support.waiting import free_port

DB_NAME = os.environ.get("BENCH_E2E_DB", "hato_h_e2e_bench")
REDIS_DB = int(os.environ.get("BENCH_E2E_REDIS_DB", "7"))
TYPE = "e2e"
PACED_PREFIX = "bench"  # bench_realtime's Clients and RedisFloor pick `bench-<seq>` out of frames
BURST_PREFIX = "burst"
BURST_FIRST_SEQ = 10_000_000
BURST_MAX_REQUESTS = 20_000
# Waiting for e-mails ends when nothing new arrived for --drain-seconds (a stall), and in any case after this.
DRAIN_CAP = 300.0
SOCKET_HEADROOM = 64
WEB_DB_POOL, WEB_DB_OVERFLOW = 8, 4  # PostgreSQL connections per process (pooled, and beyond the pool)
PROFILE_LINES = 30
DELIVERY_ID = re.compile(r"<delivery-(\d+)@")


@dataclass
class Stack:
    """The processes of one run: sink, two web processes, worker, sweeper; stop() ends all of them."""

    env: dict
    workdir: Path
    sockets_per_web: int
    workers: int = 1
    profile: Path | None = None  # cProfile output of the first worker

    def start(self) -> Stack:
        from tests.realtime.helpers import Gunicorn

        self.sink_log = self.workdir / "sink.log"
        self.sink_port = free_port()
        self.procs = {
            "sink": processes.start_sink(self.sink_port, self.sink_log, self.workdir / "sink.out", stamp=True)
        }
        self.env["SMTP_URL"] = f"smtp://127.0.0.1:{self.sink_port}"
        self.webs = []
        for name in ("web-a", "web-b"):
            web = Gunicorn(
                free_port(), sockets=self.sockets_per_web, env=self.env, log_path=self.workdir / f"{name}.log"
            )
            self.webs.append(web)
            web.start(timeout=60)
        for name, command in [(f"worker-{n}", "worker") for n in range(self.workers)] + [("sweeper", "sweep")]:
            argv = processes.flask_args(command)
            if name == "worker-0" and self.profile:  # written when the worker exits (warm shutdown on SIGTERM)
                argv = ["-m", "cProfile", "-o", str(self.profile), *argv]
            self.procs[name] = processes.spawn(argv, self.env, self.workdir / f"{name}.log")
        return self

    def pids(self) -> dict[str, list[int]]:
        """The process ids of each role (gunicorn's workers, not its masters)."""
        roles: dict[str, list[int]] = {"web": [pid for web in self.webs for pid in web.worker_pids()]}
        for name, proc in self.procs.items():
            roles.setdefault(name.split("-")[0], []).append(proc.pid)
        return roles

    def check(self) -> None:
        """Raise if a process of the stack has exited."""
        for name, proc in [*self.procs.items(), *((f"web :{w.port}", w.proc) for w in self.webs)]:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; logs in {self.workdir}")

    def stop(self) -> None:
        """Stop every process started so far (SIGTERM to its group, then SIGKILL)."""
        for web in getattr(self, "webs", []):
            web.stop(timeout=10)
        for proc in getattr(self, "procs", {}).values():
            processes.stop(proc)


def stack_env(db_url: str, redis_url: str) -> dict:
    """The environment of every process: production settings on our database, Redis DB and sink."""
    return dict(
        os.environ,
        DATABASE_URL=db_url,
        REDIS_URL=redis_url,
        SECRET_KEY=secrets.token_urlsafe(48),
        API_RATE_LIMIT="100000000 per minute",
        EMAIL_PROVIDER="smtp",
        PYTHONUNBUFFERED="1",
        # Enough for the load generator's connections (half reach each web process) while staying well
        # inside a shared server's max_connections (100 by default) beside other users of it.
        DB_POOL_SIZE=str(WEB_DB_POOL),
        DB_MAX_OVERFLOW=str(WEB_DB_OVERFLOW),
    )


def prepare(env: dict, users: int):
    """Migrate, add an e-mail-by-default type, users and an API key. Returns (app, {user id: external id}, key)."""
    os.environ.update(env)
    from flask_migrate import upgrade

    from app import create_app
    from app.api_keys.service import create_api_key
    from app.extensions import db, redis

    app = create_app()
    with app.app_context():
        upgrade()
        redis.client().flushdb()  # our own Redis DB only
        db.session.execute(
            sa.text(
                "INSERT INTO notification_types (type, label, default_in_app, default_email, default_push, priority) "
                "VALUES (:type, 'End to end', true, true, false, 'default')"
            ),
            {"type": TYPE},
        )
        users_by_id = insert_users(users, "e2e")
        key = create_api_key(None, "bench_e2e")
        db.session.commit()
        db.session.execute(sa.text("ANALYZE"))
        db.session.commit()
        db.session.remove()
        db.engine.dispose()
    return app, users_by_id, key


def cpu_snapshot(pids: dict[str, list[int]], db_url: str) -> dict[str, dict[int, float]]:
    """CPU seconds so far of each role's processes, PostgreSQL's backends and this load generator included."""
    with psycopg.connect(db_url) as conn:
        backends = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    snapshot = {}
    for role, ids in {**pids, "postgres": [row[0] for row in backends]}.items():
        snapshot[role] = {}
        for pid in ids:
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(pid).cpu_times()
                snapshot[role][pid] = times.user + times.system
    # This process and its finished children: the load generator runs in one, the sockets' clients here.
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    snapshot["bench"] = {0: mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime}
    return snapshot


def cpu_spent(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds per role between two snapshots (a process that started in between counts in full)."""
    return {role: sum(t - before.get(role, {}).get(pid, 0.0) for pid, t in now.items()) for role, now in after.items()}


def unsent_emails(db_url: str) -> int:
    """E-mail deliveries not yet sent (pending or leased)."""
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "SELECT count(*) FROM notification_deliveries WHERE channel = 'email' AND status IN ('pending', 'sending')"
        ).fetchone()[0]


def email_deliveries(db_url: str, notification_ids: list[int]) -> dict[int, int]:
    """{delivery id: notification id} of the e-mails of these notifications."""
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT id, notification_id FROM notification_deliveries "
            "WHERE channel = 'email' AND notification_id = ANY(%s)",
            (notification_ids,),
        )
        return dict(rows.fetchall())


def first_attempts(db_url: str, notification_ids: list[int]) -> dict[int, tuple[float, int, str]]:
    """{notification id: (wall time the first send started, its duration ms, outcome)} from the ledger."""
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT DISTINCT ON (d.notification_id) d.notification_id, a.started_at, a.duration_ms, a.outcome "
            "FROM delivery_attempts a JOIN notification_deliveries d ON d.id = a.delivery_id "
            "WHERE d.channel = 'email' AND d.notification_id = ANY(%s) ORDER BY d.notification_id, a.id",
            (notification_ids,),
        ).fetchall()
    return {row[0]: (row[1].timestamp(), row[2], row[3]) for row in rows}


def mail_arrivals(sink_log: Path, seq_by_delivery: dict[int, int]) -> tuple[dict[int, float], int]:
    """({seq: first arrival wall time}, duplicate e-mails) for the deliveries we track."""
    arrivals: dict[int, float] = {}
    duplicates = 0
    for at, message_id in stamped_arrivals(sink_log):
        match = DELIVERY_ID.search(message_id)
        seq = seq_by_delivery.get(int(match.group(1))) if match else None
        if seq is None:
            continue
        if seq in arrivals:
            duplicates += 1
        else:
            arrivals[seq] = at
    return arrivals, duplicates


def stats(values: list[float], expected: int) -> dict:
    """p50/p90/p99/max of values (ms) and how many of `expected` have none."""
    return {
        "events": expected,
        "p50_ms": percentile(values, 50),
        "p90_ms": percentile(values, 90),
        "p99_ms": percentile(values, 99),
        "max_ms": max(values, default=float("nan")),
        "lost": expected - len(values),
    }


async def wait_for_backlog(stack: Stack, db_url: str, stall: float) -> float:
    """Wait until every e-mail so far is sent; return how long it took.

    Raises when the count of unsent e-mails has not dropped for `stall` seconds, or after DRAIN_CAP.
    """
    started = progress = time.perf_counter()
    last = None
    while unsent := unsent_emails(db_url):
        stack.check()
        now = time.perf_counter()
        if last is None or unsent < last:
            last, progress = unsent, now
        if now - progress > stall or now - started > DRAIN_CAP:
            raise RuntimeError(f"the worker stopped sending the burst's e-mails ({unsent} unsent)")
        await asyncio.sleep(0.5)
    return time.perf_counter() - started


async def measure(stack: Stack, app, users: dict[int, str], key: str, db_url: str, args) -> dict:
    """Open the sockets, run the burst and the paced phase, drain; return the figures."""
    from tests.realtime.helpers import session_cookie

    user_ids = list(users)[: args.sockets]
    cookies = {user_id: session_cookie(app, user_id) for user_id in user_ids}
    clients = [Clients(web.base_url, cookies) for web in stack.webs]
    ports = [web.port for web in stack.webs]
    floor = None
    try:
        started = time.perf_counter()
        # Alternate users between the web processes; open both halves at once.
        opened = await asyncio.gather(*(c.open(user_ids[i :: len(clients)]) for i, c in enumerate(clients)))
        connect_s = time.perf_counter() - started
        connected = [users[u] for c in clients for u in c.sockets]
        if not connected:
            raise RuntimeError(f"no socket opened: {[c.errors[:1] for c in clients]}")
        # In turn over a fixed shuffle: a user's events are len(connected) / rate seconds apart.
        order = sorted(connected)
        random.Random(7).shuffle(order)
        common = dict(ports=ports, key=key, type_=TYPE, recipients=order)

        burst_started = time.perf_counter()
        burst = await drive_in_process(
            args.burst_seconds + 120, **common, prefix=BURST_PREFIX, seconds=args.burst_seconds,
            connections=args.connections, max_requests=BURST_MAX_REQUESTS, first_seq=BURST_FIRST_SEQ,
        )  # fmt: skip
        backlog_s = await wait_for_backlog(stack, db_url, args.drain_seconds)
        worker_rate = len(burst.accepted) / (time.perf_counter() - burst_started)
        rate = args.rate or burst.rps / 2
        if rate <= 0:
            raise RuntimeError(f"the burst had no accepted request: {burst.failures}")

        floor = RedisFloor(stack.env["REDIS_URL"], db_url)
        floor.start()
        load_avg = os.getloadavg()[0]
        cpu_before, paced_started = cpu_snapshot(stack.pids(), db_url), time.perf_counter()
        paced = await drive_in_process(
            args.seconds + 150, **common, prefix=PACED_PREFIX, seconds=args.seconds,
            connections=args.connections, max_requests=int(rate * args.seconds) + 1, rate=rate,
        )  # fmt: skip
        accepted = paced.accepted
        seq_by_notification = {a.notification_id: seq for seq, a in accepted.items()}
        seq_by_delivery = {
            delivery: seq_by_notification[n]
            for delivery, n in email_deliveries(db_url, list(seq_by_notification)).items()
        }
        badges: dict[int, float] = {}
        drain_started = progress = time.perf_counter()
        seen = -1
        while True:
            for c in clients:
                badges.update(c.arrivals)
            mails, duplicates = mail_arrivals(stack.sink_log, seq_by_delivery)
            arrived = len(badges.keys() & accepted.keys()) + len(mails)
            now = time.perf_counter()
            if arrived > seen:
                seen, progress = arrived, now
            stalled = now - progress > args.drain_seconds or now - drain_started > DRAIN_CAP
            if arrived == 2 * len(accepted) or stalled:
                break
            stack.check()
            await asyncio.sleep(0.25)
        drain_s = time.perf_counter() - drain_started
        cpu = cpu_spent(cpu_before, cpu_snapshot(stack.pids(), db_url))
        cpu_wall_s = time.perf_counter() - paced_started
        attempts = first_attempts(db_url, list(seq_by_notification))
    finally:
        if floor is not None:
            floor.stop.set()
            floor.join(2)
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)

    n = len(accepted)
    badge_ms = [(badges[s] - a.at_monotonic) * 1000 for s, a in accepted.items() if s in badges]
    floor_ms = [(floor.arrivals[s] - a.at_monotonic) * 1000 for s, a in accepted.items() if s in floor.arrivals]
    # What the web processes add, event by event: the frame's arrival after the bare subscriber's.
    web_ms = [(badges[s] - floor.arrivals[s]) * 1000 for s in accepted if s in badges and s in floor.arrivals]
    mail_ms = [(mails[s] - a.at_wall) * 1000 for s, a in accepted.items() if s in mails]
    queue_ms = [
        (attempts[a.notification_id][0] - a.at_wall) * 1000 for a in accepted.values() if a.notification_id in attempts
    ]
    smtp_ms = [float(attempts[a.notification_id][1]) for a in accepted.values() if a.notification_id in attempts]
    lost = {s for s in accepted if s not in badges} | {s for s in accepted if s not in mails}
    return {
        "sockets": sum(opened),
        "socket_errors": sum(len(c.errors) for c in clients),
        "connect_s": connect_s,
        "burst": burst,
        "backlog_s": backlog_s,
        "worker_rate": worker_rate,
        "paced": paced,
        "rate": rate,
        "drain_s": drain_s,
        "cpu": cpu,
        "cpu_wall_s": cpu_wall_s,
        "mails": len(mails),
        "load_avg": load_avg,
        "rows": {
            "badge (socket frame)": stats(badge_ms, n),
            "badge floor (Redis)": stats(floor_ms, n),
            "web part of badge": stats(web_ms, n),
            "mail (sink receipt)": stats(mail_ms, n),
            "mail queue (to send)": stats(queue_ms, n),
            "mail smtp (ledger)": stats(smtp_ms, n),
        },
        "lost": len(lost),
        "duplicates": duplicates,
        "failed_sends": sum(outcome != "sent" for _, _, outcome in attempts.values()),
    }


async def measure_until_stopped(*measure_args) -> dict:
    """measure(), cancelled by Ctrl-C or SIGTERM so that its finally blocks close the sockets and the load generator."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, task.cancel)
    return await measure(*measure_args)


def busy_share(result: dict) -> float:
    """The share of the machine's CPUs the stack and the load generator used over the paced phase."""
    return sum(result["cpu"].values()) / (result["cpu_wall_s"] * (os.cpu_count() or 1))


def report(result: dict, args) -> dict:
    """Print the table; return the JSON figures."""
    burst, paced, rows = result["burst"], result["paced"], result["rows"]
    print(
        f"\nend to end: 2 web processes (gunicorn gthread, 1 worker each), {args.workers} RQ worker(s), the sweeper, "
        f"the SMTP sink; "
        f"{result['sockets']} sockets open (opened in {result['connect_s']:.1f} s, {result['socket_errors']} errors); "
        f"{os.cpu_count()} CPUs, load average {result['load_avg']:.2f} before the paced phase"
    )
    print(f"{'phase':<22} {'requests':>8} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6}  notes")
    for name, load, note in (
        (f"burst (closed, {args.connections} conn)", burst,
         f"backlog of e-mails sent {result['backlog_s']:.1f} s after it; worker {result['worker_rate']:.0f} e-mails/s"),
        (f"paced (open, {result['rate']:.0f}/s)", paced, f"drain {result['drain_s']:.1f} s"),
    ):  # fmt: skip
        latencies = [a.latency_ms for a in load.accepted.values()]
        print(
            f"{name:<22} {len(load.accepted):>8} {load.rps:>7.1f} {percentile(latencies, 50):>7.1f} "
            f"{percentile(latencies, 99):>7.1f} {load.errors:>6}  {note}"
        )
        for failure in load.failures:
            print(f"  {failure}", file=sys.stderr)
    print(
        f"\n{'from the 202 to':<22} {'events':>6} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'max ms':>8} {'lost':>5}"
    )
    for name, row in rows.items():
        print(
            f"{name:<22} {row['events']:>6} {row['p50_ms']:>7.1f} {row['p90_ms']:>7.1f} {row['p99_ms']:>7.1f} "
            f"{row['max_ms']:>8.1f} {row['lost']:>5}"
        )
    badge, mail = rows["badge (socket frame)"], rows["mail (sink receipt)"]
    cpu = result["cpu"]
    print(
        f"CPU s over the paced phase and drain ({result['cpu_wall_s']:.1f} s wall): "
        + ", ".join(f"{role} {seconds:.1f}" for role, seconds in cpu.items())
        + f" ({busy_share(result):.0%} of the {os.cpu_count()} CPUs)"
        + f"; per request: web {cpu['web'] / max(len(paced.accepted), 1) * 1000:.1f} ms, "
        f"PostgreSQL {cpu['postgres'] / max(len(paced.accepted), 1) * 1000:.1f} ms; "
        f"worker per e-mail {cpu['worker'] / max(result['mails'], 1) * 1000:.1f} ms"
    )
    if result["worker_rate"] < result["rate"]:
        print(
            f"note: the burst's e-mails went out at {result['worker_rate']:.0f}/s, below the paced "
            f"{result['rate']:.0f}/s: the e-mail queue grows for the whole paced phase "
            "(e-mail latency grows with --seconds)"
        )
    print(
        f"lost (no frame or no e-mail once nothing arrived for {args.drain_seconds:g} s): {result['lost']}; "
        f"duplicate e-mails: {result['duplicates']}; failed first sends: {result['failed_sends']}; "
        f"targets: badge p99 <= 100 ms, e-mail p99 <= 1000 ms, 0 lost"
    )
    return {
        "rps": round(paced.rps, 1),
        "badge_p50_ms": round(badge["p50_ms"], 1),
        "badge_p99_ms": round(badge["p99_ms"], 1),
        "mail_p50_ms": round(mail["p50_ms"], 1),
        "mail_p99_ms": round(mail["p99_ms"], 1),
        "lost": result["lost"],
        "max_rps": round(burst.rps, 1),
        "events": len(paced.accepted),
        "seconds": args.seconds,
        "sockets": result["sockets"],
        "badge_lost": badge["lost"],
        "mail_lost": mail["lost"],
        "duplicates": result["duplicates"],
        "api_errors": burst.errors + paced.errors,
        "badge_floor_p99_ms": round(rows["badge floor (Redis)"]["p99_ms"], 1),
        "badge_web_p99_ms": round(rows["web part of badge"]["p99_ms"], 1),
        "mail_queue_p99_ms": round(rows["mail queue (to send)"]["p99_ms"], 1),
        "mail_smtp_p99_ms": round(rows["mail smtp (ledger)"]["p99_ms"], 1),
        "ingest_p99_ms": round(percentile([a.latency_ms for a in paced.accepted.values()], 99), 1),
        "worker_emails_per_s": round(result["worker_rate"], 1),
        "workers": args.workers,
        "worker_cpu_ms_per_email": round(result["cpu"]["worker"] / max(result["mails"], 1) * 1000, 1),
        "web_cpu_ms_per_request": round(result["cpu"]["web"] / max(len(paced.accepted), 1) * 1000, 1),
        "load_avg_1m": round(result["load_avg"], 2),
        "cpu_busy_share": round(busy_share(result), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the paced phase")
    parser.add_argument("--sockets", type=int, default=1000, help="signed-in websockets, half per web process")
    parser.add_argument("--rate", type=float, default=0.0, help="paced requests/s (default: half the burst's rate)")
    parser.add_argument("--burst-seconds", type=float, default=10.0, help="length of the closed-loop burst")
    parser.add_argument("--connections", type=int, default=16, help="load generator connections (threads)")
    parser.add_argument("--workers", type=int, default=1, help="RQ worker processes (the issue's stack has 1)")
    parser.add_argument(
        "--profile-worker", type=Path, help="run the (first) worker under cProfile, write its stats here, print the top"
    )
    parser.add_argument(
        "--drain-seconds",
        type=float,
        default=30.0,
        help="give up waiting for frames and e-mails after this long without one (and after 300 s in all)",
    )
    args = parser.parse_args(argv)
    if min(args.sockets, args.workers) < 1 or args.seconds <= 0 or args.burst_seconds <= 0:
        parser.error("--sockets, --workers, --seconds and --burst-seconds must be positive")
    # SIGTERM ends the set-up like Ctrl-C does (KeyboardInterrupt); the finally blocks stop every process.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    raise_fd_limit()
    with bench_database(DB_NAME, REDIS_DB) as db_url, tempfile.TemporaryDirectory(prefix="hato-bench-e2e-") as tmp:
        from redis import Redis

        env = stack_env(db_url, os.environ["REDIS_URL"])
        app, users, key = prepare(env, args.sockets)
        stack = Stack(env, Path(tmp), args.sockets // 2 + SOCKET_HEADROOM, args.workers, args.profile_worker)
        try:
            stack.start()
            result = asyncio.run(measure_until_stopped(stack, app, users, key, db_url, args))
        except (KeyboardInterrupt, asyncio.CancelledError):
            print("bench_e2e: interrupted; stopping every process", file=sys.stderr)
            return 130
        except BaseException:
            print(f"bench_e2e: failed; process logs: {tmp}", file=sys.stderr)
            for log in sorted(Path(tmp).glob("*.log")):
                tail = log.read_text(errors="replace").splitlines()[-5:]
                print(f"--- {log.name}\n" + "\n".join(tail), file=sys.stderr)
            raise
        finally:
            stack.stop()
            Redis.from_url(os.environ["REDIS_URL"]).flushdb()  # our own Redis DB only
    if args.profile_worker and args.profile_worker.exists():
        import pstats

        print(f"\nworker profile (cProfile, the whole run; {args.profile_worker}):")
        pstats.Stats(str(args.profile_worker)).sort_stats("cumulative").print_stats(PROFILE_LINES)
    print(json.dumps(report(result, args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
