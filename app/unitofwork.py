"""One unit of work for every request and job: commit once, and only then enqueue and publish.

Code that changes rows registers what must follow the commit (an RQ job to enqueue, a badge event to
publish) on the open transaction with `after_commit(effect)`; the services that write the rows do
this, so no caller can forget it. Views and jobs end their work with `commit()`. When the transaction
commits, its effects are handed to the process's dispatcher; when it rolls back (an error, a refused
form, a request killed halfway) they are dropped with it, so Redis never hears of work that did not
happen. A savepoint rolled back drops only what was registered inside it.

The dispatcher is one thread per process. It takes whatever commits handed over since its last
round, merges effects of the same kind (the deliveries of many API requests become one RQ job per
queue and channel; badge events for many users go out in one pipeline) and runs them: a request never
waits for Redis, and busy moments make fewer, larger jobs. Losing effects loses nothing: committed
rows stay `pending` until a worker sends them (the sweeper enqueues what Redis never got), and every
socket recounts its badge when it reconnects. A job that wants its effects out before it ends (and
their counts: how many deliveries were enqueued, how many badge events went out) waits on the
Handoff that commit() returns.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import sqlalchemy as sa
from flask import Flask, current_app

from app import telemetry
from app.extensions import db, unit_connection

log = logging.getLogger(__name__)

# Commits' hand-offs taken per round: bounds one round's Redis pipelines when a backlog has built up.
MAX_PER_ROUND = 1000
EXIT_FLUSH_SECONDS = 5.0
EXTENSION_KEY = "hato_unitofwork"
PENDING_KEY = "hato.effects"  # session.info: effects registered in the open transaction
MARKS_KEY = "hato.effect_marks"  # session.info: where each open savepoint's effects begin
HANDOFF_KEY = "hato.handoff"  # session.info: what the last commit handed over


class Effect(ABC):
    """Work that must follow a commit. Effects with the same merge_key() run once, merged."""

    @abstractmethod
    def merge_key(self) -> Hashable:
        """Effects whose keys are equal can be merged into one run."""

    @abstractmethod
    def merge(self, other: Effect) -> Effect:
        """Return one effect doing the work of both."""

    @abstractmethod
    def run(self) -> object:
        """Do the work (talks to Redis); the result is shared by every effect merged into this one."""

    def count(self, result: object) -> dict[str, int]:
        """This effect's share of a run's result, for whoever waits on its hand-off."""
        return {}


class Handoff:
    """What one commit handed to the dispatcher; done once every effect has run (or failed)."""

    def __init__(self, effects: list[Effect], trace: dict[str, str] | None = None) -> None:
        self.effects = effects
        self.trace = trace or {}  # the committing request's or job's trace context: its effects' spans join it
        self.counts: Counter[str] = Counter()
        self._done = threading.Event()

    def finish(self) -> None:
        """Mark the hand-off done (the dispatcher calls this)."""
        self._done.set()

    def wait(self, timeout: float = 30.0) -> Counter[str]:
        """Wait until the effects ran; return their counts (empty for those that could not run)."""
        self._done.wait(timeout)
        return self.counts


NOTHING = Handoff([])
NOTHING.finish()


# --- the transaction side ------------------------------------------------------------------------


class Unit:
    """A unit of work on a connection of its own (on_connection()): statements run there without the ORM's
    session; a session that is used meanwhile joins the same transaction, and commit() commits it."""

    def __init__(self) -> None:
        self._connection: sa.Connection | None = None
        self._owned = True
        self._transaction: sa.Transaction | None = None
        self.effects: list[Effect] = []

    def connection(self) -> sa.Connection:
        """The connection, in a transaction (checked out and begun on first use, begun again after a commit)."""
        if self._connection is None:
            bind = db.engine
            # The app's bind is an engine, except where an embedding application (or the test suite) gave it a
            # connection in an open transaction: the unit then runs in a savepoint of it, and leaves it open.
            self._owned = isinstance(bind, sa.Engine)
            self._connection = bind.connect() if self._owned else bind
        if self._transaction is None or not self._transaction.is_active:
            self._transaction = self._connection.begin() if self._owned else self._connection.begin_nested()
        return self._connection

    def commit(self) -> Handoff:
        """Commit the transaction (if one is open), then hand its effects to the dispatcher."""
        if self._transaction is not None and self._transaction.is_active:
            self._transaction.commit()
        effects, self.effects = self.effects, []
        return dispatcher().submit(effects, telemetry.carrier()) if effects else NOTHING

    def rollback(self) -> None:
        """Roll back the open transaction (if any) and drop its effects."""
        self.effects = []
        if self._transaction is not None and self._transaction.is_active:
            self._transaction.rollback()

    def close(self) -> None:
        """Roll back whatever was not committed and give the connection back to the pool."""
        try:
            self.rollback()
        finally:
            if self._connection is not None and self._owned:
                self._connection.close()


_unit: ContextVar[Unit | None] = ContextVar("hato_unit", default=None)


@contextmanager
def on_connection() -> Iterator[Unit | None]:
    """Run the block as a unit of work on a connection of its own, not the ORM session's: for a hot path whose
    statements go through app/driversql.py, it saves the session's bookkeeping (its begin, commit and close
    cost more Python than the statements themselves). The session still works inside: it joins the unit's
    transaction (app/extensions.py Session), and commit() and rollback() below end both.

    When the session already holds a transaction (something read before the block), the block simply runs in
    it, as everywhere else: two transactions in one unit of work would not be one unit. Yields the Unit, or None.
    Used by the API's idempotent calls (app/api/idempotency.py), which speak for an API key, never a member:
    app/replicas.py notes a member's writes from the session's commits, which a unit without a session skips.
    """
    if _unit.get() is not None or _open_session() is not None:
        yield None
        return
    unit = Unit()
    tokens = _unit.set(unit), unit_connection.set(unit.connection)
    try:
        yield unit
    finally:
        unit_connection.reset(tokens[1])
        _unit.reset(tokens[0])
        try:
            session = _open_session()
            if session is not None:
                session.rollback()  # a joined session lets go of the connection before it goes back (uncommitted)
        finally:
            unit.close()


def _open_session():
    """The session, if one was created and holds a transaction (inside a unit: joined to the unit's connection)."""
    if not db.session.registry.has():
        return None
    session = db.session()
    return session if session.in_transaction() else None


def after_commit(effect: Effect) -> None:
    """Run effect after the current transaction commits; it is dropped if the transaction rolls back."""
    unit = _unit.get()
    if unit is not None and _open_session() is None:
        unit.effects.append(effect)
        return
    session = db.session()
    if session.get_transaction() is None:
        session.begin()  # tie the effect to a transaction even before its first statement (no connection yet)
    session.info.setdefault(PENDING_KEY, []).append(effect)


def commit() -> Handoff:
    """Commit the request's or job's transaction: the one way to end a unit of work that wrote rows.

    Its effects go to the dispatcher; the returned Handoff says when they ran and what they counted.
    """
    unit = _unit.get()
    if unit is not None:
        session = _open_session()
        if session is not None:
            session.commit()  # flushes; a joined session does not commit: its effects move to the unit
        return unit.commit()
    session = db.session()
    session.commit()
    return session.info.pop(HANDOFF_KEY, NOTHING)


def rollback() -> None:
    """Roll back the request's or job's transaction (the unit's and the session's) and drop its effects."""
    unit = _unit.get()
    if unit is None:
        db.session.rollback()
        return
    try:
        if db.session.registry.has():
            db.session.rollback()
    finally:
        unit.rollback()


def flush() -> None:
    """Flush the session's pending objects before a statement that bypasses it (app/driversql.py), without
    creating a session when none exists."""
    if db.session.registry.has():
        db.session.flush()


# Session events. For the root transaction: after_commit hands its effects over; after_transaction_end
# (which also follows a rollback, a close or a removed session) drops whatever was not handed over.
# A savepoint records where its effects begin, and a rolled-back savepoint cuts them off there.


def _handed_over(session) -> None:
    effects = session.info.pop(PENDING_KEY, None)
    session.info.pop(MARKS_KEY, None)
    unit = _unit.get()
    if unit is not None:  # a session joined to a unit's transaction: the unit commits, then hands them over
        unit.effects.extend(effects or ())
        return
    session.info[HANDOFF_KEY] = dispatcher().submit(effects, telemetry.carrier()) if effects else NOTHING


def _savepoint_started(session, transaction) -> None:
    if transaction.nested:
        session.info.setdefault(MARKS_KEY, {})[id(transaction)] = len(session.info.get(PENDING_KEY, ()))


def _rolled_back(session, previous_transaction) -> None:
    if previous_transaction.nested:
        mark = session.info.get(MARKS_KEY, {}).pop(id(previous_transaction), None)
        if mark is not None:
            del session.info.get(PENDING_KEY, [])[mark:]


def _ended(session, transaction) -> None:
    if not transaction.nested and transaction.parent is None:
        session.info.pop(PENDING_KEY, None)
        session.info.pop(MARKS_KEY, None)


LISTENERS = (
    ("after_commit", _handed_over),
    ("after_transaction_create", _savepoint_started),
    ("after_soft_rollback", _rolled_back),
    ("after_transaction_end", _ended),
)


def init_app(app: Flask) -> None:
    """Listen to the app's sessions (once per process: the listeners are on the session class)."""
    for name, listener in LISTENERS:
        if not sa.event.contains(db.session, name, listener):
            sa.event.listen(db.session, name, listener)


# --- the dispatcher ------------------------------------------------------------------------------


class Dispatcher:
    """The app's queue of hand-offs and the thread that runs them (started on first use, per process)."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self._queue: queue.SimpleQueue[Handoff] = queue.SimpleQueue()
        self._idle = threading.Condition()
        self._unsent = 0
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    def submit(self, effects: list[Effect], trace: dict[str, str] | None = None) -> Handoff:
        """Queue a committed transaction's effects (and the trace they belong to) for the dispatcher thread."""
        handoff = Handoff(list(effects), trace)
        try:
            self._ensure_thread()
        except RuntimeError as exc:  # no new threads (the interpreter is exiting): the sweeper enqueues
            log.warning("post-commit hand-off skipped: %s", exc)
            handoff.finish()
            return handoff
        with self._idle:
            self._unsent += 1
        self._queue.put(handoff)
        return handoff

    def wait_idle(self, timeout: float) -> bool:
        """Wait until everything submitted so far ran (or was given up on); False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._unsent == 0, timeout)

    def _ensure_thread(self) -> None:
        # A forked child (gunicorn worker) inherits the object but not the thread: start its own.
        if self._pid == os.getpid() and self._thread is not None:
            return
        with self._idle:
            if self._pid != os.getpid() or self._thread is None:
                thread = threading.Thread(target=self._run, name="hato-unitofwork", daemon=True)
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
                    run_effects(batch)
            except Exception:  # the thread must outlive any one round; the sweeper covers what was lost
                log.exception("post-commit hand-off of %d commits failed", len(batch))
            finally:
                for handoff in batch:
                    handoff.finish()
                with self._idle:
                    self._unsent -= len(batch)
                    self._idle.notify_all()


def run_effects(batch: list[Handoff]) -> None:
    """Merge the batch's effects by kind, run each merged effect once, and credit each hand-off its share."""
    groups: dict[Hashable, list[tuple[Handoff, Effect]]] = {}
    for handoff in batch:
        for effect in handoff.effects:
            groups.setdefault(effect.merge_key(), []).append((handoff, effect))
    for members in groups.values():
        merged = members[0][1]
        for _, effect in members[1:]:
            merged = merged.merge(effect)
        try:
            result = _run_traced(merged, [handoff.trace for handoff, _ in members if handoff.trace])
        except Exception:  # one kind of effect failing must not stop the others
            log.exception("post-commit %s failed", type(merged).__name__)
            continue
        for handoff, effect in members:
            handoff.counts.update(effect.count(result))


def _run_traced(effect: Effect, traces: list[dict[str, str]]) -> object:
    """Run effect in a span of the first commit's trace that has one, linked to the others' (the jobs it
    enqueues carry that span on: app/queueing.py); without any, no span."""
    if not traces:
        return effect.run()
    with telemetry.span("hato.after_commit", traces[0], links=traces[1:], **{"hato.effect": type(effect).__name__}):
        return effect.run()


def dispatcher() -> Dispatcher:
    """Return the current app's dispatcher, creating it on first use."""
    app = current_app._get_current_object()
    found = app.extensions.get(EXTENSION_KEY)
    if found is None:
        found = app.extensions.setdefault(EXTENSION_KEY, Dispatcher(app))
    return found


def wait_idle(app: Flask, timeout: float = 5.0) -> bool:
    """Wait until app's hand-offs so far ran (tests, shutdown); True at once if it has none."""
    found = app.extensions.get(EXTENSION_KEY)
    return found is None or found.wait_idle(timeout)
