"""Ingest load for benchmarks: POST /v1/notifications from threads, closed-loop or open-loop, in its own process.

Closed-loop (rate None): every thread sends its next request as soon as the last one is answered, to
find the ceiling. Open-loop (a rate): request i is due at start + i / rate whatever the answers before it
did, so a slow server makes requests wait (and that wait counts in their latency) instead of quietly
lowering the rate. Each request has one recipient, a fresh Idempotency-Key and dedupe key, and the
title `<prefix>-<seq>` that the badge toast and the e-mail carry. It runs in a spawned process so that
its CPU does not delay the caller's event loop; both clocks it records (time.perf_counter, which is
CLOCK_MONOTONIC on Linux, and time.time) compare across processes on one machine.
"""

from __future__ import annotations

import asyncio
import http.client
import itertools
import json
import multiprocessing
import queue
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field

FAILURES_KEPT = 5
MAX_LAG_SECONDS = 30.0  # open-loop: a request this late is given up (counted as an error), so a run stays bounded


@dataclass
class Accepted:
    """One 202: which notification, when it was answered (both clocks), how long the request took."""

    recipient: str
    notification_id: int
    at_monotonic: float
    at_wall: float
    latency_ms: float


@dataclass
class LoadResult:
    """What one load run did: the accepted requests by sequence number, the errors, the time it took."""

    accepted: dict[int, Accepted] = field(default_factory=dict)
    errors: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rps(self) -> float:
        return len(self.accepted) / self.seconds if self.seconds else 0.0


def drive(
    ports: list[int],
    key: str,
    type_: str,
    recipients: list[str],
    prefix: str,
    seconds: float,
    connections: int,
    max_requests: int,
    rate: float | None = None,
    first_seq: int = 0,
) -> LoadResult:
    """Send requests from `connections` threads (keep-alive connections), bounded in time and count.

    Request i goes to ports[i % len(ports)] for recipients[i % len(recipients)].
    """
    result = LoadResult()
    lock = threading.Lock()
    tickets = itertools.count()
    total = min(max_requests, int(rate * seconds)) if rate else max_requests
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    begin = time.perf_counter()
    deadline = begin + seconds  # closed-loop only: an open-loop run ends with its last ticket

    def worker() -> None:
        conns: dict[int, http.client.HTTPConnection] = {}
        while (i := next(tickets)) < total:
            due = begin + i / rate if rate else time.perf_counter()
            if not rate and due >= deadline:
                break
            if rate and time.perf_counter() - due > MAX_LAG_SECONDS:
                _failed(result, lock, f"not sent: the server is more than {MAX_LAG_SECONDS} s behind the schedule")
                continue
            if (delay := due - time.perf_counter()) > 0:
                time.sleep(delay)
            seq, port = first_seq + i, ports[i % len(ports)]
            recipient = recipients[i % len(recipients)]
            body = json.dumps(
                {"type": type_, "recipient": recipient, "title": f"{prefix}-{seq}", "dedupe_key": f"{prefix}:{seq}"}
            )
            started = time.perf_counter()
            try:
                status, data = _post(conns, port, body, {**headers, "Idempotency-Key": uuid.uuid4().hex})
            except (OSError, http.client.HTTPException) as exc:
                _failed(result, lock, f"{type(exc).__name__}: {exc}")
                continue
            now, wall = time.perf_counter(), time.time()
            if status != 202:
                _failed(result, lock, f"HTTP {status}: {data[:200]!r}")
                continue
            notification_id = json.loads(data)["results"][0]["notification_id"]
            # Open-loop latency runs from when the request was due: time spent waiting for a free thread counts.
            latency = (now - (due if rate else started)) * 1000
            with lock:
                result.accepted[seq] = Accepted(recipient, notification_id, now, wall, latency)
        for conn in conns.values():
            conn.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + MAX_LAG_SECONDS + 60)
    result.seconds = time.perf_counter() - begin
    return result


def _post(conns: dict[int, http.client.HTTPConnection], port: int, body: str, headers: dict) -> tuple[int, bytes]:
    """POST on this thread's keep-alive connection to port; return (status, body).

    A kept-alive connection the server has closed meanwhile (its idle timeout) fails on first use:
    that one request is sent again once on a new connection, as HTTP clients do; the same
    Idempotency-Key makes sure it is never accepted twice.
    """
    reused = port in conns
    try:
        return _send(conns, port, body, headers)
    except (OSError, http.client.HTTPException):
        if not reused:
            raise
    return _send(conns, port, body, headers)


def _send(conns: dict[int, http.client.HTTPConnection], port: int, body: str, headers: dict) -> tuple[int, bytes]:
    conn = conns.get(port) or conns.setdefault(port, http.client.HTTPConnection("127.0.0.1", port, timeout=30))
    try:
        conn.request("POST", "/v1/notifications", body, headers)
        response = conn.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException):
        conns.pop(port).close()
        raise


def _failed(result: LoadResult, lock: threading.Lock, what: str) -> None:
    with lock:
        result.errors += 1
        if len(result.failures) < FAILURES_KEPT:
            result.failures.append(what)


def _child(out, kwargs: dict) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the parent's to handle: it kills us
    out.put(drive(**kwargs))


async def drive_in_process(timeout: float, **kwargs) -> LoadResult:
    """Run drive(**kwargs) in a spawned process without blocking the event loop; at most timeout seconds.

    Cancelling (Ctrl-C, SIGTERM) or timing out kills the process at once.
    """
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    proc = spawn.Process(target=_child, args=(out, kwargs), daemon=True)
    proc.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                return out.get_nowait()  # before join: the child exits only once its result is read
            except queue.Empty:
                pass
            if not proc.is_alive() and out.empty():
                raise RuntimeError(f"the load generator exited with {proc.exitcode} and no result")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the load generator gave no result within {timeout:.0f} s")
            await asyncio.sleep(0.1)
    finally:
        proc.join(2)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
