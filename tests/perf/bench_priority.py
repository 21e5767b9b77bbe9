"""Interactive e-mail latency while a large campaign sends, against the same interactive load alone.

    python -m tests.perf.bench_priority [--recipients 200000] [--seconds 30] [--workers 2]
                                        [--time-limit 3600] [--threshold S]

The real stack on 127.0.0.1, against its own scratch database `hato_bench_priority` and Redis DB 14
(on the servers of DATABASE_URL / REDIS_URL): one gunicorn web process (the production config,
API-only: gthread, 2 workers x 8 threads), --workers RQ workers (`flask worker`, the same count in
every phase), the sweeper and the recording SMTP sink (tests/support/smtp.py, its own process,
stamping each message on receipt). Production settings, except the API rate limit (lifted) and
database pools of 8 (+4) per process so the run fits a shared server's connections.

Set up: --recipients users, a `high`-priority type with e-mail on (the interactive traffic: a sign-in
code, say) and a campaign type with e-mail on, a draft campaign to every user.
Phases:
  burst     closed-loop POST /v1/notifications (high type, one recipient each) from --connections
            connections for --burst-seconds: the stack's maximum interactive rate; then its e-mails
            are sent before going on
  idle      open-loop at a quarter of that rate for --seconds, nothing else running; once before the
            campaign and once after it (the machine may be shared: both windows are pooled)
  campaign  the campaign is sent (fanout to every user, one e-mail each, on `low`), and the same
            open-loop load runs beside it in --seconds chunks until every campaign e-mail has reached
            the sink, or --time-limit seconds have passed
Latency runs from the 202 to the message's arrival at the sink (time.time in both processes). The
table also shows where the time goes: "queue" is the 202 to the worker starting the SMTP send, "smtp"
the send itself as the ledger recorded it. While the campaign runs, a sampler reads the high queue's
lag and the backpressure state (app/backpressure.py) twice a second. --threshold sets
BACKPRESSURE_HIGH_LAG_SECONDS for every process (0: backpressure off), for an A/B in two runs.
Target: campaign mail p99 <= 2x idle mail p99, and the campaign finishes.
Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
import sqlalchemy as sa

from tests.perf import bench_e2e as e2e
from tests.perf.bench_e2e import email_deliveries, first_attempts, mail_arrivals, stats
from tests.perf.bench_realtime import percentile
from tests.support import processes
from tests.support.databases import bench_database
from tests.support.ingest_load import LoadResult, drive_in_process
from tests.support.load import insert_users
from tests.support.waiting import free_port

DB_NAME = "hato_bench_priority"
REDIS_DB = 14
INTERACTIVE_TYPE = "signin"
CAMPAIGN_TYPE = "promo"
INTERACTIVE_USERS = 1000  # the interactive load's recipients (the campaign reaches them too)
BURST_MAX_REQUESTS = 20_000
DRAIN_STALL_SECONDS = 30.0  # waiting for e-mails gives up once none has arrived for this long
DRAIN_CAP_SECONDS = 300.0
SAMPLE_SECONDS = 0.5
PROGRESS_SECONDS = 2.0
FIRST_SEQ = {"burst": 10_000_000, "idle": 20_000_000, "after": 25_000_000, "camp": 30_000_000}


@dataclass
class Stack:
    """The processes of one run: sink, web, workers, sweeper; stop() ends all of them."""

    env: dict
    workdir: Path
    workers: int

    def start(self) -> Stack:
        from tests.realtime.helpers import Gunicorn

        self.sink_log = self.workdir / "sink.log"
        self.sink_port = free_port()
        self.procs = {"sink": processes.start_sink(self.sink_port, self.sink_log, self.workdir / "sink.out", True)}
        self.env["SMTP_URL"] = f"smtp://127.0.0.1:{self.sink_port}"
        self.web = Gunicorn(
            free_port(),
            sockets=0,
            env={**self.env, "WEB_WORKERS": "2", "WEB_REQUEST_THREADS": "8"},
            log_path=self.workdir / "web.log",
        )
        self.web.start(timeout=60)
        for name, command in [(f"worker-{n}", "worker") for n in range(self.workers)] + [("sweeper", "sweep")]:
            self.procs[name] = processes.spawn(processes.flask_args(command), self.env, self.workdir / f"{name}.log")
        return self

    def check(self) -> None:
        """Raise if a process of the stack has exited."""
        for name, proc in [*self.procs.items(), ("web", self.web.proc)]:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; logs in {self.workdir}")

    def stop(self) -> None:
        """Stop every process started so far (SIGTERM to its group, then SIGKILL)."""
        if getattr(self, "web", None) is not None:
            self.web.stop(timeout=10)
        for proc in getattr(self, "procs", {}).values():
            processes.stop(proc)


def stack_env(db_url: str, redis_url: str, threshold: float | None) -> dict:
    """bench_e2e's environment (production settings on our database, Redis DB and sink), with --threshold."""
    env = e2e.stack_env(db_url, redis_url)
    if threshold is not None:
        env["BACKPRESSURE_HIGH_LAG_SECONDS"] = f"{threshold:g}"
    return env


