"""The delivery engine: claim a batch of ledger rows on one channel, re-check, render, send and record each.

Idempotent: only rows that are pending and due can be claimed, so a re-run (or a duplicate job
after a sweeper re-enqueue) for rows already sent, skipped or in another worker's lease does nothing.
Each send is recorded and committed on its own right after the provider answers (one autocommit
statement, see service.send_ledger), so a worker killed with SIGKILL can re-send at most the one
message that was in flight. E-mail goes out over DELIVERY_SEND_CONCURRENCY connections at once (the
time of a send is mostly waiting on the server): this thread routes and renders, a small pool of
threads sends and records, and a fence (app/providers/base.py: fenced) keeps "at most one message
past its point of no return and not yet recorded" true for the whole worker. Sends go through
app/providers/routing.py (token bucket, circuit breaker, failover); when it says "wait", the rest of
the batch returns to pending without a try.
Push targets are also gated per push service (Router.admit): a row whose every subscription sits on a
paused or failing push service waits for it without a try; the rest of the batch goes on.
What differs between e-mail and push is the channel's business (app/delivery/channels); the webhook
channel's rows live in the webhook outbox and go through app/webhooks/engine.py, the same steps.
The re-check also drops escalations whose notification was read/seen, e-mail/push of online-routed
types while the user has a live socket, and rows over their type's frequency cap (service.admit_capped).
drain() runs the same batches off a coalesced list of live deliveries (app/queueing.py): it yields the
worker after DELIVERY_DRAIN_SECONDS, or as soon as a higher-priority queue has work, by waking a
fresh drain job for what is left.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime

from flask import current_app

from app.delivery import policy, queries, sending, service
from app.delivery.channels import Channel, channel_for, webhook
from app.extensions import db, redis
from app.live.presence import online_user_ids
from app.providers import Fence, FenceBroken, Provider, fenced, point_of_no_return, providers_for
from app.providers.routing import Route, Router
from app.queueing import higher_work_waiting, start_drain, take_coalesced, wake_drain
from app.unitofwork import commit
from app.webhooks import engine as webhook_engine


def backoff_from(config: Mapping) -> policy.Backoff:
    """The retry schedule from RETRY_BASE_SECONDS / RETRY_CAP_SECONDS / RETRY_MAX_ATTEMPTS."""
    return policy.Backoff(config["RETRY_BASE_SECONDS"], config["RETRY_CAP_SECONDS"], config["RETRY_MAX_ATTEMPTS"])


def deliver_batch(channel_name: str, delivery_ids: list[int], config: Mapping) -> dict:
    """Claim, re-check, render, send and record a batch of deliveries on one channel; return the counts."""
    if channel_name == webhook.NAME:  # its rows are the webhook outbox's, not the notification ledger's
        return webhook_engine.deliver_batch(delivery_ids, config)
    channel = channel_for(channel_name)
    lease_seconds = float(config["DELIVERY_LEASE_SECONDS"])
    # Stop taking new rows LEASE_MARGIN_SECONDS before the lease ends, so the sweeper never hands a row
    # we are still working on to another worker (app/config.py refuses a lease at or below the margin).
    deadline = time.monotonic() + lease_seconds - float(config["LEASE_MARGIN_SECONDS"])
    try:
        claim = service.claim(channel.name, sorted({int(i) for i in delivery_ids}), lease_seconds)
        commit()
        if claim is None:
            return {"claimed": 0}
        providers = providers_for(channel.name, config)
        rows = queries.claimed_batch(claim.ids)
        online = online_user_ids({row.user_id for row in rows if row.skip_when_online})
        decisions = policy.plan(rows, bool(providers), datetime.now(UTC), channel.skip_reason, online)
        targets = channel.targets({row.user_id for row in decisions.send})
        if channel.no_target_reason:
            policy.require_targets(decisions, set(targets), channel.no_target_reason)
        capped = policy.cap_groups(decisions.send)
        if capped:  # types without a cap never take the locks
            policy.apply_caps(decisions, service.admit_capped(capped))
        service.record_skips([(row.id, reason) for row, reason in decisions.skip], claim.lease)
        service.record_deferrals([(row.id, until) for row, until in decisions.defer], claim.lease,
                                 providers[0].name if providers else channel.name)  # fmt: skip
        commit()
        counts = {"claimed": len(claim.ids), "skipped": len(decisions.skip), "deferred": len(decisions.defer)}
        if decisions.send:
            router = Router(providers, config, redis.client())
            counts.update(_send_all(channel, decisions.send, router, claim, deadline, config, targets))
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


def _send_all(channel: Channel, rows, router: Router, claim: service.Claim, deadline: float, config: Mapping,
              targets: dict) -> dict:  # fmt: skip
    templates = queries.templates_for(channel.name, {row.type for row in rows})
    backoff = backoff_from(config)
    states: dict[str, int] = {}
    held: list[tuple[int, datetime]] = []
    width = int(config.get("DELIVERY_SEND_CONCURRENCY", 1))
    if not channel.concurrent_sends or not all(getattr(p, "fences", False) for p in router.providers):
        width = 1  # a provider that cannot say where its point of no return is would send under the fence anyway
    commit()  # end the read transaction: the send loop holds no locks while it waits on a provider
    with router, service.send_ledger() as ledger:
        lanes = _Lanes(width, channel, router, claim.lease, backoff, ledger, states) if width > 1 else None
        try:
            for index, row in enumerate(rows):
                if time.monotonic() > deadline:
                    service.release([r.id for r in rows[index:]], claim.lease)
                    commit()
                    states["released"] = len(rows) - index
                    break
                if lanes is not None:
                    lanes.settle_done()  # what the finished sends said reaches the breaker before the next route
                route = router.route()
                if route.provider is None:  # every provider open, or out of tokens for a while: wait, no try spent
                    service.postpone(_waits(rows[index:], route), claim.lease)
                    commit()
                    states["waiting"] = len(rows) - index
                    break
                open_targets, held_until = router.admit(route.provider, targets.get(row.user_id, ()))
                if held_until and not open_targets:  # all of the user's push services paused or failing: no try spent
                    held.append((row.id, datetime.fromtimestamp(held_until, UTC)))
                    continue
                if lanes is not None:
                    prepared = sending.prepare(row, channel, route.provider, templates, config, open_targets)
                    lanes.submit(row, prepared, route.provider)
                    continue
                result = sending.attempt(row, channel, route.provider, templates, config, open_targets)
                router.report(route.provider, result.outcome, result.retry_after, result.outcomes)
                state = service.record_result(result, claim.lease, backoff, ledger)
                channel.record_outcome(ledger, result)
                states[state] = states.get(state, 0) + 1
        finally:
            if lanes is not None:
                lanes.finish()  # every send settled before the providers' connections are parked
    if held:
        service.postpone(held, claim.lease)
        commit()
        states["held"] = len(held)
    return states


_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (process id, width, pool): a forked child makes its own


def _send_pool(width: int) -> ThreadPoolExecutor:
    global _pool
    if _pool is None or _pool[:2] != (os.getpid(), width):
        _pool = (os.getpid(), width, ThreadPoolExecutor(width, thread_name_prefix="hato-send"))
    return _pool[2]


class _Lanes:
    """Up to width sends of one batch at once; each is recorded on the batch's ledger under one fence.

    This thread keeps the batch's routing (the Router is not shared) and its database session; a pool
    thread runs one send and its record. The fence is taken at the send's point of no return (before
    the whole send for a provider that does not mark it) and held until the record has committed, so
    the ledger connection is used by one thread at a time and a SIGKILL finds at most one message sent
    and not recorded, as with one connection.
    """

    def __init__(self, width: int, channel: Channel, router: Router, lease: datetime, backoff: policy.Backoff,
                 ledger, states: dict[str, int]) -> None:  # fmt: skip
        self.width, self.channel, self.router, self.lease, self.backoff = width, channel, router, lease, backoff
        self.ledger, self.states = ledger, states
        self.app = current_app._get_current_object()
        self.fence = Fence()
        self.pool = _send_pool(width)
        self.running: set[Future] = set()

    def submit(self, row, prepared, provider: Provider) -> None:
        """Send prepared (a Message, or the Result of a failed render) for row once a lane is free."""
        while len(self.running) >= self.width:
            self._settle(wait(self.running, return_when=FIRST_COMPLETED).done)
        self.running.add(self.pool.submit(self._send, row, prepared, provider))

    def settle_done(self) -> None:
        """Report the sends that have finished, without waiting for the others."""
        done = {future for future in self.running if future.done()}
        if done:
            self._settle(done)

    def finish(self) -> None:
        """Wait for every send, then report them (the first error raised in a lane is raised here)."""
        self._settle(wait(self.running).done)

    def _settle(self, done: set[Future]) -> None:
        self.running -= done
        errors = [future.exception() for future in done if future.exception() is not None]
        errors.sort(key=lambda error: isinstance(error, FenceBroken))  # the cause first, not its consequences
        if errors:  # the other sends finish and are counted before the error goes up
            done, self.running = done | self.running, set()
            wait(done)
        for future in done:
            if future.exception() is None:
                provider, result, state = future.result()
                self.router.report(provider, result.outcome, result.retry_after, result.outcomes)
                self.states[state] = self.states.get(state, 0) + 1
        if errors:
            raise errors[0]

    def _send(self, row, prepared, provider: Provider):
        with self.app.app_context(), fenced(self.fence):
            if not getattr(provider, "fences", False):
                point_of_no_return()  # the provider does not say where its point is: the whole send is it
            result = prepared if isinstance(prepared, sending.Result) else sending.send(row, prepared, provider)
            point_of_no_return()  # a failed send records under the fence too: one writer on the ledger
            state = service.record_result(result, self.lease, self.backoff, self.ledger)
            self.channel.record_outcome(self.ledger, result)
        return provider, result, state


def _waits(rows, route: Route) -> list[tuple[int, datetime]]:
    # One token interval apart, so the waiting rows come back at the rate the bucket will allow.
    return [(row.id, datetime.fromtimestamp(route.wait_until + i * route.spacing, UTC)) for i, row in enumerate(rows)]
