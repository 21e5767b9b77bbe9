"""The delivery engine: every outbound thing goes through these steps, whatever its channel and table.

claim → re-check → route → render → send → record → retry / DLQ, for notification deliveries on every
channel, digest e-mails and webhook events alike. What differs lives elsewhere: a channel
(app/delivery/channels) holds its targets, skip reasons, message building and what a provider's answer
means; a source (app/delivery/source.py) holds its table: the ledger, digest_runs or the webhook outbox.

- claim: a SKIP LOCKED lease on due pending rows; a re-run (or a duplicate job) claims nothing twice.
- re-check: the kill switches first (a paused channel, or every provider of it paused, holds the rows
  without a try until it is resumed; DELIVERY_MAX_AGE still expires them), then the source's own rules
  (preferences, suppression, quiet hours, escalation, caps…) with the channel's targets and skip reasons.
- route: app/providers/routing.py, the channel's providers that are not paused, in failover order, each
  behind its token bucket and breaker; "wait" returns the rest of the batch to pending without a try.
  A target's own scope (a push service, a webhook endpoint) has its own pause and breaker.
- send: concurrent lanes where the channel allows them (app/delivery/lanes.py; the time of a send is mostly
  waiting on the other side). For a source that records each try on its own (record_every 1), the fence
  (app/providers/base.py) keeps "at most one message past its point of no return and not yet recorded"
  true for the whole worker: a SIGKILL re-sends at most that one. Rows of one scope (a webhook
  endpoint) share a lane, so a slow or failing endpoint holds one lane, never the others.
- record: on the send ledger's autocommit connection, one statement per try (or per group of tries
  for an at-least-once source), the lease as fencing token; transient failures come back after full
  jitter backoff, permanent ones and the last try go to the DLQ.
drain() runs batches off a coalesced list of live deliveries (app/queueing.py): it yields the worker
after DELIVERY_DRAIN_SECONDS, or as soon as a higher-priority queue has work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime

from app import backpressure, telemetry
from app.delivery import policy, sending, service, switches
from app.delivery.channels import Channel, channel_for
from app.delivery.lanes import Lanes
from app.delivery.source import Batch, Claim, Recheck, Source, Try
from app.extensions import db, redis
from app.providers import Provider
from app.providers.routing import Gate, Route, Router
from app.queueing import higher_work_waiting, start_drain, take_coalesced, wake_drain
from app.unitofwork import commit


def backoff_from(config: Mapping) -> policy.Backoff:
    """The retry schedule from RETRY_BASE_SECONDS / RETRY_CAP_SECONDS / RETRY_MAX_ATTEMPTS."""
    return policy.Backoff(config["RETRY_BASE_SECONDS"], config["RETRY_CAP_SECONDS"], config["RETRY_MAX_ATTEMPTS"])


def deliver_batch(channel_name: str, ids: list[int], config: Mapping) -> dict:
    """Deliver a batch of channel_name's rows from the channel's own source; return the counts."""
    channel = channel_for(channel_name)
    return deliver(channel.source, channel, ids, config)


def deliver(source: Source, channel: Channel, ids: list[int], config: Mapping) -> dict:
    """Claim, re-check, route, render, send and record a batch of source's rows on channel; return the counts."""
    lease_seconds = float(config["DELIVERY_LEASE_SECONDS"])
    # Stop taking new rows LEASE_MARGIN_SECONDS before the lease ends, so the sweeper never hands a row
    # we are still working on to another worker (app/config.py refuses a lease at or below the margin).
    deadline = time.monotonic() + lease_seconds - float(config["LEASE_MARGIN_SECONDS"])
    try:
        claim = source.claim(channel.name, sorted({int(i) for i in ids}), lease_seconds)
        commit()
        if claim is None:
            return {"claimed": 0}
        providers = channel.providers(config)
        paused = switches.paused()
        open_providers = [p for p in providers if not paused.holds(channel.name, p.name)]
        batch = source.load(claim, channel)
        now = datetime.now(UTC)
        targets: Mapping[int, tuple] = {}
        paused_now = paused.holds(channel.name) or bool(providers and not open_providers)
        if paused_now:
            # Paused by an operator: the rows wait without a try until the channel (or a provider) is resumed.
            plan = policy.Plan(hold=[(row, policy.UNTIL_RESUMED) for row in batch.rows])
        else:
            targets = channel.targets(batch.rows)
            plan = source.recheck(batch, channel, Recheck(bool(providers), now, targets, config))
        source.write_plan(plan, claim, open_providers[0].name if open_providers else channel.name)
        commit()
        counts = {"claimed": len(claim.ids)}
        held_as = "paused" if paused_now else "held"
        for name, group in (
            ("skipped", plan.skip),
            ("sent", plan.done),
            ("deferred", plan.defer),
            (held_as, plan.hold),
        ):
            if group:
                counts[name] = len(group)
        if plan.send:
            # A paused part of a provider (APNs within push): its targets wait until it is resumed.
            parts = {s.provider: policy.UNTIL_PART_RESUMED.timestamp() for s in paused.of(channel.name) if s.provider}
            # Breakers and buckets live in the realtime store (a Redis or a Redis Cluster), never RQ's REDIS_URL.
            router = Router(open_providers, config, redis.realtime(config), paused_parts=parts)
            sent = _send_all(source, channel, batch, plan.send, router, claim, deadline, config, targets)
            for name, count in sent.items():
                counts[name] = counts.get(name, 0) + count
        return counts
    except BaseException:
        db.session.rollback()
        raise


