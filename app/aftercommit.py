"""Post-commit Redis work of API requests (delivery jobs, badge events), sent by one thread per process.

A request hands its work over only after its commit, and the committed rows are the truth: if Redis
is down, or the process dies before the thread sent it, the sweeper enqueues the pending deliveries
and sockets recount their badge when they reconnect. So the request does not wait for Redis: it puts
one tuple on an in-process queue (microseconds) and answers. The thread takes whatever has piled up
since its last round and sends it together: alone, a request's work goes out at once; under load,
many requests share one RQ job per queue and channel and one pipeline of badge events, which costs
less per request than each request talking to Redis itself.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
from collections import defaultdict
from dataclasses import dataclass

from flask import Flask, current_app

from app.queueing import enqueue_deliveries
from app.realtime.publish import publish_badge

log = logging.getLogger(__name__)

# Requests' hand-offs sent per round: bounds one round's pipelines when a backlog has built up.
MAX_PER_ROUND = 1000
EXIT_FLUSH_SECONDS = 5.0
EXTENSION_KEY = "hato_aftercommit"


@dataclass(frozen=True)
class Handoff:
    """One request's post-commit work."""

    priority: str
    pending: dict[str, list[int]]
    badge_user_ids: list[int]
    toast_title: str | None


class Dispatcher:
    """The app's queue of hand-offs and the thread that sends them (started on first use, per process)."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self._queue: queue.SimpleQueue[Handoff] = queue.SimpleQueue()
        self._idle = threading.Condition()
        self._unsent = 0
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    def submit(self, handoff: Handoff) -> None:
        """Queue a committed request's work for the sending thread."""
        try:
            self._ensure_thread()
        except RuntimeError as exc:  # no new threads (the interpreter is exiting): the sweeper enqueues
            log.warning("post-commit hand-off skipped: %s", exc)
            return
        with self._idle:
            self._unsent += 1
        self._queue.put(handoff)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until everything submitted so far was sent (or given up on); False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._unsent == 0, timeout)

    def _ensure_thread(self) -> None:
        # A forked child (gunicorn worker) inherits the object but not the thread: start its own.
        if self._pid == os.getpid() and self._thread is not None:
            return
        with self._idle:
            if self._pid != os.getpid() or self._thread is None:
                thread = threading.Thread(target=self._run, name="hato-aftercommit", daemon=True)
                thread.start()  # first: a thread that failed to start must not count as running
                self._thread, self._pid = thread, os.getpid()
                atexit.register(self.wait_idle, EXIT_FLUSH_SECONDS)

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < MAX_PER_ROUND:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                with self.app.app_context():
                    send(batch)
            except Exception:  # the thread must outlive any one round; the sweeper covers what was lost
                log.exception("post-commit hand-off of %d requests failed", len(batch))
            finally:
                with self._idle:
                    self._unsent -= len(batch)
                    self._idle.notify_all()


def send(batch: list[Handoff]) -> None:
    """Enqueue the batch's deliveries per (queue, channel) and publish its badge events per toast."""
    deliveries: dict[tuple[str, str], list[int]] = defaultdict(list)
    badges: dict[str | None, list[int]] = defaultdict(list)
    for handoff in batch:
        for channel, ids in handoff.pending.items():
            deliveries[(handoff.priority, channel)].extend(ids)
        badges[handoff.toast_title].extend(handoff.badge_user_ids)
    for (priority, channel), ids in deliveries.items():
        if ids:
            enqueue_deliveries(priority, channel, ids)  # logs and returns False when Redis is down
    for title, user_ids in badges.items():
        if user_ids:
            publish_badge(user_ids, toast={"title": title} if title else None)


def dispatcher() -> Dispatcher:
    """Return the current app's dispatcher, creating it on first use."""
    app = current_app._get_current_object()
    found = app.extensions.get(EXTENSION_KEY)
    if found is None:
        found = app.extensions.setdefault(EXTENSION_KEY, Dispatcher(app))
    return found


def wait_idle(app: Flask, timeout: float = 5.0) -> bool:
    """Wait until app's hand-offs so far were sent (tests, shutdown); True at once if it has none."""
    found = app.extensions.get(EXTENSION_KEY)
    return found is None or found.wait_idle(timeout)


def after_commit(
    priority: str, pending: dict[str, list[int]], badge_user_ids: list[int], toast_title: str | None = None
) -> None:
    """Hand a committed request's delivery jobs and badge events to the sending thread."""
    if any(pending.values()) or badge_user_ids:
        dispatcher().submit(Handoff(priority, pending, badge_user_ids, toast_title))
