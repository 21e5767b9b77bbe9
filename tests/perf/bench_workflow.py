"""Workflow steps (issue 31): the sweeper's release of due steps against a raw INSERT … SELECT, then delivery.

    python -m tests.perf.bench_workflow [--runs 100000] [--per-call 1000] [--workers 2] [--timeout 900] [--keep]

Uses its own database `hato_bench_workflow` (dropped, created and migrated here, dropped again at the end
unless --keep) on the server of DATABASE_URL, and Redis database 8 on the server of REDIS_URL (flushed).
A type `wf-bench` runs the workflow published through app.workflows.service (save_draft, publish):

    in_app → delay 1 s → email only_if unread

  ingest   RUNS notifications through the real ingest, app.notify.service.notify(), --per-call recipients a
           call (one statement each, as the API's many-recipient requests; untimed). Each ledger e-mail row
           gets its step, next_attempt_at = accepted + 1 s and escalation 'read'.
  read     right after each call commits, every 5th of its notifications (20 %) is read with the inbox's own
           statement (app.inbox.service.MARK_READ_SQL, one executemany per call): inside the 1 s delay, so its
           e-mail row is skipped with reason 'read' (the table says how many reads landed inside the delay).
  (a) raw  one INSERT … SELECT of the due ledger rows (pending, next_attempt_at passed: the same rows the
           release takes) into wf_due_scratch, a table LIKE notification_deliveries with its defaults and
           indexes (no foreign keys: stamping a row checks none either): writing the same rows, full width, with
           the same indexes, in one statement; committed. Run before and after (b); the faster counts. For the
           table only, one in-place UPDATE of the same ledger rows (values unchanged) is timed too.
  (info) serial  once every step is due: app.delivery.due.take_due() with the sweeper's parameters
           (SWEEP_REQUEUE_AFTER_SECONDS, SWEEP_LIMIT, idle_queues()), committed with app.unitofwork.commit(),
           pass after pass, each waiting for its jobs' hand-off to Redis before the next, in the bench's own
           loop, so the statement and commit are timed apart from the hand-off. The table
           says how many stamps were HOT (pg_stat_xact_user_tables, read before and after each take_due,
           untimed). Then the rows are put back as they were (due, untouched since) and Redis is emptied.
  (b) release  the same rows taken by the sweeper's own drain, app.sweeper.take_due_backlog(): pass after
           pass within one sweep, each committed and its jobs handed to Redis; timed whole, until the pass that
           finds fewer than SWEEP_LIMIT. No worker runs
           meanwhile, so the rows taken stay pending, as in a burst the workers cannot keep up with. Each
           pass walks on from where the last one ended (app.delivery.due.DueCursor).
  deliver  --workers real `flask --app wsgi worker` processes send the released e-mails to an aiosmtpd sink in
           its own process (tests/support/smtp.py) on 127.0.0.1; counted by Message-ID (one per ledger row, and
           one e-mail row per notification): every unread notification's e-mail exactly once, none for a read one,
           whose rows end skipped with reason 'read'.

Everything waits at most --timeout seconds; a stall ends the run with what it has, and a non-zero exit.
Prints a table, then one JSON line: runs, steps_per_s, raw_rows_per_s, ratio (= steps_per_s / raw_rows_per_s;
target >= 0.5), emails (received), duplicates, read_skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

from tests.support.databases import bench_urls, drop_database, fresh_bench_database, run_outside_transaction

BENCH_DB = "hato_bench_workflow"
BENCH_REDIS_DB = 8
TYPE = "wf-bench"
DELAY_SECONDS = 1
READ_EVERY = 5  # every 5th notification is read: 20 %
WORKFLOW = {
    "steps": [
        {"kind": "channel", "channel": "in_app"},
        {"kind": "delay", "seconds": DELAY_SECONDS},
        {"kind": "channel", "channel": "email", "only_if": ["unread"]},
    ]
}

SETUP_SQL = [
    f"""INSERT INTO notification_types (type, label, default_in_app, default_email, default_push, priority)
        VALUES ('{TYPE}', 'Workflow bench', true, true, false, 'default')""",
    """INSERT INTO users (external_id, email, display_name)
       SELECT 'wf-' || g, 'wf' || g || '@example.com', 'User ' || g FROM generate_series(1, :users) g""",
]

# The ledger's due set as the release sees it, written in one statement: same rows, same width, same indexes.
SCRATCH_SQL = "CREATE TABLE wf_due_scratch (LIKE notification_deliveries INCLUDING DEFAULTS INCLUDING INDEXES)"
RAW_SQL = """INSERT INTO wf_due_scratch
    SELECT * FROM notification_deliveries WHERE status = 'pending' AND next_attempt_at <= now()"""
# For the table only: the same rows rewritten in place in one statement (values unchanged, so the state after
# the release stays as it was): the ledger's own ceiling for an UPDATE of them.
REWRITE_SQL = """UPDATE notification_deliveries SET updated_at = updated_at
    WHERE status = 'pending' AND next_attempt_at <= now()"""

DUE_SQL = """SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'skipped' AND skip_reason = 'read') AS read_skipped,
       max(next_attempt_at) AS last_due, now() AS now
