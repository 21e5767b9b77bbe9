"""Mobile push throughput: 10,000 pushes, half to a local APNs, half to a local FCM, against raw loops.

    python -m tests.perf.bench_mobile [--count 10000] [--db hato_bench_mobile] [--redis-db 7]

Uses its own database (dropped, created and migrated here) on the server of DATABASE_URL and its own
Redis database. The APNs stand-in (HTTP/2 over TLS, every request's ES256 JWT verified) and the FCM
stand-in (HTTP/1.1 keep-alive over TLS, OAuth token endpoint, every body validated) run in one process
of their own (tests/perf/mobile_standins.py) on 127.0.0.1, which counts what they accepted.

count/2 members have one iPhone each, count/2 one Android phone; each has one unread notification and
one pending `push` row in the ledger, so one row is one request. Phases, each for APNs then FCM:

  raw loop      the exact requests Hato sends (built through the push channel before the clock starts:
                the same JSON bodies, apns-* headers, the JWT signed once / the OAuth access token fetched
                once), sent with the same kind of httpx client (HTTP/2 only with its own CA for APNs, one
                connection; HTTP/1.1 keep-alive for FCM), one request in flight at a time; run first and last
  1 worker      the rows' deliver_batch jobs (DELIVERY_BATCH_SIZE 100) enqueued to one idle
                `flask worker --simple` that has APNS_* / FCM_* in its environment and no VAPID keys;
                timed from enqueue until the stand-in has every push and every row is `sent`; first and last
  raw, 20       the raw loop with APNS_CONCURRENCY / FCM_CONCURRENCY (20) requests in flight (APNs: 20
                streams of one HTTP/2 connection from httpx's asyncio client; FCM: 20 threads on the same
                client): not a baseline; whether more in flight would raise the ceiling against these
                stand-ins (on 2 CPUs it does not: they are CPU-bound Python servers)

The baseline's concurrency is 1 because that is what one worker achieves on these rows: the push channel
sends a batch's rows one after another (no DELIVERY_SEND_CONCURRENCY lanes for it, and the ledger's fence
keeps at most one message past its point of no return unrecorded), and APNS_CONCURRENCY / FCM_CONCURRENCY
only spread the devices of one message. The raw side does not claim, re-check, render, read the badge,
route, record the try or stamp the device; the worker also signs its JWT and fetches its access token
within the clock. Every phase checks that the stand-in accepted each device exactly once (0 lost, no
duplicates) and refused none.

Then the floor, per platform and in process: what a worker must do per row besides the request, each in a
loop of its own over the rows: render the message (template, the iPhone's badge read) and record the try (the
one durable statement the engine writes under the fence). A worker sends one message at a time past the
fence's point and records it before the next, so even one that did nothing else reaches at most
request / (request + record) of the raw loop: that is the ceiling printed (and with the render in line too).

Prints a table, then one JSON line: apns_per_s, fcm_per_s, raw_apns_per_s, raw_fcm_per_s (best runs) and
ratio, the smaller of the two Hato/raw ratios (target 0.7); record_ms, render_ms, ceiling_apns, ceiling_fcm.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from tests.support.databases import bench_urls, fresh_bench_database

BATCH = 100
CONCURRENCY = 20  # APNS_CONCURRENCY / FCM_CONCURRENCY: the stand-ins' settings and the default
TIME_LIMIT_SECONDS = 300
POLL_SECONDS = 0.02
TYPE = "bench-mobile"
PLATFORMS = {"ios": "apns", "android": "fcm"}

USERS_SQL = """INSERT INTO users (email, display_name, external_id)
    SELECT :platform || '-' || g || '@example.com', 'Member ' || g, :platform || '-' || g
    FROM generate_series(1, :count) g"""
# APNs tokens are 64 hex digits; FCM's are opaque strings: both made unique from the user id.
DEVICES_SQL = """INSERT INTO devices (user_id, platform, token, locale)
    SELECT u.id, :platform, CASE WHEN :platform = 'ios' THEN encode(sha256(u.id::text::bytea), 'hex')
                                 ELSE 'bench:APA91b' || encode(sha256(u.id::text::bytea), 'hex') END, 'en'
    FROM users u WHERE u.external_id LIKE :platform || '-%'"""
NOTIFICATIONS_SQL = """INSERT INTO notifications (user_id, type, title, body, dedupe_key, link_path, group_key)
    SELECT u.id, :type, 'Order ' || u.id || ' shipped', 'Your order left the warehouse this morning.',
           'bench:' || u.id, '/orders/' || u.id, 'order-' || u.id
    FROM users u WHERE u.external_id LIKE :platform || '-%'"""
DELIVERIES_SQL = """INSERT INTO notification_deliveries (notification_id, user_id, channel)
    SELECT n.id, n.user_id, 'push' FROM notifications n JOIN users u ON u.id = n.user_id
    WHERE u.external_id LIKE :platform || '-%' ORDER BY n.id RETURNING id"""


class Bench:
    """Owns the app, the stand-ins' process and the worker of one run."""

    def __init__(self, counts: dict[str, int], workdir: Path, db_name: str, redis_db: int) -> None:
        from tests.perf.mobile_standins import Standins

        self.counts = counts
        self.workdir = workdir
        self.db_url, self.redis_url = bench_urls(db_name, redis_db)
        fresh_bench_database(self.db_url, self.redis_url)
        self.standins = Standins(workdir, dict(os.environ, PYTHONUNBUFFERED="1"), workdir / "standins.log")
        self.settings = self.standins.settings
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
        self._members()

    def close(self) -> None:
        for proc in self.procs:
            self.processes.stop(proc)
        self.standins.close()
        self.ctx.pop()

    def _members(self) -> None:
        """count/2 members with an iPhone, count/2 with an Android phone, and the notification type (untimed)."""
        import sqlalchemy as sa

        from app.extensions import db

        db.session.execute(sa.text("INSERT INTO notification_types (type, label, default_push, priority) "
                                   "VALUES (:type, 'Orders', true, 'high')"), {"type": TYPE})  # fmt: skip
        for platform, count in self.counts.items():
            db.session.execute(sa.text(USERS_SQL), {"platform": platform, "count": count})
            db.session.execute(sa.text(DEVICES_SQL), {"platform": platform})
        db.session.commit()

    def rows(self, platform: str) -> list[int]:
        """Fresh pending push rows, one per member of platform (untimed); return their ids."""
        import sqlalchemy as sa

        from app.extensions import db, redis

        db.session.rollback()
        db.session.execute(sa.text("TRUNCATE notification_deliveries, delivery_attempts, notifications "
                                   "RESTART IDENTITY CASCADE"))  # fmt: skip
        db.session.execute(sa.text(NOTIFICATIONS_SQL), {"type": TYPE, "platform": platform})
        ids = sorted(db.session.execute(sa.text(DELIVERIES_SQL), {"platform": platform}).scalars())
        db.session.commit()
        redis.client().flushdb()
        return ids

    def _wait(self, predicate, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not predicate():
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: timed out waiting for {what}")
            time.sleep(POLL_SECONDS)

    def messages(self, platform: str) -> list:
        """The Messages the worker would send for platform's rows, built by the push channel (untimed)."""
        from app.delivery.channels import channel_for
        from app.extensions import db

        channel = channel_for("push")
        source = channel.source
        claim = source.claim("push", self.rows(platform), 600)
        batch = source.load(claim, channel)
        targets = channel.targets(batch.rows)
        built = [channel.build_message(row, batch.context, self.app.config, targets[row.id]) for row in batch.rows]
        db.session.rollback()
        return built

    def floor(self, platform: str) -> dict[str, float]:
        """Milliseconds per row of what a worker must do besides the request, each in a loop of its own: render the
        row's message (the template, the iPhone's badge read) and record its try durably (the one statement the
        engine writes under the fence, on the send ledger's connection) (untimed by the phases)."""
        from app.delivery import service
        from app.delivery.channels import channel_for
        from app.delivery.sending import Result
        from app.delivery.source import Try
        from app.extensions import db

        channel = channel_for("push")
        source = channel.source
        claim = source.claim("push", self.rows(platform), 600)
        batch = source.load(claim, channel)
        targets = channel.targets(batch.rows)
        db.session.commit()
        started = time.perf_counter()
        for row in batch.rows:
            channel.build_message(row, batch.context, self.app.config, targets[row.id])
        render = (time.perf_counter() - started) / len(batch.rows)
        db.session.commit()
        now = datetime.now(UTC)
        started = time.perf_counter()
        with service.send_ledger() as conn:
            for row in batch.rows:
                result = Result(row, "sent", PLATFORMS[platform], now, 1, message_id="bench", subject="s", body="b")
                service.record_result(Try(result, "sent"), claim.lease, conn)
        record = (time.perf_counter() - started) / len(batch.rows)
        return {"render_ms": render * 1000, "record_ms": record * 1000}

    def requests(self, platform: str) -> tuple[list[tuple[str, bytes, dict]], object]:
        """Pre-built (url, body, headers) of every request, and the client to send them with (untimed)."""
        import httpx

        settings = self.settings
        built = []
        if platform == "ios":
            from app.providers.apns import KEEPALIVE_SECONDS, ProviderToken
            from app.providers.apns_payload import apns_payload, request_headers

            bearer = ProviderToken(settings["APNS_KEY_FILE"], settings["APNS_KEY_ID"], settings["APNS_TEAM_ID"])
            jwt = bearer.current()
            for message in self.messages(platform):
                push, (device,) = message.mobile, message.targets
                headers = request_headers(push, device.app_id or settings["APNS_TOPIC"], time.time())
                built.append((f"{settings['APNS_ENDPOINT']}/3/device/{device.token}",
                              apns_payload(push, push.alert_for(device.locale)),
                              {**headers, "authorization": f"bearer {jwt}"}))  # fmt: skip
            transport = httpx.HTTPTransport(
                verify=ssl.create_default_context(cafile=settings["APNS_CA_FILE"]), http1=False, http2=True,
                limits=httpx.Limits(keepalive_expiry=KEEPALIVE_SECONDS), retries=1,
            )  # fmt: skip
            client = httpx.Client(transport=transport, timeout=httpx.Timeout(settings["APNS_TIMEOUT"]))
            return built, client
        from app.providers.fcm import fcm_message
        from app.providers.fcm_transport import KEEPALIVE_SECONDS as FCM_KEEPALIVE
        from app.providers.fcm_transport import FcmSettings, FcmTransport

        fcm = FcmSettings(settings["FCM_CREDENTIALS_FILE"], settings["FCM_API_BASE"], settings["FCM_CA_FILE"],
                          CONCURRENCY, settings["FCM_TIMEOUT"])  # fmt: skip
        transport = FcmTransport(fcm)
        try:
            url = f"{settings['FCM_API_BASE']}/v1/projects/{transport.project_id}/messages:send"
            headers = {"Authorization": f"Bearer {transport.token()}", "Content-Type": "application/json"}
        finally:
            transport.close()
        for message in self.messages(platform):
            push, (device,) = message.mobile, message.targets
            body = json.dumps(fcm_message(device, push, push.alert_for(device.locale)), ensure_ascii=False,
                              separators=(",", ":")).encode()  # fmt: skip
            built.append((url, body, headers))
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=CONCURRENCY,
                              keepalive_expiry=FCM_KEEPALIVE)  # fmt: skip
        context = ssl.create_default_context(cafile=settings["FCM_CA_FILE"])
        return built, httpx.Client(verify=context, timeout=settings["FCM_TIMEOUT"], limits=limits)

    def raw(self, platform: str, prepared: tuple, concurrency: int = 1) -> float:
        """Send the pre-built requests with concurrency in flight; return pushes/s."""
        built, client = prepared
        self.standins.ask("reset")

        def one(request: tuple[str, bytes, dict]) -> int:
            url, body, headers = request
            return client.post(url, content=body, headers=headers).status_code

        started = time.perf_counter()
        if concurrency == 1:
            statuses = [one(request) for request in built]
        elif platform == "ios":
            statuses = self._streams(built, concurrency)
        else:
            with ThreadPoolExecutor(concurrency, thread_name_prefix="raw") as pool:
                statuses = list(pool.map(one, built))
        elapsed = time.perf_counter() - started
        refused = [status for status in statuses if status != 200]
        if refused:
            raise SystemExit(f"bench: the raw {platform} loop was refused {len(refused)} times ({refused[0]})")
        self._check(platform, len(built), f"raw {PLATFORMS[platform]} loop")
        return len(built) / elapsed

    def _streams(self, built: list[tuple[str, bytes, dict]], concurrency: int) -> list[int]:
        """APNs with concurrency streams in flight on one HTTP/2 connection; return the statuses.

        httpx's asyncio client, not the threads of the others: httpcore's sync HTTP/2 connection is not
        safe to share between threads (stream ids and HPACK state are taken without a lock), and the
        stand-in drops the connection within a few thousand requests when 20 threads share one.
        """
        import asyncio

        import httpx

        async def run() -> list[int]:
            context = ssl.create_default_context(cafile=self.settings["APNS_CA_FILE"])
            timeout = httpx.Timeout(self.settings["APNS_TIMEOUT"])
            statuses: list[int] = []
            requests = iter(built)
            async with httpx.AsyncClient(http1=False, http2=True, verify=context, timeout=timeout) as client:

                async def lane() -> None:
                    for url, body, headers in requests:  # one iterator shared by the lanes: each request once
                        statuses.append((await client.post(url, content=body, headers=headers)).status_code)

                await asyncio.gather(*(lane() for _ in range(concurrency)))
            return statuses

        return asyncio.run(run())

    def _check(self, platform: str, count: int, what: str) -> dict:
        """Every device reached exactly once, none refused; return the stand-in's figures."""
        figures = self.standins.ask("counts")[PLATFORMS[platform]]
        lost, duplicates = count - figures["distinct"], figures["received"] - figures["distinct"]
        if lost or duplicates or figures["refused"]:
            raise SystemExit(f"bench: {what}: {lost} lost, {duplicates} duplicates, {figures}")
        return figures

    def worker(self, platform: str) -> tuple[float, dict]:
        """Deliver platform's rows with one RQ worker; return (pushes/s, the stand-in's figures)."""
        from rq import Worker

        from app.extensions import redis
        from app.queueing import enqueue_deliveries
        from tests.support.load import status_counts

        ids = self.rows(platform)
        self.procs.append(self.processes.spawn(self.processes.flask_args("worker", "--simple"), self.env,
                                               self.workdir / "worker.log"))  # fmt: skip
        self._wait(lambda: len(Worker.all(connection=redis.client())) >= 1, 60, "the worker")
        time.sleep(0.5)  # let it reach the blocking dequeue
        self.standins.ask("reset")
        name = PLATFORMS[platform]
        started = time.perf_counter()
        assert enqueue_deliveries("default", "push", ids)
        self._wait(lambda: self.standins.ask("received")[name] >= len(ids), TIME_LIMIT_SECONDS, f"1 worker, {name}")
        elapsed = time.perf_counter() - started
        # The stand-in counts a push before the worker has recorded its row: give the last record a moment.
        self._wait(lambda: status_counts().get("sent") == len(ids), 30, f"{name}: every row recorded sent")
        figures = self._check(platform, len(ids), f"1 worker, {name}")
        while self.procs:
            self.processes.stop(self.procs.pop())
        return len(ids) / elapsed, figures


