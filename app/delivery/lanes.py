"""The delivery engine's concurrent sends: up to a width of one batch's rows at once, a lane per scope.

The engine (app/delivery/engine.py) hands each row to Lanes with its send and the recorder of its batch; a
lane asks its scope's gate (a push service, a webhook endpoint) before each send, and the fence keeps a
SIGKILL to at most one message sent and not recorded.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from typing import Protocol

from flask import current_app

from app import telemetry
from app.delivery import sending
from app.providers import Fence, FenceBroken, Provider, fenced, point_of_no_return
from app.providers.routing import Gate, Router

# A lane re-asks its scope's gate after this long even while every send works (another worker's
# failures may have opened its breaker meanwhile).
GATE_RECHECK_SECONDS = 1.0


class Sends(Protocol):
    """One batch's send of a row (the engine's): its provider, the scope's gate if any, prepare and run."""

    provider: Provider
    gate: Gate | None

    def prepare(self, row) -> sending.Prepared: ...

    def run(self, row, prepared: sending.Prepared) -> sending.Result: ...


class Records(Protocol):
    """The batch's ledger writer (the engine's): a try's outcome, rows held until a time, rows released."""

    def record(self, result: sending.Result) -> str: ...

    def hold(self, waits: list[tuple[int, datetime]]) -> None: ...

    def release(self, ids: list[int]) -> None: ...


_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (process id, width, pool): a forked child makes its own


def _send_pool(width: int) -> ThreadPoolExecutor:
    global _pool
    if _pool is None or _pool[:2] != (os.getpid(), width):
        _pool = (os.getpid(), width, ThreadPoolExecutor(width, thread_name_prefix="hato-send"))
    return _pool[2]


