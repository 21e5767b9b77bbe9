"""SMS throughput against a raw loop, and one-time-password latency while a 100,000-recipient SMS campaign runs.

    python -m tests.perf.bench_sms [--count 10000] [--recipients 100000] [--otps 100] [--db hato_bench_sms]
                                   [--redis-db 6]

Uses its own database (dropped, created and migrated here) on the server of DATABASE_URL and its own Redis
database. The Twilio stand-in (the Messages API over HTTP/1.1 keep-alive, Basic auth and every form checked;
tests/support/twilio_server.py) runs in a process of its own (tests/perf/sms_standin.py) on 127.0.0.1 and counts
what it accepted per delivery (To, Body).

Throughput: --count members, each with a verified number and consent, have one pending `sms` row (title, body,
no link: one GSM-7 part). Phases:

  raw loop      the exact requests Hato sends (each row's Message built through the SMS channel before the clock
                starts: the same To, Body and From, the same Basic auth), posted with the same httpx client the
                provider uses (app/providers/httpclients.py: one keep-alive client, SMS_TIMEOUT), one request in
                flight at a time; run first and last
  1 worker      the rows' deliver_batch jobs (DELIVERY_BATCH_SIZE 100) enqueued to one idle `flask worker
                --simple` with SMS_PROVIDER=twilio; timed from enqueue until the stand-in has every SMS and every
                row is `sent`; first and last
  raw, 4        the raw loop with 4 requests in flight (threads on the one client): not a baseline; what lanes
                would buy against this stand-in

The baseline's concurrency is 1 because that is what one worker does with these rows: the SMS channel sends a
batch's rows one after another (no DELIVERY_SEND_CONCURRENCY lanes for it; the ledger's fence keeps at most one
message past its point of no return unrecorded). Every phase checks that each delivery arrived exactly once and
none was refused. Then the floor, in process: render (the channel builds the text and measures its parts) and
record (the one durable statement the engine writes under the fence) per row, measured before and after the
worker phases (the lower counts); ceiling = request / (request + record), as bench_mobile prints it.

One-time passwords: --recipients members with numbers (the last OTP_USERS of them receive the codes), a `high`
type with SMS on and bypass_quiet_hours (a sign-in code's type) and a `low` campaign type with SMS on. One
gunicorn web process, 2 RQ workers (`flask worker`: high, default, low) and the sweeper. The campaign is sent to
every member; once its SMS flow (CAMPAIGN_FLOWING accepted), --otps POST /v1/notifications go out, OTP_RATE per
second, each to one member, and each code's latency runs from just before its POST to its receipt at the
stand-in (time.time() in both processes); the POST's own round trip is printed beside it. Bounded:
OTP_WAIT_SECONDS for the last code, PHASE_LIMIT_SECONDS in all; the campaign is not waited for (its SMS rate
during the window is printed).

Prints a table, then one JSON line: sms_per_s, raw_sms_per_s, ratio (target >= 0.7), otp_p50_ms, otp_p99_ms
(target <= 1000), otp_max_ms, otp_post_p99_ms, campaign_sms_per_s, record_ms, render_ms, ceiling.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from tests.support.databases import bench_urls, fresh_bench_database

BATCH = 100
WIDE = 4  # DELIVERY_SEND_CONCURRENCY's default: what lanes would give the SMS channel
TIME_LIMIT_SECONDS = 300
POLL_SECONDS = 0.02
TYPE, OTP_TYPE, PROMO_TYPE = "bench-sms", "bench-otp", "bench-promo"
OTP_USERS = 100
OTP_RATE = 4.0  # codes per second
CAMPAIGN_FLOWING = 1000  # campaign SMS accepted before the first code is sent
OTP_WAIT_SECONDS = 30
PHASE_LIMIT_SECONDS = 600

MEMBERS_SQL = """INSERT INTO users (email, display_name, external_id, phone, phone_verified_at, sms_opt_in,
                                    sms_opt_in_at, sms_consent_source)
    SELECT :prefix || '-' || g || '@example.com', 'Member ' || g, :prefix || '-' || g,
           :country || lpad(g::text, 8, '0'), now(), true, now(), 'api'
    FROM generate_series(1, :count) g"""
NOTIFICATIONS_SQL = """INSERT INTO notifications (user_id, type, title, body, dedupe_key)
    SELECT u.id, :type, 'Order ' || u.id || ' shipped', 'It left the warehouse this morning.', 'bench:' || u.id
    FROM users u"""
# How long each code's row waited for a worker: its notification's creation to its send's start (the ledger's try).
QUEUE_WAIT_SQL = """SELECT extract(epoch FROM a.started_at - n.created_at) * 1000 FROM notifications n
    JOIN notification_deliveries d ON d.notification_id = n.id AND d.user_id = n.user_id AND d.channel = 'sms'
    JOIN delivery_attempts a ON a.delivery_id = d.id AND a.user_id = d.user_id WHERE n.type = :type"""
DELIVERIES_SQL = """INSERT INTO notification_deliveries (notification_id, user_id, channel)
    SELECT id, user_id, 'sms' FROM notifications ORDER BY id RETURNING id"""


def _wait(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: timed out waiting for {what}")
        time.sleep(POLL_SECONDS)


def percentile(values: list[float], pct: float) -> float:
    """The pct-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered) + 0.5) - 1))]