def prepare(env: dict, recipients: int):
    """Migrate; add the two types, the users, an API key and the draft campaign. Returns (app, recipients, key, id)."""
    os.environ.update(env)
    from flask_migrate import upgrade

    from app import create_app
    from app.api_keys.service import create_api_key
    from app.campaigns.service import create_campaign
    from app.extensions import db, redis

    app = create_app()
    with app.app_context():
        upgrade()
        redis.client().flushdb()  # our own Redis DB only
        db.session.execute(
            sa.text(
                "INSERT INTO notification_types (type, label, default_in_app, default_email, default_push, priority) "
                "VALUES (:signin, 'Sign-in code', true, true, false, 'high'), "
                "(:promo, 'Offers', true, true, false, 'low')"
            ),
            {"signin": INTERACTIVE_TYPE, "promo": CAMPAIGN_TYPE},
        )
        users = insert_users(recipients, "bp")
        key = create_api_key(None, "bench_priority")
        campaign = create_campaign(
            None, name="Spring sale", type_=CAMPAIGN_TYPE, title="Spring sale", body="Everything 20 % off this week."
        )
        db.session.commit()
        db.session.execute(sa.text("ANALYZE"))
        db.session.commit()
        campaign_id = campaign.id
        db.session.remove()
        db.engine.dispose()
    return app, list(users.values())[:INTERACTIVE_USERS], key, campaign_id


class Sampler(threading.Thread):
    """Reads the backpressure state every SAMPLE_SECONDS while the campaign runs (the dashboard's reading)."""

    def __init__(self, app) -> None:
        super().__init__(daemon=True)
        self.app = app
        self.halt = threading.Event()
        self.samples: list[tuple[float, float, bool, int]] = []  # (wall time, high lag, held, holds so far)

    def run(self) -> None:
        from app.backpressure import status

        with self.app.app_context():
            while not self.halt.wait(SAMPLE_SECONDS):
                pressure = status()
                self.samples.append((time.time(), pressure.lag, pressure.held, pressure.activations))

    def held_seconds(self) -> float:
        """Time the samples saw low work held (each sample stands for the interval before it)."""
        pairs = zip(self.samples, self.samples[1:], strict=False)
        return sum(b[0] - a[0] for a, b in pairs if b[2])

    def summary(self) -> dict:
        lags = [lag for _, lag, _, _ in self.samples]
        return {
            "held_s": round(self.held_seconds(), 1),
            "activations": self.samples[-1][3] if self.samples else 0,
            "high_lag_p99_s": round(percentile(lags, 99), 3) if lags else 0.0,
            "high_lag_max_s": round(max(lags, default=0.0), 3),
        }