class Lanes:
    """Up to width sends of one batch at once, recorded on the batch's ledger.

    This thread keeps the batch's routing (the Router is not shared) and its database session; a pool
    thread runs sends and their records. Rows with a key (their scope) queue behind each other in one
    lane, which asks the scope's gate before each send. With fences, the fence is taken at a send's
    point of no return (before the whole send for a provider that does not mark it) and held until its
    record has committed, so a SIGKILL finds at most one message sent and not recorded.
    """

    def __init__(self, width: int, recorder: Records, router: Router, states: dict[str, int], fences: bool,
                 stop_at: float, inline: bool = False) -> None:  # fmt: skip
        self.width, self.recorder, self.router, self.states, self.stop_at = width, recorder, router, states, stop_at
        self.app = current_app._get_current_object()
        self.fence = Fence() if fences else None
        self.inline = inline  # run each lane in this thread (a batch with one key: nothing to overlap)
        self.pool = None if inline else _send_pool(width)
        self.running: dict[Future, object] = {}
        self.queues: dict[object, deque] = {}  # key -> rows waiting behind the lane running for that key
        self.queues_lock = threading.Lock()
        self.checked_at: dict[object, float | None] = {}  # key -> when its gate was last asked (within this batch)

    def submit(self, key, row, work: Sends, prepared: sending.Prepared | None = None) -> None:
        """Send row on the lane of key (None: a lane of its own) once the lane is free."""
        if self.inline:
            self._count(self._lane(key, row, work, prepared))
            return
        with self.queues_lock:
            if key is not None and key in self.queues:
                self.queues[key].append((row, work, prepared))
                return
            if key is not None:
                self.queues[key] = deque()
        while len(self.running) >= self.width:
            self._settle(wait(self.running, return_when=FIRST_COMPLETED).done)
        # The lane's sends and records belong to this job's span (tracing on), though they run on a pool thread.
        self.running[self.pool.submit(telemetry.bind(self._lane), key, row, work, prepared)] = key

    def settle_done(self) -> None:
        """Report the sends that have finished, without waiting for the others."""
        done = {future for future in self.running if future.done()}
        if done:
            self._settle(done)

    def finish(self) -> None:
        """Wait for every lane, then report them (the first error raised in a lane is raised here)."""
        while self.running:
            self._settle(wait(self.running).done)

    def _settle(self, done: set[Future]) -> None:
        for future in done:
            self.running.pop(future, None)
        errors = [future.exception() for future in done if future.exception() is not None]
        errors.sort(key=lambda error: isinstance(error, FenceBroken))  # the cause first, not its consequences
        if errors:  # the other lanes finish and are counted before the error goes up
            rest = set(self.running)
            self.running.clear()
            wait(rest)
            done = done | rest
        for future in done:
            if future.exception() is None:
                self._count(future.result())
        if errors:
            raise errors[0]

    def _count(self, finished: list) -> None:
        """Count a lane's rows and tell the router how their sends went."""
        for provider, result, state, gated in finished:
            if result is None:  # held (the scope was paused or failing) or released: no try spent
                self.states[state] = self.states.get(state, 0) + 1
                continue
            if gated:  # the lane told the scope itself: the provider only hears that it works
                if result.outcome == "sent":
                    self.router.report(provider, "sent")
            else:
                self.router.report(provider, result.outcome, result.retry_after, result.outcomes)
            self.states[state] = self.states.get(state, 0) + 1

    def _lane(self, key, row, work: Sends, prepared) -> list:
        """Run row, then every row queued behind it for key; return (provider, result, state, gated) per row."""
        finished = []
        with contextlib.nullcontext() if self.inline else self.app.app_context():
            checked_at = self.checked_at.get(key)
            while True:
                if time.monotonic() > self.stop_at:
                    finished += self._end_lane(key, row, None)
                    return finished
                fresh = False
                if work.gate is not None:
                    until, fresh = self._held_until(work.gate, checked_at)
                    if until:
                        finished += self._end_lane(key, row, until)
                        return finished
                    if fresh:
                        checked_at = self.checked_at[key] = time.monotonic()
                result, state = self._one(row, work, prepared)
                if work.gate is not None and (result.outcome != "sent" or fresh):
                    # A success right after a look may be a half-open breaker's probe: it closes it. The ones
                    # after it change nothing, so they cost no round trip.
                    self.router.report_gate(work.gate, result.outcome, result.retry_after)
                if result.outcome != "sent":
                    checked_at = self.checked_at[key] = None  # after a failure, ask the gate again before the next
                finished.append((work.provider, result, state, work.gate is not None))
                with self.queues_lock:
                    queue = self.queues.get(key)
                    if not queue:
                        self.queues.pop(key, None)
                        return finished
                    row, work, prepared = queue.popleft()

    def _held_until(self, gate: Gate, checked_at: float | None) -> tuple[float, bool]:
        """(when the scope may be tried again, 0.0: now; whether the gate was asked just now)."""
        if checked_at is not None and time.monotonic() - checked_at < GATE_RECHECK_SECONDS:
            return 0.0, False
        return self.router.gate_held_until(gate), True

    def _end_lane(self, key, row, until: float | None) -> list:
        """This row and those queued behind it wait, no try spent: until then (the scope is paused or failing),
        or released (None: the batch's lease is running out)."""
        with self.queues_lock:
            queued = self.queues.pop(key, deque()) if key is not None else deque()
        rows = [row] + [item[0] for item in queued]
        if until is None:
            self.recorder.release([r.id for r in rows])
            return [(None, None, "released", True) for _ in rows]
        self.recorder.hold([(r.id, datetime.fromtimestamp(until, UTC)) for r in rows])
        return [(None, None, "held", True) for _ in rows]

    def _one(self, row, work: Sends, prepared) -> tuple[sending.Result, str]:
        with fenced(self.fence):
            if self.fence is not None and not getattr(work.provider, "fences", False):
                point_of_no_return()  # the provider does not say where its point is: the whole send is it
            result = work.run(row, prepared if prepared is not None else work.prepare(row))
            point_of_no_return()  # a failed send records under the fence too: one writer on the ledger
            state = self.recorder.record(result)
        return result, state
