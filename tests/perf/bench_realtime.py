"""Benchmark: live badge delivery over websockets from one web process.

    python -m tests.perf.bench_realtime [--worker-class gthread|gevent] [--sockets 1000] [--rate 50]
                                        [--duration 20] [--max-sockets 5000] [--step 1000]
                                        [--feed-sockets 1000] [--malloc-tcache] [--no-compression]
                                        [--phase all|single|multi] [--processes 4] [--multi-sockets 2500]
                                        [--multi-step 500] [--multi-rate 100] [--multi-duration 20]

The single-process phases (--phase single) are described here; the multi-process phase (issue 30: routed
events over --processes web processes, 2,500 sockets each) in tests/perf/realtime_multi.py. --phase all
(the default, what `make bench` runs) runs both, each on a fresh database, and prints one JSON line.
Every client acks every frame it reads, as realtime.js and the bell do.

One gunicorn worker (the production config, app.realtime.gunicorn_conf, with GLIBC_TUNABLES as the
docs/production.md's sizing sets it unless --malloc-tcache) against its own database
`hato_bench_realtime` and Redis DB 7 (on the servers of DATABASE_URL / REDIS_URL, else 127.0.0.1).
A bounded asyncio client opens --sockets signed-in websockets (session cookies signed with the app's
own serializer, so nobody logs in 1,000 times). A separate process then POSTs /v1/notifications to the
same web process for random connected users at a fixed rate for a fixed time. "from 202" runs from
the 202 response to the frame carrying that notification's toast arriving (the API publishes before
it answers, so a frame can beat its own 202: values may be negative); "from POST" runs from sending
the request. "uncoalesc" leaves out the events that came within 100 ms of the previous one for the
same user (those wait, by design, for the end of the user's coalescing window). "floor" is the same
events seen by a bare Redis subscriber in the client process (on the node channel of the web process, where
the routing sends them): what the machine itself adds. Then the
socket count steps up to --max-sockets, stopping at the first handshake error or missing first frame;
when every step succeeded, the "max" rows run the same events again over all --max-sockets sockets
(issue 20: p99 from 202 and RSS per socket = (worker RSS now - before the first socket) / sockets).
Before that, the "feed" phase (issue 19) opens --feed-sockets token-authenticated sockets on
/v1/feed/socket (the embedded bell's: Origin from FEED_ALLOWED_ORIGINS, the user token in the first
message, JSON frames) for the same users, beside the session sockets, and runs the same events again:
"feed" is from 202 to the feed socket's frame, "session+" the session sockets' frames meanwhile. The
feed sockets are closed before the capacity steps. BENCH_REALTIME_DB / BENCH_REALTIME_REDIS_DB choose
another database and Redis DB. The last line is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import multiprocessing
import os
import random
import re
import resource
import signal
import socket
import threading
import time
import traceback
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psutil
import redis as redis_lib
import sqlalchemy as sa
from websockets.asyncio.client import connect

from app import keyspace
from app.live import registry
from tests.support.databases import fresh_bench_database
from tests.support.load import insert_users

DB_NAME = os.environ.get("BENCH_REALTIME_DB", "hato_bench_realtime")
REDIS_DB = int(os.environ.get("BENCH_REALTIME_REDIS_DB", "7"))
FEED_ORIGIN = "https://product.example"
FEED_FIRST_SEQ = 1_000_000
AT_MAX_FIRST_SEQ = 2_000_000
MALLOC_TUNABLES = "glibc.malloc.tcache_count=0"
AT_MAX_PHASES = {"from 202": "max 202", "uncoalesc": "max uncoa", "from POST": "max POST", "floor": "max floor"}
TOAST_RE = re.compile(r"bench-(\d+)")
# A frame's sequence number (app/realtime/acks.py): the HTML comment that starts it, or the JSON field.
SEQ_RE = re.compile(r'^<!--hato:seq=(\d+)-->|"seq":(\d+)')
PING_RE = re.compile(r"<!--hato:seq=\d+-->")  # an HTML frame that only asks for an ack
NODE_TTL_SECONDS = 60.0
CONNECT_CONCURRENCY = 50
FIRST_FRAME_TIMEOUT = 15.0
SETTLE_SECONDS = 3.0


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_fd_limit() -> int:
    """Raise this process's open-file limit to the hard limit (the server and publisher inherit it)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def bench_env(malloc_tcache: bool = False) -> dict:
    """Return DATABASE_URL / REDIS_URL for our own database and Redis DB on the configured servers.

    Unless malloc_tcache, the web process runs as docs/production.md sizes it: glibc's per-thread malloc caches
    off (GLIBC_TUNABLES), as each of thousands of socket threads kept ~9 KB of freed memory in its own.
    """
    db = urlsplit(os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/hato"))
    cache = urlsplit(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    if cache.scheme == "unix":
        cache = cache._replace(query=urlencode({**dict(parse_qsl(cache.query)), "db": REDIS_DB}))
    else:
        cache = cache._replace(path=f"/{REDIS_DB}")
    tunables = {} if malloc_tcache else {"GLIBC_TUNABLES": MALLOC_TUNABLES}
    return {
        **tunables,
        "DATABASE_URL": urlunsplit(db._replace(path=f"/{DB_NAME}")),
        "REDIS_URL": urlunsplit(cache),
        "API_RATE_LIMIT": "100000 per minute",
        "FEED_ALLOWED_ORIGINS": FEED_ORIGIN,
        # Every feed socket comes from this one client address.
        "FEED_CONNECT_RATE_LIMIT": "100000 per minute",
        # At most DB_POOL_SIZE database connections (handshakes queue for one), so that 50 concurrent
        # connects do not take 30 of a shared server's connections.
        "DB_MAX_OVERFLOW": "0",
    }


def prepare_database(env: dict, users: int):
    """Recreate and migrate the bench database, empty our Redis DB, create users and an API key.

    Returns (app, {user id: external id}, API key).
    """
    os.environ.update(env)
    fresh_bench_database(env["DATABASE_URL"], env["REDIS_URL"])  # a secret of this run's own; the catalogs compiled
    from flask_migrate import upgrade

    from app import create_app
    from app.api_keys.service import create_api_key
    from app.extensions import db, redis

    app = create_app()
    with app.app_context():
        upgrade()
        redis.client().flushdb()  # DB 7 only, ours
        db.session.execute(
            sa.text("INSERT INTO notification_types (type, label) VALUES ('comment', 'Comment') ON CONFLICT DO NOTHING")
        )
        users_by_id = insert_users(users, "bench")
        key = create_api_key(None, "bench_realtime")
        db.session.commit()
        db.session.remove()
    return app, users_by_id, key


class Clients:
    """Many websocket clients in one asyncio loop, acking every frame as a browser tab does.

    Records when each bench toast arrives (perf_counter) and when its frame's ack went (epoch seconds,
    comparable with the API's accepted time and the server's 202-to-ack histogram).
    """

    def __init__(self, base_url: str, cookies: dict[int, str], compression: str | None = "deflate") -> None:
        self.compression = compression
        self.url = base_url.replace("http://", "ws://") + "/ws"
        self.origin = base_url
        self.cookies = cookies
        self.arrivals: dict[int, float] = {}
        self.acked: dict[int, float] = {}  # bench seq -> time.time() right after its frame's ack was sent
        self.frames = 0
        self.acks_sent = 0
        self.pings: list[float] = []  # time.time() of each ping frame (the server asking a quiet socket to ack)
        self.sockets: dict[int, object] = {}
        self.tasks: list[asyncio.Task] = []
        self.errors: list[str] = []
        self.closed: list[tuple[int | None, float]] = []  # (close code, when) for sockets the server closed
        self.gate = asyncio.Semaphore(CONNECT_CONCURRENCY)

    async def _open(self, headers: dict | None = None):
        """Open a socket to this phase's URL as a browser page would (its Origin, no client pings)."""
        return await connect(
            self.url,
            origin=self.origin,
            proxy=None,
            ping_interval=None,
            compression=self.compression,
            additional_headers=headers,
            open_timeout=FIRST_FRAME_TIMEOUT,
            close_timeout=1,
        )

    async def _handshake(self, user_id: int):
        """Open user_id's socket; return it and its first frame (the greeting)."""
        async with self.gate:
            ws = await self._open({"Cookie": f"session={self.cookies[user_id]}"})
            return ws, await asyncio.wait_for(ws.recv(), FIRST_FRAME_TIMEOUT)

    async def _one(self, user_id: int, ready: asyncio.Future) -> None:
        try:
            ws, first = await self._handshake(user_id)
        except Exception as exc:  # noqa: BLE001 - any failure means "this socket did not make it"
            self.errors.append(f"{type(exc).__name__}: {exc}"[:200])
            ready.set_result(False)
            return
        self.sockets[user_id] = ws
        ready.set_result(True)
        with contextlib.suppress(Exception):  # an abnormal close is recorded below like any other
            await self._ack(ws, first, ())
            async for frame in ws:
                now = time.perf_counter()
                seqs = [int(seq) for seq in TOAST_RE.findall(frame)]
                for seq in seqs:
                    self.arrivals.setdefault(seq, now)
                await self._ack(ws, frame, seqs)
        self.closed.append((ws.close_code, time.perf_counter()))

    async def _ack(self, ws, frame: str, seqs) -> None:
        """Ack a frame by its sequence number (realtime.js and the bell do); note when, for its bench toasts."""
        self.frames += 1
        if PING_RE.fullmatch(frame) or '"type":"ping"' in frame:
            self.pings.append(time.time())
        match = SEQ_RE.search(frame)
        if match is None:
            return
        await ws.send(json.dumps({"type": "ack", "seq": int(match.group(1) or match.group(2))}))
        self.acks_sent += 1
        now = time.time()
        for seq in seqs:
            self.acked.setdefault(seq, now)

    async def open(self, user_ids: list[int]) -> int:
        """Open sockets for user_ids; return how many got their first frame."""
        futures = []
        for user_id in user_ids:
            ready = asyncio.get_running_loop().create_future()
            self.tasks.append(asyncio.create_task(self._one(user_id, ready)))
            futures.append(ready)
        return sum(await asyncio.gather(*futures))

    async def close(self) -> None:
        """Close every socket."""
        await asyncio.gather(*(ws.close() for ws in self.sockets.values()), return_exceptions=True)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


class FeedClients(Clients):
    """Feed sockets as the embedded bell opens them: allowed Origin, the user token in the first message."""

    def __init__(self, base_url: str, tokens: dict[int, str], compression: str | None = "deflate") -> None:
        super().__init__(base_url, {}, compression)
        self.url = base_url.replace("http://", "ws://") + "/v1/feed/socket"
        self.origin = FEED_ORIGIN
        self.tokens = tokens

    async def _handshake(self, user_id: int):
        """Open user_id's feed socket, authenticate with the token; return it and its first frame."""
        async with self.gate:
            ws = await self._open()
            await ws.send(json.dumps({"type": "auth", "token": self.tokens[user_id]}))
            return ws, await asyncio.wait_for(ws.recv(), FIRST_FRAME_TIMEOUT)


def feed_tokens(app, user_ids: list[int], audience: str) -> dict[int, str]:
    """Return a one-hour user token per user, signed with a fresh feed:issue key's secret (as a backend would)."""
    import jwt

    from app import user_tokens
    from app.api_keys.service import create_api_key, key_prefix
    from app.extensions import db

    with app.app_context():
        prefix = key_prefix(create_api_key(None, "bench_feed", ["feed:issue"]))
        db.session.commit()
        externals = dict(db.session.execute(sa.text("SELECT id, external_id FROM users")).all())
        secret = user_tokens.signing_secret(prefix)
        db.session.remove()
    exp = int(time.time()) + 3600
    return {
        user_id: jwt.encode({"sub": externals[user_id], "aud": audience, "exp": exp}, secret, headers={"kid": prefix})
        for user_id in user_ids
    }


async def feed_phase(env: dict, base_url: str, key: str, clients: Clients, feed: FeedClients, users, args) -> list:
    """Run the events again with feed sockets beside the session sockets; return the two latency rows."""
    floor = RedisFloor(env["REDIS_URL"], env["DATABASE_URL"])
    floor.start()
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    # Events numbered apart from the first phase's: their dedupe keys and toasts must not repeat.
    publisher = spawn.Process(
        target=publish_events, args=(base_url, key, users, args.rate, args.duration, results, FEED_FIRST_SEQ)
    )
    publisher.start()
    deadline = time.monotonic() + args.duration + 120
    while results.empty():
        if time.monotonic() > deadline or not publisher.is_alive() and results.empty():
            raise RuntimeError(f"publisher failed (exit code {publisher.exitcode})")
        await asyncio.sleep(0.05)
    _, accepted, _, failures = results.get()
    publisher.join(10)
    await asyncio.sleep(SETTLE_SECONDS)
    floor.stop.set()
    floor.join(2)
    session_rows = latency_stats(accepted, clients.arrivals)
    return [
        {"phase": "feed", **latency_stats(accepted, feed.arrivals), "events": len(accepted),
         "sockets": len(feed.sockets), "api_errors": len(failures)},
        {"phase": "session+", **session_rows, "events": len(accepted), "sockets": len(clients.sockets)},
        {"phase": "floor+", **latency_stats(accepted, floor.arrivals), "events": len(accepted), "sockets": "-"},
    ]  # fmt: skip


class RedisFloor(threading.Thread):
    """A bare subscriber to the same badge events: the transport and scheduling floor of this machine.

    It listens on the node channels (app/live/registry.py) of every web process alive when it starts
    (or on `channels`), so it hears each routed event once, as the process holding its user does.
    clock: perf_counter (the default) or time.time for epoch arrivals. It also counts what it heard
    (messages, and the user events in them), so it doubles as a process that hears every event.
    """

    def __init__(
        self, redis_url: str, database_url: str, channels: list[str] | None = None, clock=time.perf_counter
    ) -> None:
        super().__init__(daemon=True)
        self.arrivals: dict[int, float] = {}
        self.messages = 0
        self.events = 0
        self.clock = clock
        client = redis_lib.Redis.from_url(redis_url)
        namespace = {"REDIS_NAMESPACE": keyspace.derive_namespace(database_url)}
        if channels is None:
            nodes = registry.live_nodes(client, NODE_TTL_SECONDS, config=namespace)
            channels = [registry.node_channel(node, config=namespace) for node in nodes]
        if not channels:
            raise RuntimeError("no live web process to listen to")
        self.pubsub = client.pubsub()
        self.pubsub.subscribe(*channels)
        confirmed = 0
        while confirmed < len(channels):  # nothing published from here on can be missed
            message = self.pubsub.get_message(timeout=2)
            if message is None:
                raise RuntimeError("no subscribe confirmation from Redis")
            confirmed += message["type"] == "subscribe"
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            message = self.pubsub.get_message(timeout=0.2)
            if message and message["type"] == "message":
                now = self.clock()
                data = message["data"].decode()
                for seq in TOAST_RE.findall(data):
                    self.arrivals.setdefault(int(seq), now)
                with contextlib.suppress(ValueError, AttributeError):
                    self.events += len(json.loads(data).get("users") or ())
                self.messages += 1
        self.pubsub.close()


def publish_events(
    base_url: str, key: str, users: dict[int, str], rate: float, duration: float, out, first_seq: int = 0
) -> None:
    """POST /v1/notifications for a random connected user per tick, as a product service does.

    Runs in its own process (one keep-alive connection) so that its CPU time does not delay the
    clients' event loop; sends back, per event, when the request started and when the 202 arrived.
    """
    rng = random.Random(7)
    user_ids = sorted(users)
    started: dict[int, float] = {}
    accepted: dict[int, float] = {}
    chosen: dict[int, int] = {}
    failures: list[str] = []
    host, port = urlsplit(base_url).hostname, urlsplit(base_url).port
    conn = http.client.HTTPConnection(host, port, timeout=10)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    begin = time.perf_counter()
    for seq in range(first_seq, first_seq + int(rate * duration)):
        delay = begin + (seq - first_seq) / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        user_id = rng.choice(user_ids)
        body = json.dumps(
            {"type": "comment", "recipient": users[user_id], "title": f"bench-{seq}", "dedupe_key": f"bench:{seq}"}
        )
        started[seq] = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
        try:
            conn.request("POST", "/v1/notifications", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
        except (OSError, http.client.HTTPException) as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
            conn.close()
            continue
        if response.status != 202:
            failures.append(f"HTTP {response.status}")
            continue
        accepted[seq] = time.perf_counter()
        chosen[seq] = user_id
    conn.close()
    out.put((started, accepted, chosen, failures))


def percentile(values: list[float], p: float) -> float:
    """Return the p-th percentile (nearest rank) of values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def latency_stats(sent: dict[int, float], arrivals: dict[int, float]) -> dict:
    """Return p50/p95/p99/max in ms and how many events never arrived."""
    values = [(arrivals[seq] - at) * 1000 for seq, at in sent.items() if seq in arrivals]
    return {
        "p50_ms": percentile(values, 50),
        "p95_ms": percentile(values, 95),
        "p99_ms": percentile(values, 99),
        "max_ms": max(values, default=float("nan")),
        "lost": len(sent) - len(values),
    }


def held_by_coalescing(sent: dict[int, float], users: dict[int, int], window: float) -> set[int]:
    """Return the events that came within `window` of the previous event for the same user."""
    last: dict[int, float] = {}
    held = set()
    for seq in sorted(sent):
        user_id = users[seq]
        if user_id in last and sent[seq] - last[user_id] < window:
            held.add(seq)
        last[user_id] = sent[seq]
    return held


def rss_kb(pid: int) -> float:
    """Return the resident set size of pid in KiB."""
    return psutil.Process(pid).memory_info().rss / 1024


async def latency_phase(
    env: dict, base_url: str, key: str, clients: Clients, users: dict[int, str], args, first_seq: int = 0
) -> tuple[list[dict], int]:
    """POST at a fixed rate from another process; return latency rows and the number of failed API calls."""
    floor = RedisFloor(env["REDIS_URL"], env["DATABASE_URL"])
    floor.start()
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    publisher = spawn.Process(
        target=publish_events, args=(base_url, key, users, args.rate, args.duration, results, first_seq)
    )
    publisher.start()
    deadline = time.monotonic() + args.duration + 120
    while results.empty():
        if time.monotonic() > deadline or not publisher.is_alive() and results.empty():
            raise RuntimeError(f"publisher failed (exit code {publisher.exitcode})")
        await asyncio.sleep(0.05)
    started, accepted, chosen, failures = results.get()
    publisher.join(10)
    await asyncio.sleep(SETTLE_SECONDS)  # let the last frames arrive
    floor.stop.set()
    floor.join(2)
    held = held_by_coalescing(accepted, chosen, 0.1)
    free = {seq: at for seq, at in accepted.items() if seq not in held}
    posted = {seq: started[seq] for seq in accepted}
    rows = [
        {"phase": "from 202", **latency_stats(accepted, clients.arrivals), "events": len(accepted)},
        {"phase": "uncoalesc", **latency_stats(free, clients.arrivals), "events": len(free)},
        {"phase": "from POST", **latency_stats(posted, clients.arrivals), "events": len(posted)},
        {"phase": "floor", **latency_stats(accepted, floor.arrivals), "events": len(accepted)},
    ]
    return rows, len(failures)


async def capacity_phase(
    clients: Clients, user_ids: list[int], worker: int, base_rss: float, args
) -> tuple[list[dict], int]:
    """Add sockets in steps up to --max-sockets; stop at the first error. Return rows and the last clean count."""
    rows = []
    target = len(clients.sockets)
    clean = 0 if clients.errors else target
    while not clients.errors and target < args.max_sockets:
        target = min(target + args.step, args.max_sockets)
        started = time.perf_counter()
        await clients.open(user_ids[len(clients.sockets) + len(clients.errors) : target])
        connected = len(clients.sockets)
        rows.append(
            {
                "phase": "capacity",
                "sockets": connected,
                "errors": len(clients.errors),
                "connect_s": time.perf_counter() - started,
                "rss_mb": rss_kb(worker) / 1024,
                "rss_per_socket_kb": (rss_kb(worker) - base_rss) / max(connected, 1),
                "threads": psutil.Process(worker).num_threads(),
            }
        )
        if not clients.errors:
            clean = connected
    return rows, clean


async def full_phase(
    env: dict, base_url: str, key: str, clients: Clients, users: dict[int, str], worker: int, base_rss: float, args
) -> list[dict]:
    """Run the events again with every socket of the capacity phase open and timed; return its rows.

    RSS per socket is (the worker's RSS now - before the first socket) / sockets; "client CPU" is this
    process's CPU time during the events, to show the load generator was not the bottleneck.
    """
    await asyncio.sleep(1.0)
    rss_now = rss_kb(worker)
    cpu_before = sum(psutil.Process(worker).cpu_times()[:2])
    client_before = sum(psutil.Process().cpu_times()[:2])
    live = {user_id: users[user_id] for user_id in clients.sockets}
    rows, failures = await latency_phase(env, base_url, key, clients, live, args, AT_MAX_FIRST_SEQ)
    rows[0].update(
        sockets=len(clients.sockets),
        connect_s=0.0,
        rss_mb=rss_now / 1024,
        rss_per_socket_kb=(rss_now - base_rss) / max(len(clients.sockets), 1),
        threads=psutil.Process(worker).num_threads(),
        worker_cpu_s=sum(psutil.Process(worker).cpu_times()[:2]) - cpu_before,
        client_cpu_s=sum(psutil.Process().cpu_times()[:2]) - client_before,
        api_errors=failures,
    )
    for row in rows:
        row["sockets"] = "-" if row["phase"] == "floor" else len(clients.sockets)
        row["phase"] = AT_MAX_PHASES[row["phase"]]
    return rows


async def run(args) -> dict:
    """Run both phases against one fresh gunicorn worker; return the figures."""
    from tests.realtime.helpers import Gunicorn, session_cookie

    fd_limit = raise_fd_limit()
    env = bench_env(args.malloc_tcache)
    app, users, key = prepare_database(env, max(args.sockets, args.max_sockets))
    user_ids = list(users)
    cookies = {user_id: session_cookie(app, user_id) for user_id in user_ids}
    server = Gunicorn(
        free_port(),
        worker_class=args.worker_class,
        sockets=args.max_sockets + 64,
        env=env,
        log_path=os.environ.get("BENCH_LOG", "/tmp/bench_realtime_gunicorn.log"),
    ).start()
    try:
        [worker] = server.worker_pids()
        warm = Clients(server.base_url, cookies)  # the first socket starts the listener and loads templates
        await warm.open(user_ids[:1])
        await warm.close()
        await asyncio.sleep(1.0)
        base_rss = rss_kb(worker)
        clients = Clients(server.base_url, cookies, None if args.no_compression else "deflate")
        started = time.perf_counter()
        connected = await clients.open(user_ids[: args.sockets])
        connect_s = time.perf_counter() - started
        await asyncio.sleep(1.0)
        rss_at_n = rss_kb(worker)
        load = os.getloadavg()[0]
        cpu_before = sum(psutil.Process(worker).cpu_times()[:2])
        live = {user_id: users[user_id] for user_id in clients.sockets}
        rows, api_errors = await latency_phase(env, server.base_url, key, clients, live, args)
        row = rows[0]
        row.update(
            sockets=connected,
            connect_s=connect_s,
            rss_mb=rss_at_n / 1024,
            rss_per_socket_kb=(rss_at_n - base_rss) / max(connected, 1),
            threads=psutil.Process(worker).num_threads(),
            worker_cpu_s=sum(psutil.Process(worker).cpu_times()[:2]) - cpu_before,
        )
        for other in rows[1:]:
            other["sockets"] = connected if other["phase"] != "floor" else "-"
        feed_rows: list[dict] = []
        if args.feed_sockets:
            feed_ids = list(clients.sockets)[: args.feed_sockets]
            feed = FeedClients(server.base_url, feed_tokens(app, feed_ids, server.base_url),
                               None if args.no_compression else "deflate")  # fmt: skip
            feed_started = time.perf_counter()
            await feed.open(feed_ids)
            feed_connect_s = time.perf_counter() - feed_started
            await asyncio.sleep(1.0)
            feed_rows = await feed_phase(env, server.base_url, key, clients, feed, live, args)
            feed_rows[0].update(connect_s=feed_connect_s, rss_mb=rss_kb(worker) / 1024,
                                rss_per_socket_kb=(rss_kb(worker) - rss_at_n) / max(len(feed.sockets), 1),
                                threads=psutil.Process(worker).num_threads(), errors=len(feed.errors))  # fmt: skip
            await feed.close()
            await asyncio.sleep(1.0)
            rows += feed_rows
        capacity, max_sockets = await capacity_phase(clients, user_ids, worker, base_rss, args)
        rows += capacity
        full = (
            await full_phase(env, server.base_url, key, clients, users, worker, base_rss, args)
            if (max_sockets == args.max_sockets)
            else None
        )
        if full is not None:
            rows += full
        first_error = clients.errors[0] if clients.errors else None
        open_sockets = len(clients.sockets)
        stop_started = time.perf_counter()
        server.proc.send_signal(signal.SIGTERM)  # graceful stop with every socket still open
        while len(clients.closed) < open_sockets and time.perf_counter() - stop_started < 30:
            await asyncio.sleep(0.05)
        going_away = sum(code == 1001 for code, _ in clients.closed)
        all_closed_s = max((at for _, at in clients.closed), default=stop_started) - stop_started
        server.proc.wait(30)
        shutdown_s = time.perf_counter() - stop_started
        await clients.close()
    finally:
        server.kill()
    at_max = (
        {
            f"p50_ms_{args.max_sockets}": round(full[0]["p50_ms"], 2),
            f"p99_ms_{args.max_sockets}": round(full[0]["p99_ms"], 2),
            f"uncoalesced_p99_ms_{args.max_sockets}": round(full[1]["p99_ms"], 2),
            f"floor_p99_ms_{args.max_sockets}": round(full[3]["p99_ms"], 2),
            f"lost_{args.max_sockets}": full[0]["lost"],
            f"events_{args.max_sockets}": full[0]["events"],
            f"api_errors_{args.max_sockets}": full[0]["api_errors"],
            f"rss_per_socket_kb_{args.max_sockets}": round(full[0]["rss_per_socket_kb"], 1),
            f"worker_cpu_s_{args.max_sockets}": round(full[0]["worker_cpu_s"], 2),
            f"client_cpu_s_{args.max_sockets}": round(full[0]["client_cpu_s"], 2),
        }
        if full
        else {}
    )
    return {
        "rows": rows,
        "worker_class": args.worker_class,
        "rate": args.rate,
        "duration": args.duration,
        "clients_offer_deflate": not args.no_compression,
        "malloc_tcache": args.malloc_tcache,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(load, 2),
        "fd_limit": fd_limit,
        "sockets": connected,
        "events": row["events"],
        "p50_ms": round(row["p50_ms"], 2),
        "p95_ms": round(row["p95_ms"], 2),
        "p99_ms": round(row["p99_ms"], 2),
        "lost": row["lost"],
        "api_errors": api_errors,
        "from_post_p99_ms": round(rows[2]["p99_ms"], 2),
        "uncoalesced_p99_ms": round(rows[1]["p99_ms"], 2),
        "coalesced_events": row["events"] - rows[1]["events"],
        "floor_p99_ms": round(rows[3]["p99_ms"], 2),
        "worker_cpu_s": round(row["worker_cpu_s"], 2),
        "rss_per_socket_kb": round(row["rss_per_socket_kb"], 1),
        "max_sockets": max_sockets,
        "first_error": first_error,
        "closed_1001": going_away,
        "open_at_sigterm": open_sockets,
        "all_closed_s": round(all_closed_s, 2),
        "shutdown_s": round(shutdown_s, 2),
        **(
            {
                "feed_sockets": feed_rows[0]["sockets"],
                "feed_session_sockets": feed_rows[1]["sockets"],
                "feed_events": feed_rows[0]["events"],
                "feed_p50_ms": round(feed_rows[0]["p50_ms"], 2),
                "feed_p99_ms": round(feed_rows[0]["p99_ms"], 2),
                "feed_lost": feed_rows[0]["lost"],
                "feed_errors": feed_rows[0]["errors"],
                "feed_api_errors": feed_rows[0]["api_errors"],
                "feed_session_p99_ms": round(feed_rows[1]["p99_ms"], 2),
                "feed_session_lost": feed_rows[1]["lost"],
                "feed_floor_p99_ms": round(feed_rows[2]["p99_ms"], 2),
                "feed_rss_per_socket_kb": round(feed_rows[0]["rss_per_socket_kb"], 1),
            }
            if feed_rows
            else {}
        ),
        **at_max,
    }


def print_table(result: dict) -> None:
    """Print the human-readable table."""
    print(
        f"realtime: 1 gunicorn worker ({result['worker_class']}), {result['rate']:g} events/s for "
        f"{result['duration']:g} s; {result['cpus']} CPUs, load average {result['load_avg_1m']} before the run; "
        f"malloc per-thread caches {'on' if result['malloc_tcache'] else 'off'}"
    )
    print(
        f"{'phase':<9} {'sockets':>7} {'events':>6} {'lost':>5} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} "
        f"{'max ms':>7} {'connect s':>9} {'RSS MB':>7} {'KB/sock':>7} {'threads':>7}"
    )
    for row in result["rows"]:
        timed = "p50_ms" in row
        print(
            f"{row['phase']:<9} {row['sockets']:>7} {row.get('events', ''):>6} "
            f"{row.get('lost', row.get('errors', '')):>5} "
            + (
                f"{row['p50_ms']:>7.1f} {row['p95_ms']:>7.1f} {row['p99_ms']:>7.1f} {row['max_ms']:>7.1f} "
                if timed
                else " " * 32
            )
            + (
                f"{row['connect_s']:>9.2f} {row['rss_mb']:>7.1f} {row['rss_per_socket_kb']:>7.1f} {row['threads']:>7}"
                if "rss_mb" in row
                else ""
            )
        )
    print(
        f"max sockets reached: {result['max_sockets']}"
        + (f" (first error: {result['first_error']})" if result["first_error"] else "")
        + f"; worker CPU during the latency phase: {result['worker_cpu_s']} s"
        + f"; SIGTERM with {result['open_at_sigterm']} sockets open: {result['closed_1001']} closed with 1001"
        + f" within {result['all_closed_s']} s, worker exit after {result['shutdown_s']} s"
    )
    most = result["max_sockets"]
    if f"client_cpu_s_{most}" in result:
        print(
            f"at {most} sockets: worker CPU {result[f'worker_cpu_s_{most}']} s, "
            f"bench client CPU {result[f'client_cpu_s_{most}']} s during the {result['duration']:g} s of events"
        )


def main() -> None:
    """Parse arguments, run, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker-class", default="gthread", choices=["gthread", "gevent"])
    parser.add_argument("--sockets", type=int, default=1000)
    parser.add_argument(
        "--rate",
        type=float,
        default=50.0,
        help="API calls per second (100/s is near one worker's API capacity on 2 vCPUs)",
    )
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of events")
    parser.add_argument("--max-sockets", type=int, default=5000)
    parser.add_argument("--step", type=int, default=1000)
    parser.add_argument(
        "--feed-sockets",
        type=int,
        default=1000,
        help="token-authenticated feed sockets beside the session ones (0: skip)",
    )
    parser.add_argument(
        "--malloc-tcache",
        action="store_true",
        help=f"keep glibc's per-thread malloc caches in the web process (default: GLIBC_TUNABLES={MALLOC_TUNABLES})",
    )
    parser.add_argument(
        "--no-compression", action="store_true", help="clients do not offer permessage-deflate (browsers always do)"
    )
    parser.add_argument(
        "--phase",
        default="all",
        choices=["all", "single", "multi"],
        help="single: the one-process phases above; multi: several web processes with routed events "
        "(tests/perf/realtime_multi.py); all: both, one after the other",
    )
    parser.add_argument("--processes", type=int, default=4, help="web processes in the multi phase")
    parser.add_argument("--multi-sockets", type=int, default=2500, help="signed-in sockets per web process")
    parser.add_argument("--multi-step", type=int, default=500, help="sockets added per web process per step")
    parser.add_argument("--multi-rate", type=float, default=100.0, help="badge events per second (multi)")
    parser.add_argument("--multi-duration", type=float, default=20.0, help="seconds of events (multi)")
    parser.add_argument("--multi-dump", help="write each event's and ping's times to this file (JSON lines)")
    args = parser.parse_args()
    result: dict = {"fd_limit": raise_fd_limit(), "cpus": os.cpu_count()}
    if args.phase in ("all", "single"):
        result.update(asyncio.run(run(args)))
        print_table(result)
    if args.phase in ("all", "multi"):
        from tests.perf.realtime_multi import print_multi, run_multi

        try:
            multi = run_multi(args)
        except Exception as exc:  # the single phases' figures still get their JSON line
            traceback.print_exc()
            result["multi_error"] = f"{type(exc).__name__}: {exc}"[:300]
        else:
            print_multi(multi)
            result.update(multi)
    hidden = ("rows", "steps", "nodes", "client_row", "floor_row", "calm_row", "busy_row")
    print(json.dumps({key: value for key, value in result.items() if key not in hidden}))
    if "multi_error" in result:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