FROM notification_deliveries WHERE channel = 'email'"""

# Reads that landed inside the delay: the notification read before its e-mail step fell due.
READ_IN_DELAY_SQL = """SELECT count(*) FROM notifications n JOIN notification_deliveries d ON d.notification_id = n.id
WHERE d.channel = 'email' AND n.read_at IS NOT NULL AND n.read_at < d.next_attempt_at"""

# What must be true once the workers are done: the unread ones' rows sent, the read ones' skipped with reason read.
OUTCOME_SQL = """SELECT d.id, d.status, d.skip_reason, n.read_at IS NOT NULL AS read
FROM notification_deliveries d JOIN notifications n ON n.id = d.notification_id WHERE d.channel = 'email'"""

# The release transaction's own updates of the ledger, and how many of them were HOT (no index entry written).
XACT_UPDATES_SQL = """SELECT n_tup_upd AS updates, n_tup_hot_upd AS hot FROM pg_stat_xact_user_tables
WHERE relname = 'notification_deliveries'"""

# Undoes the stamps of the serial release: each due e-mail row untouched since it fell due, as the ingest left it.
UNSTAMP_SQL = """UPDATE notification_deliveries SET updated_at = next_attempt_at - interval '1 second'
WHERE channel = 'email' AND status = 'pending'"""
ROUNDS = 2  # (info) serial and (b) drain, alternated
MAX_PASSES = 10_000  # the sweeper's SWEEP_DUE_PASSES, raised so that one drain takes the whole backlog

STATUS_SQL = "SELECT status, count(*) FROM notification_deliveries WHERE channel = 'email' GROUP BY status"


class Stalled(Exception):
    """A wait ran past the run's deadline."""