class SinkCounter:
    """Counts the sink's log lines incrementally (no parsing): how many messages have arrived."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.lines = path, 0, 0

    def count(self) -> int:
        try:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                chunk = log.read()
        except FileNotFoundError:
            return 0
        self.offset += len(chunk)
        self.lines += chunk.count(b"\n")
        return self.lines


def campaign_status(db_url: str, campaign_id: int) -> str:
    """The campaign's status (running until its fanout is done), by primary key: nothing here loads the stack."""
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT status FROM campaigns WHERE id = %s", (campaign_id,)).fetchone()[0]


def analyze(db_url: str) -> None:
    """Fresh planner statistics for the read-back queries (the tables grew by hundreds of thousands of rows)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("ANALYZE notifications, notification_deliveries, delivery_attempts")


def campaign_figures(db_url: str, campaign_id: int) -> dict:
    """How the campaign ended: status, e-mails sent / not sent, seconds from its start to its last send."""
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT c.status, count(*) FILTER (WHERE d.status = 'sent'), "
            "count(*) FILTER (WHERE d.status <> 'sent'), "
            "extract(epoch FROM max(d.sent_at) - c.started_at), extract(epoch FROM c.finished_at - c.started_at) "
            "FROM campaigns c LEFT JOIN notifications n ON n.campaign_id = c.id "
            "LEFT JOIN notification_deliveries d ON d.notification_id = n.id AND d.channel = 'email' "
            "WHERE c.id = %s GROUP BY c.id",
            (campaign_id,),
        ).fetchone()
    status, sent, unsent, send_s, fanout_s = row
    return {"status": status, "sent": sent, "unsent": unsent, "send_s": float(send_s or 0),
            "fanout_s": float(fanout_s or 0)}  # fmt: skip


async def wait_for_mails(stack: Stack, sink: SinkCounter, expected: int) -> float:
    """Wait until the sink has `expected` messages or none came for DRAIN_STALL_SECONDS; return the wait."""
    started = progress = time.perf_counter()
    last = -1
    while (arrived := sink.count()) < expected:
        stack.check()
        now = time.perf_counter()
        if arrived > last:
            last, progress = arrived, now
        if now - progress > DRAIN_STALL_SECONDS or now - started > DRAIN_CAP_SECONDS:
            break
        await asyncio.sleep(0.25)
    return time.perf_counter() - started


def latencies(db_url: str, sink_log: Path, load: LoadResult) -> dict:
    """202 → sink arrival, 202 → send start and the SMTP send, per accepted request; with the lost count."""
    accepted = load.accepted
    by_notification = {a.notification_id: seq for seq, a in accepted.items()}
    by_delivery = {d: by_notification[n] for d, n in email_deliveries(db_url, list(by_notification)).items()}
    mails, duplicates = mail_arrivals(sink_log, by_delivery)
    attempts = first_attempts(db_url, list(by_notification))
    n = len(accepted)
    mail_ms = [(mails[s] - a.at_wall) * 1000 for s, a in accepted.items() if s in mails]
    queue_ms = [(attempts[a.notification_id][0] - a.at_wall) * 1000 for a in accepted.values()
                if a.notification_id in attempts]  # fmt: skip
    smtp_ms = [float(attempts[a.notification_id][1]) for a in accepted.values() if a.notification_id in attempts]
    rows = [(a.at_wall, (mails[s] - a.at_wall) * 1000 if s in mails else None,
             (attempts[a.notification_id][0] - a.at_wall) * 1000 if a.notification_id in attempts else None)
            for s, a in sorted(accepted.items())]  # fmt: skip
    return {
        "rows": rows,
        "mail": stats(mail_ms, n),
        "queue": stats(queue_ms, n),
        "smtp": stats(smtp_ms, n),
        "duplicates": duplicates,
        "ingest_p99_ms": percentile([a.latency_ms for a in accepted.values()], 99),
    }


def merge(results: list[LoadResult]) -> LoadResult:
    """One LoadResult out of the campaign phase's chunks."""
    merged = LoadResult()
    for result in results:
        merged.accepted.update(result.accepted)
        merged.errors += result.errors
        merged.failures.extend(result.failures[: 5 - len(merged.failures)])
        merged.seconds += result.seconds
    return merged