def _said(phase: str, rate: float) -> float:
    """rate, told on stderr as the phase ends (stdout keeps the table and the JSON line last)."""
    print(f"bench_mobile: {phase}: {rate:.0f}/s", file=sys.stderr, flush=True)
    return rate


def _runs(rates: list[float]) -> str:
    return " / ".join(f"{rate:.0f}" for rate in rates)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000, help="pushes in all, half to each stand-in")
    parser.add_argument("--db", default="hato_bench_mobile")
    parser.add_argument("--redis-db", type=int, default=7)
    args = parser.parse_args(argv)
    if not 2 <= args.count <= 100_000:
        parser.error("--count is between 2 and 100,000")
    counts = {"ios": args.count // 2, "android": args.count - args.count // 2}
    raw: dict[str, list[float]] = {"ios": [], "android": []}
    hato: dict[str, list[float]] = {"ios": [], "android": []}
    wide: dict[str, float] = {}
    figures: dict[str, dict] = {}
    floors: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="hato-bench-") as tmp:
        bench = Bench(counts, Path(tmp), args.db, args.redis_db)
        try:
            prepared = {platform: bench.requests(platform) for platform in counts}
            # A shared machine: the baseline and the headline are each taken first and last; the better counts.
            for platform in counts:
                raw[platform].append(_said(f"raw {platform}", bench.raw(platform, prepared[platform])))
            for platform in counts:
                rate, figures[platform] = bench.worker(platform)
                hato[platform].append(_said(f"1 worker {platform}", rate))
            for platform in counts:
                wide[platform] = _said(f"raw {platform}, {CONCURRENCY}", bench.raw(platform, prepared[platform],
                                                                            CONCURRENCY))  # fmt: skip
            for platform in counts:
                hato[platform].append(_said(f"1 worker {platform}", bench.worker(platform)[0]))
            for platform in counts:
                raw[platform].append(_said(f"raw {platform}", bench.raw(platform, prepared[platform])))
            for platform in counts:
                floors[platform] = bench.floor(platform)
            for _, client in prepared.values():
                client.close()
        finally:
            bench.close()
    best = {platform: (max(raw[platform]), max(hato[platform])) for platform in counts}
    ratios = {platform: h / r for platform, (r, h) in best.items()}
    print(f"\nMobile push benchmark: {args.count} pushes ({counts['ios']} APNs, {counts['android']} FCM) to local "
          f"stand-ins, batches of {BATCH}, {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'phase':<46} {'per second':>11}  note")
    for platform, name, link in (("ios", "APNs", "HTTP/2, 1 connection"), ("android", "FCM", "HTTP/1.1 keep-alive")):
        r, h = best[platform]
        rows = [
            (f"raw {name} loop, {link}, 1 in flight", r, f"baseline (best of {_runs(raw[platform])})"),
            (f"1 worker, push channel → {name}", h, f"{h / r:.2f}x raw (best of {_runs(hato[platform])})"),
            (f"raw {name} loop, {CONCURRENCY} in flight", wide[platform], f"1 worker is {h / wide[platform]:.2f}x it"),
        ]  # fmt: skip
        for label, rate, note in rows:
            print(f"{label:<46} {rate:>11.0f}  {note}")
    ceilings = {}
    for platform, name in (("ios", "APNs"), ("android", "FCM")):
        # One message at a time is past the fence's point: its request and its record follow each other, so even
        # a worker that did nothing else reaches request / (request + record) of the raw loop; rendering too when
        # it cannot overlap (the GIL: it is CPU work).
        request_ms, f = 1000 / best[platform][0], floors[platform]
        ceilings[platform] = request_ms / (request_ms + f["record_ms"])
        inline = request_ms / (request_ms + f["record_ms"] + f["render_ms"])
        print(f"{name}: request {request_ms:.2f} ms (raw), record {f['record_ms']:.2f} ms, render {f['render_ms']:.2f}"
              f" ms per row → ceiling at 1 in flight {ceilings[platform]:.2f}x raw ({inline:.2f}x with the render in"
              f" line)")  # fmt: skip
    for platform, name, also in (("ios", "APNs", ""), ("android", "FCM", ", the token request's included")):
        f = figures[platform]
        print(f"{name} stand-in, 1 worker: {f['received']} accepted, 0 lost, 0 duplicates, "
              f"{f['connections']} connection(s){also}, at most {f['peak_in_flight']} in flight")  # fmt: skip
    print(json.dumps({"pushes": args.count, "apns_per_s": round(best["ios"][1], 1),
                      "fcm_per_s": round(best["android"][1], 1), "raw_apns_per_s": round(best["ios"][0], 1),
                      "raw_fcm_per_s": round(best["android"][0], 1), "ratio_apns": round(ratios["ios"], 3),
                      "ratio_fcm": round(ratios["android"], 3), "ratio": round(min(ratios.values()), 3),
                      "raw_apns_20_per_s": round(wide["ios"], 1), "raw_fcm_20_per_s": round(wide["android"], 1),
                      "record_ms": {p: round(f["record_ms"], 3) for p, f in floors.items()},
                      "render_ms": {p: round(f["render_ms"], 3) for p, f in floors.items()},
                      "ceiling_apns": round(ceilings["ios"], 3), "ceiling_fcm": round(ceilings["android"], 3),
                      "lost": 0, "duplicates": 0}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