class Bench:
    """One run: the app, the sink and the worker processes, and the figures gathered so far."""

    def __init__(self, args, workdir: Path) -> None:
        from app import create_app

        self.args = args
        self.workdir = workdir
        self.deadline = time.monotonic() + args.timeout
        self.app = create_app({})
        self.ctx = self.app.app_context()
        self.ctx.push()
        self.sink = None
        self.workers: list = []
        self.f: dict = {"runs": args.runs, "per_call": args.per_call, "workers": args.workers, "stalled": None}
        self.f["limit"] = self.app.config["SWEEP_LIMIT"]
        self.f["stale"] = self.app.config["SWEEP_REQUEUE_AFTER_SECONDS"]
        self.f["batch"] = self.app.config["DELIVERY_BATCH_SIZE"]

    # --- helpers --------------------------------------------------------------------------------

    def sql(self, statement: str, params: dict | None = None):
        import sqlalchemy as sa

        from app.extensions import db

        return db.session.execute(sa.text(statement), params or {})

    def wait(self, predicate, what: str, poll: float = 0.2) -> None:
        while not predicate():
            if time.monotonic() > self.deadline:
                raise Stalled(f"timed out after {self.args.timeout:.0f} s waiting for {what}")
            time.sleep(poll)

    def close(self) -> None:
        from app.extensions import db, redis
        from tests.support import processes

        for proc in [*self.workers, self.sink]:
            processes.stop(proc)
        db.session.rollback()
        redis.client().flushdb()
        db.session.remove()
        db.engine.dispose()
        self.ctx.pop()

    # --- phases ---------------------------------------------------------------------------------

    def setup(self) -> None:
        from flask_migrate import upgrade

        from app.extensions import db, redis
        from app.workflows import service as workflows

        upgrade()
        redis.client().flushdb()
        self.users = min(self.args.per_call, self.args.runs)
        for statement in SETUP_SQL:
            self.sql(statement, {"users": self.users})
        workflows.save_draft(None, TYPE, WORKFLOW)
        self.f["version"] = workflows.publish(None, TYPE, "bench_workflow").version
        self.sql(SCRATCH_SQL)
        db.session.commit()
        run_outside_transaction(db, "VACUUM ANALYZE users", "VACUUM ANALYZE notification_types")

    def ingest(self) -> None:
        """RUNS notifications, --per-call recipients a notify() call; 20 % read right after each commit."""
        from app.extensions import db
        from app.inbox.service import MARK_READ_SQL
        from app.notify.service import notify
        from app.unitofwork import commit

        refs = [f"wf-{i}" for i in range(1, self.users + 1)]
        left, call, lags, reads = self.args.runs, 0, [], 0
        started = time.perf_counter()
        while left > 0:
            some = refs[: min(left, self.users)]
            result = notify(some, type_=TYPE, title="Your order shipped", body="It arrives on Friday.",
                            dedupe_key=f"wf:{call}", link_path="/orders")  # fmt: skip
            commit()
            accepted = time.perf_counter()
            read = [{"id": r.notification_id, "user_id": r.user_id} for r in result.recipients[::READ_EVERY]]
            db.session.execute(MARK_READ_SQL, read)  # psycopg's executemany: one pipeline
            db.session.commit()
            lags.append(time.perf_counter() - accepted)
            reads += len(read)
            left -= len(some)
            call += 1
            if time.monotonic() > self.deadline:
                raise Stalled("timed out while ingesting")
        self.f.update(ingest_s=time.perf_counter() - started, calls=call, reads=reads, read_lag_max_s=max(lags))
        self.f["read_in_delay"] = self.sql(READ_IN_DELAY_SQL).scalar_one()
        db.session.rollback()

    def wait_due(self) -> None:
        """Until every e-mail step's delay has ended; then vacuum and checkpoint, as before any timed phase."""
        from app.extensions import db

        row = self.sql(DUE_SQL).one()
        db.session.rollback()
        self.f["pending_before"], self.f["read_skipped_before"] = row.pending, row.read_skipped
        if row.last_due is not None and row.last_due > row.now:
            time.sleep((row.last_due - row.now).total_seconds() + 0.05)
        self._settle()

    def _settle(self) -> None:
        from app.extensions import db

        db.session.rollback()
        run_outside_transaction(db, "VACUUM ANALYZE notification_deliveries", "VACUUM ANALYZE notifications",
                                "CHECKPOINT")  # fmt: skip

    def raw(self) -> None:
        """(a) the due rows written in one INSERT … SELECT, committed."""
        from app.extensions import db

        self.sql("TRUNCATE wf_due_scratch")
        db.session.commit()
        run_outside_transaction(db, "CHECKPOINT")
        started = time.perf_counter()
        rows = self.sql(RAW_SQL).rowcount
        db.session.commit()
        self.f.setdefault("raw_runs", []).append(time.perf_counter() - started)
        self.f["raw_rows"] = rows

    def rewrite(self) -> None:
        """The same rows rewritten in place by one UPDATE, committed (not part of the ratio)."""
        from app.extensions import db

        run_outside_transaction(db, "CHECKPOINT")
        started = time.perf_counter()
        self.f["rewrite_rows"] = self.sql(REWRITE_SQL).rowcount
        db.session.commit()
        self.f["rewrite_s"] = time.perf_counter() - started

    def release_serial(self) -> None:
        """(info) take_due pass after pass, each waiting for its hand-off before the next (the sweeper before it
        drained a backlog in one tick); only its own work timed, and which stamps were HOT."""
        from app.delivery import due
        from app.sweeper import idle_queues
        from app.unitofwork import commit

        config = self.app.config
        passes, released, statement_s, total_s, hot = 0, 0, 0.0, 0.0, Counter()
        cursor = due.DueCursor()  # as the sweeper's, across its passes
        while True:
            idle = idle_queues()
            # The backend's counts not yet flushed (PostgreSQL 15 flushes them at most once a second) are in the
            # view too: this pass's own are the difference.
            before = self.sql(XACT_UPDATES_SQL).mappings().one()
            started = time.perf_counter()
            groups = due.take_due(config["SWEEP_REQUEUE_AFTER_SECONDS"], config["SWEEP_LIMIT"], idle, cursor)
            paused = time.perf_counter()
            after = self.sql(XACT_UPDATES_SQL).mappings().one()  # untimed
            hot.update({key: after[key] - before[key] for key in ("updates", "hot")})
            resumed = time.perf_counter()
            handoff = commit()
            committed = time.perf_counter() - (resumed - paused)
            handoff.wait(60)
            ended = time.perf_counter() - (resumed - paused)
            taken = sum(len(ids) for ids in groups.values())
            if not taken:
                break
            passes += 1
            released += taken
            statement_s += committed - started
            total_s += ended - started
            if time.monotonic() > self.deadline:
                raise Stalled("timed out while releasing")
        if total_s < self.f.get("serial_s", float("inf")):
            self.f.update(serial_passes=passes, serial_released=released, serial_sql_s=statement_s, serial_s=total_s)
        self.f.setdefault("stamps", hot["updates"])
        self.f.setdefault("hot_stamps", hot["hot"])

    def unstamp(self) -> None:
        """Put the released rows back as they were before (a): due, untouched since, their jobs gone from Redis."""
        from app.extensions import db, redis

        self.sql(UNSTAMP_SQL)
        db.session.commit()
        redis.client().flushdb()

    def release(self) -> None:
        """(b) the sweeper's drain of the backlog (app.sweeper.take_due_backlog), whole, as one sweep runs it."""
        from app.delivery import due
        from app.sweeper import idle_queues, take_due_backlog

        idle = idle_queues()  # once per sweep, as the sweeper's (untimed)
        started = time.perf_counter()
        counts = take_due_backlog(self.app.config, idle, due.DueCursor(), MAX_PASSES)
        seconds = time.perf_counter() - started
        self.f.setdefault("release_runs", []).append(seconds)
        if seconds <= min(self.f["release_runs"]):
            self.f.update(
                release_s=seconds, passes=counts["passes"], released=counts["due"], enqueued=counts["enqueued"]
            )
        if counts["passes"] == MAX_PASSES:
            raise Stalled("the backlog outlasted the bench's passes")

    def deliver(self) -> None:
        """Real workers send the released e-mails to the sink; wait until every row is done."""
        from rq import Worker

        from app.extensions import db, redis
        from tests.support import processes
        from tests.support.waiting import free_port

        port = free_port()
        self.sink_log = self.workdir / "sink.log"
        self.sink = processes.start_sink(port, self.sink_log, self.workdir / "sink.out")
        env = dict(os.environ, SMTP_URL=f"smtp://127.0.0.1:{port}", EMAIL_PROVIDER="smtp", PYTHONUNBUFFERED="1")
        before = len(Worker.all(connection=redis.client()))
        started = time.perf_counter()
        for n in range(self.args.workers):
            log = self.workdir / f"worker-{n}.log"
            self.workers.append(processes.spawn(processes.flask_args("worker"), env, log))
        expected = self.f["released"]
        # Timed from the workers' start (their start-up counts: a conservative rate) to the last row recorded.

        def done() -> bool:
            counts = dict(self.sql(STATUS_SQL).all())
            db.session.rollback()
            self.f["statuses"] = counts
            return counts.get("pending", 0) == 0 and counts.get("sending", 0) == 0

        try:
            self.wait(lambda: len(Worker.all(connection=redis.client())) >= before + self.args.workers, "workers")
            self.wait(lambda: self._arrived() >= expected and done(), "the e-mails to arrive", poll=0.5)
        finally:
            self.f["deliver_s"] = time.perf_counter() - started
            time.sleep(1)  # a late duplicate (there should be none) would land now
            self._count()

    def _arrived(self) -> int:
        if not self.sink_log.exists():  # the sink writes it with the first message
            return 0
        with open(self.sink_log, "rb") as log:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: log.read(1 << 16), b""))

    def _count(self) -> None:
        from app.extensions import db
        from tests.support import processes

        arrived = Counter(processes.message_ids(self.sink_log))
        rows = self.sql(OUTCOME_SQL).all()
        db.session.rollback()
        ids = {f"<delivery-{row.id}@hato.127.0.0.1>": row for row in rows}
        self.f["emails"] = sum(arrived.values())
        self.f["distinct"] = len(arrived)
        self.f["duplicates"] = sum(n - 1 for n in arrived.values())
        self.f["foreign"] = sum(1 for mid in arrived if mid not in ids)
        self.f["to_read"] = sum(1 for mid in arrived if mid in ids and ids[mid].read)
        self.f["unread"] = sum(1 for row in rows if not row.read)
        self.f["unread_missing"] = sum(1 for mid, row in ids.items() if not row.read and mid not in arrived)
        self.f["unread_sent"] = sum(1 for row in rows if not row.read and row.status == "sent")
        self.f["read"] = sum(1 for row in rows if row.read)
        self.f["read_skipped"] = sum(
            1 for row in rows if row.read and (row.status, row.skip_reason) == ("skipped", "read")
        )