async def measure(stack: Stack, app, recipients: list[str], key: str, campaign_id: int, db_url: str, args) -> dict:
    """Run the burst, the idle phase and the campaign phase; return the figures."""
    from app.campaigns.service import send_campaign
    from app.extensions import db

    sink = SinkCounter(stack.sink_log)
    common = dict(ports=[stack.web.port], key=key, type_=INTERACTIVE_TYPE, recipients=recipients,
                  connections=args.connections)  # fmt: skip
    burst = await drive_in_process(
        args.burst_seconds + 120, **common, prefix="burst", seconds=args.burst_seconds,
        max_requests=BURST_MAX_REQUESTS, first_seq=FIRST_SEQ["burst"],
    )  # fmt: skip
    if not burst.accepted:
        raise RuntimeError(f"the burst had no accepted request: {burst.failures}")
    await e2e.wait_for_backlog(stack, db_url, DRAIN_STALL_SECONDS)  # the burst's e-mails, before going on
    rate = args.rate or burst.rps / 4
    chunk = dict(common, rate=rate, seconds=args.seconds, max_requests=int(rate * args.seconds) + 1)

    load_before = os.getloadavg()[0]
    idle = await drive_in_process(args.seconds + 150, **chunk, prefix="idle", first_seq=FIRST_SEQ["idle"])
    await wait_for_mails(stack, sink, len(burst.accepted) + len(idle.accepted))

    sampler = Sampler(app)
    with app.app_context():
        send_campaign(None, campaign_id)
        db.session.commit()  # the fanout job is enqueued after this commit
        db.session.remove()
    started = time.perf_counter()
    sampler.start()
    chunks: list[LoadResult] = []
    before = len(burst.accepted) + len(idle.accepted)
    try:
        while time.perf_counter() - started < args.time_limit:
            seq = FIRST_SEQ["camp"] + sum(len(c.accepted) + c.errors for c in chunks) + len(chunks)
            left = args.time_limit - (time.perf_counter() - started)
            seconds = max(min(args.seconds, left), 1.0)
            part = dict(chunk, seconds=seconds, max_requests=int(rate * seconds) + 1)
            chunks.append(await drive_in_process(seconds + 150, **part, prefix="camp", first_seq=seq))
            stack.check()
            # Progress from the sink's log, not the ledger: a count over the ledger would load the stack it measures.
            expected = before + sum(len(c.accepted) for c in chunks) + args.recipients
            arrived, status = sink.count(), campaign_status(db_url, campaign_id)
            print(f"  campaign {status}, {max(expected - arrived, 0)} e-mails still to arrive, "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr)  # fmt: skip
            if status == "done" and arrived >= expected:
                break
    finally:
        sampler.halt.set()
        sampler.join(2)
    campaign_s = time.perf_counter() - started
    during = merge(chunks)
    sent_so_far = len(burst.accepted) + len(idle.accepted) + len(during.accepted) + args.recipients
    await wait_for_mails(stack, sink, sent_so_far)
    after = await drive_in_process(args.seconds + 150, **chunk, prefix="idle", first_seq=FIRST_SEQ["after"])
    await wait_for_mails(stack, sink, sent_so_far + len(after.accepted))
    idle_both = merge([idle, after])
    analyze(db_url)  # the load is over: what follows only reads the results back
    figures = campaign_figures(db_url, campaign_id)
    return {
        "burst": burst,
        "rate": rate,
        "idle": idle_both,
        "campaign": during,
        "idle_before_p99_ms": latencies(db_url, stack.sink_log, idle)["mail"]["p99_ms"],
        "idle_after_p99_ms": latencies(db_url, stack.sink_log, after)["mail"]["p99_ms"],
        "idle_latency": latencies(db_url, stack.sink_log, idle_both),
        "campaign_latency": latencies(db_url, stack.sink_log, during),
        # Finished: fanned out, and every e-mail sent within the time limit.
        "finished": figures["status"] == "done" and figures["unsent"] == 0 and figures["send_s"] <= args.time_limit,
        "campaign_s": campaign_s,
        "campaign_db": figures,
        "backpressure": sampler.summary(),
        "samples": sampler.samples,
        "load_avg": load_before,
    }