class Bench:
    """Owns the app, the stand-in's process and the processes of one run."""

    def __init__(self, count: int, workdir: Path, db_name: str, redis_db: int) -> None:
        from tests.perf.sms_standin import SmsStandin

        self.count = count
        self.workdir = workdir
        self.db_url, self.redis_url = bench_urls(db_name, redis_db)
        fresh_bench_database(self.db_url, self.redis_url)
        self.standin = SmsStandin(dict(os.environ, PYTHONUNBUFFERED="1"), workdir / "twilio.log")
        self.settings = {**self.standin.settings, "SMS_PROVIDER": "twilio"}
        from flask_migrate import upgrade

        from app import create_app

        self.app = create_app({"DELIVERY_BATCH_SIZE": BATCH, **self.settings})
        self.ctx = self.app.app_context()
        self.ctx.push()
        upgrade()
        from tests.support import processes

        self.processes = processes
        self.env = dict(os.environ, DELIVERY_BATCH_SIZE=str(BATCH), PYTHONUNBUFFERED="1",
                        **{name: str(value) for name, value in self.settings.items()})  # fmt: skip
        self.procs: list = []
        self._sql("INSERT INTO notification_types (type, label, default_in_app, default_channels, priority) "
                  "VALUES (:type, 'Orders', false, '{sms}', 'high')", type=TYPE)  # fmt: skip
        self._sql(MEMBERS_SQL, prefix="sms", country="+8160", count=count)

    def _sql(self, statement: str, **params):
        import sqlalchemy as sa

        from app.extensions import db

        result = db.session.execute(sa.text(statement), params)
        db.session.commit()
        return result

    def close(self) -> None:
        while self.procs:
            self.processes.stop(self.procs.pop())
        self.standin.close()
        self.ctx.pop()

    def rows(self) -> list[int]:
        """Fresh pending sms rows, one per member (untimed); return their ids."""
        import sqlalchemy as sa

        from app.extensions import db, redis

        db.session.rollback()
        db.session.execute(sa.text("TRUNCATE notification_deliveries, delivery_attempts, notifications "
                                   "RESTART IDENTITY CASCADE"))  # fmt: skip
        db.session.execute(sa.text(NOTIFICATIONS_SQL), {"type": TYPE})
        ids = sorted(db.session.execute(sa.text(DELIVERIES_SQL)).scalars())
        db.session.commit()
        redis.client().flushdb()
        return ids

    def requests(self) -> list[dict]:
        """The form of every request the worker would post, built through the SMS channel (untimed)."""
        from app.delivery.channels import channel_for
        from app.extensions import db
        from app.providers.twilio import TwilioProvider

        channel = channel_for("sms")
        claim = channel.source.claim("sms", self.rows(), 600)
        batch = channel.source.load(claim, channel)
        sender = TwilioProvider.from_config(self.app.config).settings.sender
        messages = [channel.build_message(row, batch.context, self.app.config) for row in batch.rows]
        forms = [{"To": m.to, "Body": m.text, sender[0]: sender[1]} for m in messages]
        db.session.rollback()
        return forms

    def raw(self, forms: list[dict], concurrency: int = 1) -> float:
        """Post the forms with the provider's own client, concurrency in flight; return SMS/s."""
        from app.providers.httpclients import shared
        from app.providers.twilio import TwilioProvider

        settings = TwilioProvider.from_config(self.app.config).settings
        client = shared(settings.api_base, settings.timeout)
        auth = (settings.account_sid, settings.auth_token)
        self.standin.ask("reset")

        def one(form: dict) -> int:
            return client.post(settings.url, data=form, auth=auth).status_code

        started = time.perf_counter()
        if concurrency == 1:
            statuses = [one(form) for form in forms]
        else:
            with ThreadPoolExecutor(concurrency, thread_name_prefix="raw") as pool:
                statuses = list(pool.map(one, forms))
        elapsed = time.perf_counter() - started
        if any(status != 201 for status in statuses):
            raise SystemExit(f"bench: the raw loop was refused ({sorted(set(statuses))})")
        self._check(len(forms), f"raw loop, {concurrency} in flight")
        return len(forms) / elapsed

    def _check(self, count: int, what: str) -> dict:
        """Every delivery arrived exactly once, none refused; return the stand-in's figures."""
        figures = self.standin.ask("counts")
        lost = count - figures["distinct"]
        if lost or figures["duplicates"] or figures["refused"]:
            raise SystemExit(f"bench: {what}: {lost} lost, {figures}")
        return figures

    def worker(self) -> float:
        """Deliver the rows with one RQ worker; return SMS/s."""
        from rq import Worker

        from app.extensions import redis
        from app.queueing import enqueue_deliveries
        from tests.support.load import status_counts

        ids = self.rows()
        self.procs.append(self.processes.spawn(self.processes.flask_args("worker", "--simple"), self.env,
                                               self.workdir / "worker.log"))  # fmt: skip
        _wait(lambda: len(Worker.all(connection=redis.client())) >= 1, 60, "the worker")
        time.sleep(0.5)  # let it reach the blocking dequeue
        self.standin.ask("reset")
        started = time.perf_counter()
        assert enqueue_deliveries("high", "sms", ids)
        _wait(lambda: self.standin.ask("received")["accepted"] >= len(ids), TIME_LIMIT_SECONDS, "1 worker")
        elapsed = time.perf_counter() - started
        # The stand-in counts an SMS before the worker has recorded its row: give the last record a moment.
        _wait(lambda: status_counts().get("sent") == len(ids), 30, "every row recorded sent")
        self._check(len(ids), "1 worker")
        while self.procs:
            self.processes.stop(self.procs.pop())
        return len(ids) / elapsed

    def floor(self) -> dict[str, float]:
        """Milliseconds per row of what a worker must do besides the request: render and record (untimed)."""
        from app.delivery import service
        from app.delivery.channels import channel_for
        from app.delivery.sending import Result
        from app.delivery.source import Try
        from app.extensions import db

        channel = channel_for("sms")
        claim = channel.source.claim("sms", self.rows(), 600)
        batch = channel.source.load(claim, channel)
        db.session.commit()
        started = time.perf_counter()
        for row in batch.rows:
            channel.build_message(row, batch.context, self.app.config)
        render = (time.perf_counter() - started) / len(batch.rows)
        now = datetime.now(UTC)
        started = time.perf_counter()
        with service.send_ledger() as conn:
            for row in batch.rows:
                result = Result(row, "sent", "twilio", now, 1, message_id="bench", subject="", body="b")
                service.record_result(Try(result, "sent"), claim.lease, conn)
        record = (time.perf_counter() - started) / len(batch.rows)
        return {"render_ms": render * 1000, "record_ms": record * 1000}

    def otp(self, recipients: int, otps: int) -> dict:
        """Codes on the high queue while a campaign to `recipients` members sends on low; return the figures."""
        import httpx
        import sqlalchemy as sa

        from app.api_keys.service import create_api_key
        from app.campaigns.service import create_campaign, send_campaign
        from app.extensions import db, redis
        from tests.realtime.helpers import Gunicorn
        from tests.support.waiting import free_port

        self._sql("TRUNCATE users RESTART IDENTITY CASCADE")
        redis.client().flushdb()
        self._sql("INSERT INTO notification_types (type, label, default_in_app, default_channels, priority, "
                  "bypass_quiet_hours) VALUES (:otp, 'Sign-in code', false, '{sms}', 'high', true), "
                  "(:promo, 'Offers', true, '{sms}', 'low', false)",
                  otp=OTP_TYPE, promo=PROMO_TYPE)  # fmt: skip
        self._sql(MEMBERS_SQL, prefix="camp", country="+8170", count=recipients - OTP_USERS)
        self._sql(MEMBERS_SQL, prefix="otp", country="+8180", count=OTP_USERS)
        key = create_api_key(None, "bench_sms")
        campaign = create_campaign(None, name="Winter sale", type_=PROMO_TYPE, title="Winter sale",
                                   body="Everything 20% off until Sunday.")  # fmt: skip
        db.session.commit()
        self._sql("ANALYZE")
        env = dict(self.env, API_RATE_LIMIT="100000000 per minute", DB_POOL_SIZE="4", DB_MAX_OVERFLOW="4")
        web = Gunicorn(free_port(), sockets=0, env={**env, "WEB_WORKERS": "1", "WEB_REQUEST_THREADS": "4"},
                       log_path=self.workdir / "web.log")  # fmt: skip
        web.start(timeout=60)
        try:
            for name, command in (("worker-1", "worker"), ("worker-2", "worker"), ("sweeper", "sweep")):
                self.procs.append(self.processes.spawn(self.processes.flask_args(command), env,
                                                       self.workdir / f"{name}.log"))  # fmt: skip
            self.standin.ask("reset")
            send_campaign(None, campaign.id)
            db.session.commit()  # the fanout job is enqueued after this commit
            started = time.monotonic()
            _wait(lambda: self.standin.ask("received")["accepted"] >= CAMPAIGN_FLOWING, PHASE_LIMIT_SECONDS,
                  "the campaign's SMS to flow")  # fmt: skip
            window_start, campaign_before = time.monotonic(), self.standin.ask("received")["accepted"]
            posted: dict[str, float] = {}
            answered: list[float] = []  # the POST's own round trip (the 202), ms
            headers = {"Authorization": f"Bearer {key}"}
            with httpx.Client(base_url=web.base_url, headers=headers, timeout=10) as client:
                for n in range(otps):
                    title = f"OTP-{n:04d}"
                    due = window_start + n / OTP_RATE
                    time.sleep(max(0.0, due - time.monotonic()))
                    sent_at = time.time()
                    answer = client.post("/v1/notifications", headers={"Idempotency-Key": title}, json={
                        "type": OTP_TYPE, "recipient": f"otp-{n % OTP_USERS + 1}", "title": title,
                        "body": f"Your sign-in code is {482910 + n}. It expires in 10 minutes."})  # fmt: skip
                    if answer.status_code != 202:
                        raise SystemExit(f"bench: POST /v1/notifications answered {answer.status_code}: {answer.text}")
                    posted[title] = sent_at
                    answered.append((time.time() - sent_at) * 1000)
            limit = min(OTP_WAIT_SECONDS, PHASE_LIMIT_SECONDS - (time.monotonic() - started))
            _wait(lambda: len(self.standin.ask("stamps")) >= otps, limit, "every code at the stand-in")
            window = time.monotonic() - window_start
            stamps = self.standin.ask("stamps")
            accepted = self.standin.ask("received")["accepted"]
            figures = self.standin.ask("counts")
            db.session.rollback()
            waits = [float(v) for v in db.session.execute(sa.text(QUEUE_WAIT_SQL), {"type": OTP_TYPE}).scalars()]
            fanout = db.session.execute(sa.text("SELECT status FROM campaigns WHERE id = :id"),
                                        {"id": campaign.id}).scalar_one()  # fmt: skip
            db.session.rollback()
        finally:
            web.stop(timeout=10)
            while self.procs:
                self.processes.stop(self.procs.pop())
        latencies = [(stamps[title] - at) * 1000 for title, at in posted.items()]
        campaign_sms = accepted - campaign_before - otps
        return {"otp_p50_ms": percentile(latencies, 50), "otp_p99_ms": percentile(latencies, 99),
                "post_p99_ms": percentile(answered, 99), "wait_p99_ms": percentile(waits, 99) if waits else 0.0,
                "campaign_status": fanout,
                "otp_max_ms": max(latencies), "otps": otps, "campaign_sms_per_s": campaign_sms / window,
                "campaign_sent": accepted - otps, "window_s": window, "duplicates": figures["duplicates"],
                "refused": figures["refused"]}  # fmt: skip