def run(args, workdir: Path) -> dict:
    bench = Bench(args, workdir)
    try:
        bench.setup()
        bench.ingest()
        bench.wait_due()
        bench.raw()
        bench._settle()
        for turn in range(ROUNDS):  # alternated, best of each: each round's unstamp leaves the table a little fuller
            bench.release_serial()
            bench.unstamp()
            bench._settle()
            bench.release()
            bench._settle()
            if turn < ROUNDS - 1:
                bench.unstamp()
                bench._settle()
        bench.raw()  # the baseline again after (b): the machine is shared, the faster of the two counts
        bench._settle()
        bench.rewrite()
        bench._settle()
        bench.deliver()
    except Exception as exc:  # noqa: BLE001 - a stall or an error: report what was measured, then fail
        if not isinstance(exc, Stalled):
            traceback.print_exc()
        bench.f["stalled"] = str(exc) or type(exc).__name__
        try:
            bench._count() if bench.sink is not None else None
        except Exception as count_exc:  # noqa: BLE001 - the report matters more than this
            bench.f["stalled"] += f" (and counting failed: {count_exc})"
    finally:
        bench.close()
    return bench.f


def figures(f: dict) -> dict:
    """The derived rates."""
    raw_s = min(f["raw_runs"]) if f.get("raw_runs") else float("nan")
    f["raw_s"] = raw_s
    f["raw_rows_per_s"] = f.get("raw_rows", 0) / raw_s if f.get("raw_runs") else float("nan")
    f["steps_per_s"] = f["released"] / f["release_s"] if f.get("release_s") else float("nan")
    f["serial_steps_per_s"] = f["serial_released"] / f["serial_s"] if f.get("serial_s") else float("nan")
    f["serial_sql_steps_per_s"] = f["serial_released"] / f["serial_sql_s"] if f.get("serial_sql_s") else float("nan")
    f["serial_ratio"] = f["serial_steps_per_s"] / f["raw_rows_per_s"]
    f["ratio"] = f["steps_per_s"] / f["raw_rows_per_s"]
    f["rewrite_rows_per_s"] = f["rewrite_rows"] / f["rewrite_s"] if f.get("rewrite_s") else float("nan")
    f["emails_per_s"] = f.get("emails", 0) / f["deliver_s"] if f.get("deliver_s") else float("nan")
    return f


