"""What the delivery engine needs from a kind of outbound row: its table, behind one small interface.

Three kinds go out through app/delivery/engine.py: notification deliveries (the ledger,
app/delivery/ledger.py), digest e-mails (digest_runs, app/digests/source.py) and webhook events (the
webhook outbox, app/webhooks/outbox.py). Each keeps its own table and its own rules of what may go
out; the engine does everything else the same way for all of them: the claim's lease, targets,
kill switches, routing (token bucket, breaker, failover), the sends in lanes, the fence, retries with
jitter, the DLQ and expiry.

A source's writes inside the claim's transaction (skips, deferrals) go through the session; the
records of tries go through the send ledger's autocommit connection (app/delivery/service.py
send_ledger) so each is durable the moment it is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from app.delivery.policy import Plan
from app.delivery.sending import Result
from app.providers import Message, Provider


@dataclass(frozen=True)
class Claim:
    """The rows one job claimed and the lease they share (also the fencing token)."""

    ids: list[int]
    lease: datetime


@dataclass
class Batch:
    """A claimed batch as its source loaded it: the rows, and what the source needs again to render them."""

    rows: list
    context: Any = None


@dataclass(frozen=True)
class Try:
    """One finished try and the state the engine chose for its row (sent | pending | failed)."""

    result: Result
    status: str
    error_kind: str | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class Recheck:
    """What the re-check before sending may look at besides the rows themselves."""

    configured: bool  # the channel has at least one provider
    now: datetime
    targets: Mapping[int, tuple]  # row id -> where the channel sends it (empty when it has nowhere)
    config: Mapping
    online: frozenset[int] = field(default_factory=frozenset)


class Source(Protocol):
    """One kind of outbound row (see the module docstring)."""

    name: str
    # Tries written per record statement: 1 keeps "at most one sent and not recorded" (the fence);
    # more is at-least-once, for receivers that drop copies by id (webhooks).
    record_every: int

    def claim(self, channel: str, ids: Sequence[int], lease_seconds: float) -> Claim | None:
        """Lease the due rows of ids on channel (SKIP LOCKED); None when none were free."""

    def load(self, claim: Claim, channel) -> Batch:
        """The claimed rows with everything the re-check and the rendering need."""

    def recheck(self, batch: Batch, channel, facts: Recheck) -> Plan:
        """What to do with each row now: skip (with a reason), defer (until), hold (until) or send."""

    def write_plan(self, plan: Plan, claim: Claim, provider: str) -> None:
        """Record the plan's skips, deferrals and holds in the session (the engine commits)."""

    def render(self, row, batch: Batch, channel, provider: Provider, targets: tuple, config: Mapping) -> Message:
        """The provider Message for row (raises app.delivery.rendering.RenderError)."""

    def record(self, conn, tries: list[Try], lease: datetime) -> None:
        """Write the tries on conn (the send ledger) in one statement, then enqueue what follows from them."""

    def hold(self, conn, waits: list[tuple[int, datetime]], lease: datetime) -> None:
        """Return claimed rows to pending until their times without a try; DELIVERY_MAX_AGE counts from the first.

        conn is the send ledger's connection, or the session before the sends begin.
        """

    def release(self, conn, ids: list[int], lease: datetime) -> None:
        """Return claimed rows the batch did not get to (its lease runs out) to pending, no try counted."""