def _said(phase: str, rate: float) -> float:
    """rate, told on stderr as the phase ends (stdout keeps the table and the JSON line last)."""
    print(f"bench_sms: {phase}: {rate:.0f}/s", file=sys.stderr, flush=True)
    return rate


def _runs(rates: list[float]) -> str:
    return " / ".join(f"{rate:.0f}" for rate in rates)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000, help="SMS in each throughput phase")
    parser.add_argument("--recipients", type=int, default=100_000, help="the campaign's audience")
    parser.add_argument("--otps", type=int, default=100, help="one-time passwords sent during the campaign")
    parser.add_argument("--db", default="hato_bench_sms")
    parser.add_argument("--redis-db", type=int, default=6)
    args = parser.parse_args(argv)
    if not 100 <= args.count <= 100_000:
        parser.error("--count is between 100 and 100,000")
    if not 2 * OTP_USERS <= args.recipients <= 1_000_000 or not 1 <= args.otps <= 1000:
        parser.error(f"--recipients is between {2 * OTP_USERS} and 1,000,000, --otps between 1 and 1,000")
    raw: list[float] = []
    hato: list[float] = []
    with tempfile.TemporaryDirectory(prefix="hato-bench-") as tmp:
        bench = Bench(args.count, Path(tmp), args.db, args.redis_db)
        try:
            forms = bench.requests()
            floor_first = bench.floor()
            # A shared machine: the baseline and the headline are each taken first and last; the better counts.
            raw.append(_said("raw", bench.raw(forms)))
            hato.append(_said("1 worker", bench.worker()))
            wide = _said(f"raw, {WIDE}", bench.raw(forms, WIDE))
            hato.append(_said("1 worker", bench.worker()))
            raw.append(_said("raw", bench.raw(forms)))
            # The floor twice too (before the worker phases and after them), the lower of each part counting.
            floors = [floor_first, bench.floor()]
            floor = {name: min(f[name] for f in floors) for name in floor_first}
            otp = bench.otp(args.recipients, args.otps)
            print(f"bench_sms: OTP p99 {otp['otp_p99_ms']:.0f} ms", file=sys.stderr, flush=True)
        finally:
            bench.close()
    best_raw, best = max(raw), max(hato)
    ratio = best / best_raw
    request_ms = 1000 / best_raw
    ceiling = request_ms / (request_ms + floor["record_ms"])
    inline = request_ms / (request_ms + floor["record_ms"] + floor["render_ms"])
    print(f"\nSMS benchmark: {args.count} SMS to a local Twilio (Messages API, HTTP/1.1 keep-alive), batches of "
          f"{BATCH}, {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'phase':<46} {'per second':>11}  note")
    for label, rate, note in (
        ("raw loop, 1 in flight", best_raw, f"baseline (best of {_runs(raw)})"),
        ("1 worker, SMS channel → Twilio", best, f"{ratio:.2f}x raw (best of {_runs(hato)})"),
        (f"raw loop, {WIDE} in flight", wide, f"1 worker is {best / wide:.2f}x it"),
    ):
        print(f"{label:<46} {rate:>11.0f}  {note}")
    print(f"request {request_ms:.2f} ms (raw), record {floor['record_ms']:.2f} ms, render {floor['render_ms']:.2f} ms "
          f"per row → ceiling at 1 in flight {ceiling:.2f}x raw ({inline:.2f}x with the render in line)")  # fmt: skip
    print(f"\nOne-time passwords under a campaign to {args.recipients:,} members (1 web process, 2 workers): "
          f"{otp['otps']} codes at {OTP_RATE:g}/s, POST → stand-in receipt p50 {otp['otp_p50_ms']:.0f} ms, "
          f"p99 {otp['otp_p99_ms']:.0f} ms (the POST's own 202: p99 {otp['post_p99_ms']:.0f} ms), max "
          f"{otp['otp_max_ms']:.0f} ms; a code's row waited for a worker p99 {otp['wait_p99_ms']:.0f} ms; "
          f"campaign {otp['campaign_sms_per_s']:.0f} SMS/s beside them ({otp['campaign_sent']:,} sent when the last "
          f"code arrived, campaign {otp['campaign_status']}, not waited for)")  # fmt: skip
    print(json.dumps({"sms": args.count, "sms_per_s": round(best, 1), "raw_sms_per_s": round(best_raw, 1),
                      "ratio": round(ratio, 3), f"raw_{WIDE}_per_s": round(wide, 1),
                      "record_ms": round(floor["record_ms"], 3), "render_ms": round(floor["render_ms"], 3),
                      "ceiling": round(ceiling, 3), "otp_p50_ms": round(otp["otp_p50_ms"], 1),
                      "otp_p99_ms": round(otp["otp_p99_ms"], 1), "otp_max_ms": round(otp["otp_max_ms"], 1),
                      "otp_post_p99_ms": round(otp["post_p99_ms"], 1), "otp_wait_p99_ms": round(otp["wait_p99_ms"], 1),
                      "otps": otp["otps"], "campaign_recipients": args.recipients,
                      "campaign_sms_per_s": round(otp["campaign_sms_per_s"], 1), "lost": 0,
                      "duplicates": otp["duplicates"], "refused": otp["refused"]}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