def ok(f: dict) -> bool:
    """Whether the run delivered what it must: each unread notification's e-mail once, none to a read one."""
    expected = f["runs"] - f.get("reads", 0)
    return (
        not f["stalled"]
        and f.get("emails") == f.get("distinct") == f.get("unread_sent") == expected
        and f.get("duplicates") == 0
        and f.get("foreign") == 0
        and f.get("to_read") == 0
        and f.get("unread_missing") == 0
        and f.get("read_skipped") == f.get("reads")
    )


def report(f: dict) -> None:
    """Print the table, then the JSON line (last)."""
    g = lambda key, fmt=",.0f": format(f[key], fmt) if isinstance(f.get(key), int | float) else "-"  # noqa: E731
    print(
        f"\nWorkflow steps: {f['runs']:,} notifications (in_app → delay {DELAY_SECONDS} s → email only_if unread, "
        f"version {f.get('version', '-')}), {f.get('calls', '-')} notify() calls of {f['per_call']:,} recipients, "
        f"{os.cpu_count()} CPUs"
    )
    print(
        f"ingest {g('ingest_s', '.1f')} s (untimed); read {g('reads')} (20 %) with the inbox's MARK_READ_SQL right "
        f"after each call: {g('read_in_delay')} inside the delay (slowest read {g('read_lag_max_s', '.2f')} s after "
        f"its commit); e-mail steps pending when due {g('pending_before')}, skipped 'read' {g('read_skipped_before')}"
    )
    print(f"{'':<44}{'seconds':>10}{'rows':>10}{'rows/s':>12}")
    runs = ", ".join(f"{s:.3f}" for s in f.get("raw_runs", []))
    print(f"{'(a) raw INSERT … SELECT (LIKE the ledger)':<44}{g('raw_s', '.3f'):>10}{g('raw_rows'):>10}"
          f"{g('raw_rows_per_s'):>12}   runs {runs} s, fastest counted")  # fmt: skip
    print(f"{'(b) the sweeper drains the backlog':<44}{g('release_s', '.3f'):>10}{g('released'):>10}"
          f"{g('steps_per_s'):>12}   {g('passes')} passes of {f['limit']:,}, best of {ROUNDS}")  # fmt: skip
    print(f"{'(info) the same pass by pass, own loop':<44}{g('serial_s', '.3f'):>10}{g('serial_released'):>10}"
          f"{g('serial_steps_per_s'):>12}   ratio {g('serial_ratio', '.2f')}, best of {ROUNDS}")  # fmt: skip
    print(f"{'    of which take_due + commit':<44}{g('serial_sql_s', '.3f'):>10}{g('serial_released'):>10}"
          f"{g('serial_sql_steps_per_s'):>12}")  # fmt: skip
    print(f"{'(info) one UPDATE of the same ledger rows':<44}{g('rewrite_s', '.3f'):>10}{g('rewrite_rows'):>10}"
          f"{g('rewrite_rows_per_s'):>12}   in place, values unchanged; not in the ratio")  # fmt: skip
    print(f"{'ratio (b)/(a)':<44}{g('ratio', '.2f'):>10}   target >= 0.50")
    if f.get("stamps"):
        print(f"(info) stamps updated in place (HOT, no index entry): {g('hot_stamps', ',')} of {g('stamps', ',')}")
    print(
        f"deliver: {f['workers']} `flask worker` process(es), batches of {f['batch']}, to an aiosmtpd sink: "
        f"{g('emails')} e-mails in {g('deliver_s', '.1f')} s ({g('emails_per_s')}/s), {g('distinct')} distinct, "
        f"duplicates {g('duplicates')}, unread without one {g('unread_missing')}, to a read one {g('to_read')}, "
        f"foreign {g('foreign')}"
    )
    print(
        f"ledger: unread {g('unread')} → sent {g('unread_sent')}; read {g('read')} → skipped 'read' "
        f"{g('read_skipped')}; statuses {f.get('statuses', '-')}; jobs' rows enqueued {g('enqueued')}"
    )
    print("result: " + ("OK" if ok(f) else "FAILED" + (f" ({f['stalled']})" if f["stalled"] else "")))
    line = {k: f.get(k) for k in ("runs", "steps_per_s", "raw_rows_per_s", "ratio", "emails", "duplicates",
                                  "read_skipped")}  # fmt: skip
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in line.items()}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000, help="Notifications (2000: a smoke run).")
    parser.add_argument("--per-call", type=int, default=1_000, help="Recipients per notify() call (= users).")
    parser.add_argument("--workers", type=int, default=2, choices=(1, 2), help="`flask worker` processes.")
    parser.add_argument("--timeout", type=float, default=900.0, help="Seconds the whole run may take.")
    parser.add_argument("--keep", action="store_true", help="Keep the benchmark database afterwards.")
    args = parser.parse_args(argv)
    args.runs, args.per_call = max(args.runs, READ_EVERY), max(args.per_call, READ_EVERY)
    db_url, redis_url = bench_urls(BENCH_DB, BENCH_REDIS_DB)
    fresh_bench_database(db_url, redis_url)
    try:
        with tempfile.TemporaryDirectory(prefix="hato-bench-wf-") as tmp:
            f = figures(run(args, Path(tmp)))
    finally:
        if not args.keep:
            drop_database(db_url)
    report(f)
    return 0 if ok(f) else 1


if __name__ == "__main__":
    sys.exit(main())