def drain(queue_name: str, channel_name: str, config: Mapping) -> dict:
    """Deliver the ids coalesced on (queue, channel) batch by batch; return the summed counts."""
    start_drain(queue_name, channel_name)  # first: a commit after this wakes a new drain for its ids
    deadline = time.monotonic() + float(config["DELIVERY_DRAIN_SECONDS"])
    totals: dict[str, int] = {"batches": 0}
    while ids := take_coalesced(queue_name, channel_name, int(config["DELIVERY_BATCH_SIZE"])):
        for name, count in deliver_batch(channel_name, ids, config).items():
            totals[name] = totals.get(name, 0) + count
        totals["batches"] += 1
        if time.monotonic() > deadline or higher_work_waiting(queue_name):
            totals["handed_over"] = int(wake_drain(queue_name, channel_name))  # the rest: a fresh job, behind
            break
    return totals


def _send_all(source: Source, channel: Channel, batch: Batch, rows: list, router: Router, claim: Claim,
              deadline: float, config: Mapping, targets: Mapping[int, tuple]) -> dict:  # fmt: skip
    backoff = backoff_from(config)
    states: dict[str, int] = {}
    held: list[tuple[int, datetime]] = []
    width = channel.lanes(config)
    fences = source.record_every == 1
    if fences and not all(getattr(p, "fences", False) for p in router.providers):
        width = 1  # a provider that cannot say where its point of no return is would send under the fence anyway
    width = backpressure.send_width(width)  # a low batch sends one at a time while interactive work shares busy CPUs
    scoped = channel.scoped_rows
    commit()  # end the read transaction: the send loop holds no locks while it waits on a provider
    with router, service.send_ledger() as conn:
        recorder = _Recorder(source, conn, claim.lease, backoff, channel, hasattr(rows[0], "expires_at"))
        # No row is started (here or by a lane) when its send could outlast the lease: a send cut short by
        # the batch's end may still arrive, and its row would go again.
        stop_at = deadline - channel.send_timeout(config)
        # One scope in the batch (a single webhook endpoint, say) needs no second thread: its lane runs here.
        inline = scoped and len({channel.scope_of(row) for row in rows}) == 1
        lanes = Lanes(width, recorder, router, states, fences, stop_at, inline) if (width > 1 or scoped) else None
        try:
            for index, row in enumerate(rows):
                if time.monotonic() > stop_at or backpressure.low_work_held():  # lease ending, or high work waits
                    recorder.release([r.id for r in rows[index:]])
                    states["released"] = len(rows) - index
                    break
                if lanes is not None:
                    lanes.settle_done()  # what the finished sends said reaches the breaker before the next route
                route = router.route()
                if route.provider is None:  # every provider open, or out of tokens for a while: wait, no try spent
                    recorder.hold(_waits(rows[index:], route))
                    states["waiting"] = len(rows) - index
                    break
                row_targets = targets.get(row.id, ())
                if scoped:  # one target, in one scope: its lane asks the scope's gate before each send
                    scope = channel.scope_of(row)
                    gate = router.gate(route.provider.name, scope)
                    lanes.submit(scope, row, _Send(source, batch, channel, route.provider, row_targets, config, gate))
                    continue
                open_targets, held_until = router.admit(route.provider, row_targets)
                if held_until and not open_targets:  # all of the user's push services paused or failing: no try
                    held.append((row.id, datetime.fromtimestamp(held_until, UTC)))
                    continue
                # Some held: the others get it now, and the row comes back for the held ones (Result.held_until).
                work = _Send(source, batch, channel, route.provider, open_targets, config, held_until=held_until)
                if lanes is not None:
                    lanes.submit(None, row, work, prepared=work.prepare(row))
                    continue
                result = work.run(row, work.prepare(row))
                router.report(route.provider, result.outcome, result.retry_after, result.outcomes)
                state = recorder.record(result)
                states[state] = states.get(state, 0) + 1
        finally:
            if lanes is not None:
                lanes.finish()  # every send settled before the providers' connections are parked
            recorder.flush()
            if held:
                recorder.hold(held)
                states["held"] = states.get("held", 0) + len(held)
    return states