async def measure_until_stopped(*measure_args) -> dict:
    """measure(), cancelled by Ctrl-C or SIGTERM so that its finally blocks stop the load generator."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, task.cancel)
    return await measure(*measure_args)


def report(result: dict, args) -> dict:
    """Print the table; return the JSON figures."""
    idle, during = result["idle_latency"], result["campaign_latency"]
    camp, bp = result["campaign_db"], result["backpressure"]
    threshold = args.threshold if args.threshold is not None else "default"
    print(
        f"\npriority under a campaign: 1 web process (gunicorn gthread 2x8), {args.workers} RQ workers, the sweeper, "
        f"the SMTP sink; {os.cpu_count()} CPUs, load average {result['load_avg']:.2f} before the idle phase; "
        f"BACKPRESSURE_HIGH_LAG_SECONDS {threshold}"
    )
    print(f"burst (closed, {args.connections} conn): {len(result['burst'].accepted)} requests, "
          f"{result['burst'].rps:.1f} req/s; paced at a quarter: {result['rate']:.1f} req/s")  # fmt: skip
    print(
        f"\n{'phase':<10} {'requests':>8} {'req/s':>6} {'errors':>6} {'mail p50':>9} {'p90':>7} {'p99':>7} {'max':>8} "
        f"{'lost':>5} {'queue p99':>10} {'smtp p99':>9}"
    )
    for name, load, row in (("idle", result["idle"], idle), ("campaign", result["campaign"], during)):
        mail = row["mail"]
        print(
            f"{name:<10} {len(load.accepted):>8} {load.rps:>6.1f} {load.errors:>6} {mail['p50_ms']:>9.1f} "
            f"{mail['p90_ms']:>7.1f} {mail['p99_ms']:>7.1f} {mail['max_ms']:>8.1f} {mail['lost']:>5} "
            f"{row['queue']['p99_ms']:>10.1f} {row['smtp']['p99_ms']:>9.1f}"
        )
        for failure in load.failures:
            print(f"  {failure}", file=sys.stderr)
    print(f"idle p99 before the campaign {result['idle_before_p99_ms']:.1f} ms, after it "
          f"{result['idle_after_p99_ms']:.1f} ms (pooled above)")  # fmt: skip
    ratio = during["mail"]["p99_ms"] / idle["mail"]["p99_ms"] if idle["mail"]["p99_ms"] else float("nan")
    rate = camp["sent"] / camp["send_s"] if camp["send_s"] else 0.0
    print(
        f"\ncampaign to {args.recipients:,} users: {camp['status']}, fanout {camp['fanout_s']:.1f} s, "
        f"{camp['sent']:,} e-mails sent ({camp['unsent']:,} not) in {camp['send_s']:.1f} s ({rate:.0f}/s); "
        f"finished within the time limit ({args.time_limit:g} s): {result['finished']}"
    )
    print(
        f"backpressure: low work held {bp['held_s']:.1f} s of {result['campaign_s']:.1f} s "
        f"({bp['activations']} holds); high queue lag p99 {bp['high_lag_p99_s']:.3f} s, "
        f"max {bp['high_lag_max_s']:.3f} s"
    )
    print(f"mail p99 campaign / idle = {ratio:.2f} (target <= 2, and the campaign finishes)")
    return {
        "idle_mail_p99_ms": round(idle["mail"]["p99_ms"], 1),
        "campaign_mail_p99_ms": round(during["mail"]["p99_ms"], 1),
        "ratio": round(ratio, 2),
        "campaign_finished": result["finished"],
        "idle_mail_p50_ms": round(idle["mail"]["p50_ms"], 1),
        "campaign_mail_p50_ms": round(during["mail"]["p50_ms"], 1),
        "idle_queue_p99_ms": round(idle["queue"]["p99_ms"], 1),
        "idle_before_p99_ms": round(result["idle_before_p99_ms"], 1),
        "idle_after_p99_ms": round(result["idle_after_p99_ms"], 1),
        "campaign_queue_p99_ms": round(during["queue"]["p99_ms"], 1),
        "idle_events": len(result["idle"].accepted),
        "campaign_events": len(result["campaign"].accepted),
        "lost": idle["mail"]["lost"] + during["mail"]["lost"],
        "duplicates": idle["duplicates"] + during["duplicates"],
        "api_errors": result["idle"].errors + result["campaign"].errors,
        "max_rps": round(result["burst"].rps, 1),
        "rate": round(result["rate"], 1),
        "recipients": args.recipients,
        "campaign_sent": camp["sent"],
        "campaign_fanout_s": round(camp["fanout_s"], 1),
        "campaign_send_s": round(camp["send_s"], 1),
        "campaign_emails_per_s": round(rate, 1),
        "backpressure_held_s": bp["held_s"],
        "backpressure_holds": bp["activations"],
        "high_lag_max_s": bp["high_lag_max_s"],
        "threshold_s": args.threshold,
        "workers": args.workers,
        "load_avg_1m": round(result["load_avg"], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipients", type=int, default=200_000, help="campaign audience (users)")
    parser.add_argument("--seconds", type=float, default=30.0, help="each idle phase, each chunk of load")
    parser.add_argument("--burst-seconds", type=float, default=10.0, help="closed-loop burst (the maximum)")
    parser.add_argument("--connections", type=int, default=16, help="load generator connections (threads)")
    parser.add_argument("--rate", type=float, default=0.0, help="paced requests/s (default: a quarter of the burst's)")
    parser.add_argument("--workers", type=int, default=2, help="RQ worker processes, in every phase")
    parser.add_argument("--time-limit", type=float, default=3600.0, help="longest campaign phase, seconds")
    parser.add_argument("--threshold", type=float, help="BACKPRESSURE_HIGH_LAG_SECONDS (default: the app's; 0: off)")
    parser.add_argument("--dump", type=Path, help="write every interactive request's latencies and the samples here")
    args = parser.parse_args(argv)
    if args.recipients < INTERACTIVE_USERS or min(args.workers, args.connections) < 1:
        parser.error(f"--recipients must be at least {INTERACTIVE_USERS}; --workers and --connections positive")
    if min(args.seconds, args.burst_seconds, args.time_limit) <= 0:
        parser.error("--seconds, --burst-seconds and --time-limit must be positive")
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with bench_database(DB_NAME, REDIS_DB) as db_url, tempfile.TemporaryDirectory(prefix="hato-bench-prio-") as tmp:
        from redis import Redis

        env = stack_env(db_url, os.environ["REDIS_URL"], args.threshold)
        app, recipients, key, campaign_id = prepare(env, args.recipients)
        stack = Stack(env, Path(tmp), args.workers)
        try:
            stack.start()
            result = asyncio.run(measure_until_stopped(stack, app, recipients, key, campaign_id, db_url, args))
        except (KeyboardInterrupt, asyncio.CancelledError):
            print("bench_priority: interrupted; stopping every process", file=sys.stderr)
            return 130
        except BaseException:
            print(f"bench_priority: failed; process logs: {tmp}", file=sys.stderr)
            for log in sorted(Path(tmp).glob("*.log")):
                tail = log.read_text(errors="replace").splitlines()[-5:]
                print(f"--- {log.name}\n" + "\n".join(tail), file=sys.stderr)
            raise
        finally:
            stack.stop()
            Redis.from_url(os.environ["REDIS_URL"]).flushdb()  # our own Redis DB only
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as out:
            for phase in ("idle", "campaign"):
                for at, mail, queue in result[f"{phase}_latency"]["rows"]:
                    out.write(json.dumps({"phase": phase, "at": at, "mail_ms": mail, "queue_ms": queue}) + "\n")
            for at, lag, held, holds in result["samples"]:
                out.write(json.dumps({"phase": "sample", "at": at, "lag": lag, "held": held, "holds": holds}) + "\n")
    print(json.dumps(report(result, args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