class _Send:
    """One row's render and send on the route's provider (the part that may run on a lane's thread)."""

    def __init__(self, source: Source, batch: Batch, channel: Channel, provider: Provider, targets: tuple,
                 config: Mapping, gate: Gate | None = None, held_until: float = 0.0) -> None:  # fmt: skip
        self.source, self.batch, self.channel, self.provider = source, batch, channel, provider
        self.targets, self.config, self.gate = targets, config, gate
        self.held_until = held_until  # when the row's targets left out (their scope held) may be tried; 0.0: none

    def prepare(self, row) -> sending.Prepared:
        """The row's Message, or the permanent Result of a render that failed."""
        return sending.prepare(row, self.provider, lambda: self.source.render(
            row, self.batch, self.channel, self.provider, self.targets, self.config))  # fmt: skip

    def run(self, row, prepared: sending.Prepared) -> sending.Result:
        """Send what prepare() made (a failed render is its own result), in the row's send span."""
        if isinstance(prepared, sending.Result):
            return prepared
        # The row's own trace (a notification keeps its request's): under the job when the job is in it.
        with telemetry.span("hato.delivery.send", getattr(row, "traceparent", None), kind="client",
                            **{"hato.channel": self.channel.name, "hato.provider": self.provider.name,
                               "hato.source": self.source.name, "hato.row_id": row.id,
                               "hato.notification_id": getattr(row, "notification_id", None)}) as span:  # fmt: skip
            result = sending.send(row, prepared, self.provider)
            span.set_attributes({"hato.outcome": result.outcome, "hato.provider": result.provider})
            if result.outcome != "sent":
                telemetry.failed(span, result.kind or result.outcome)
        return replace(result, held_until=self.held_until) if self.held_until else result


class _Recorder:
    """Writes a batch's tries, holds and releases on the send ledger, one thread at a time.

    Tries are written in groups of the source's record_every; a group is written at once when it holds
    anything but sends (a failure must reach the DLQ or its retry time promptly) and when the batch ends.
    """

    def __init__(self, source: Source, conn, lease: datetime, backoff: policy.Backoff, channel: Channel,
                 expiring: bool = True) -> None:  # fmt: skip
        self.source, self.conn, self.lease, self.backoff, self.channel = source, conn, lease, backoff, channel
        self.expiring = expiring  # whether the batch's rows have an expires_at (a missing column is slow to ask)
        self.lock = threading.RLock()
        self.pending: list[Try] = []
        self.stamps: list = []  # what the sends left to note that waits for the batch's end (channel.stamps)

    def record(self, result: sending.Result) -> str:
        """Decide the row's next state, write it (now, or with its group), and return the state."""
        held = datetime.fromtimestamp(result.held_until, UTC) if result.held_until else None
        status, kind, delay = policy.next_state(result.outcome, result.kind,
                                                result.retry_after or result.targets_retry_after,
                                                result.row.attempts + 1, self.backoff,
                                                result.row.expires_at if self.expiring else None,
                                                waiting=result.waiting, held_until=held)  # fmt: skip
        attempt = Try(result, status, kind, delay)
        with self.lock:
            self.pending.append(attempt)
            if len(self.pending) >= self.source.record_every or status != "sent":
                self._write()
        return status

    def flush(self) -> None:
        """Write the tries still waiting for their group, then the batch's stamps (one statement)."""
        with self.lock:
            self._write()
            stamps, self.stamps = self.stamps, []
            if stamps:
                self.channel.write_stamps(self.conn, stamps)

    def hold(self, waits: list[tuple[int, datetime]]) -> None:
        """Return rows to pending until their times, without a try (the tries before them written first)."""
        with self.lock:
            self._write()
            if waits:
                self.source.hold(self.conn, waits, self.lease)

    def release(self, ids: list[int]) -> None:
        """Return rows the batch did not get to, without a try."""
        with self.lock:
            self._write()
            if ids:
                self.source.release(self.conn, ids, self.lease)

    def _write(self) -> None:
        tries, self.pending = self.pending, []
        if tries:
            self.source.record(self.conn, tries, self.lease)
            for attempt in tries:
                self.channel.record_outcome(self.conn, attempt.result)
                self.stamps += self.channel.stamps(attempt.result)


def _waits(rows, route: Route) -> list[tuple[int, datetime]]:
    # One token interval apart, so the waiting rows come back at the rate the bucket will allow.
    return [(row.id, datetime.fromtimestamp(route.wait_until + i * route.spacing, UTC)) for i, row in enumerate(rows)]
