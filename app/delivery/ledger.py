"""The ledger as a source of the engine: notification_deliveries rows on their channel (e-mail, push, …).

Its re-check is the notification's: the preference, escalation (read or seen meanwhile), the channel's
own check (no address, a suppressed one), online routing, the digest, quiet hours (not for mandatory or
high-priority types), the frequency cap, and a target to send to. Each try is one statement on the send
ledger (record_every 1), so with the engine's fence a SIGKILL re-sends at most one message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from flask import current_app

from app.delivery import policy, queries, service
from app.delivery.source import Batch, Claim, Recheck, Try
from app.live.presence import online_user_ids
from app.live.seen import shown_in_a_tab
from app.providers import Message, Provider


class Ledger:
    """notification_deliveries, claimed per channel."""

    name = "ledger"
    record_every = 1

    def claim(self, channel: str, ids: Sequence[int], lease_seconds: float) -> Claim | None:
        """Lease the due pending rows of ids on channel."""
        return service.claim(channel, list(ids), lease_seconds)

    def load(self, claim: Claim, channel) -> Batch:
        """The rows with their notification, recipient and type, and the channel's templates for their types.

        A row of a "first" chain expires DELIVERY_MAX_AGE after it was written: it hands over then.
        """
        max_age = timedelta(seconds=float(current_app.config["DELIVERY_MAX_AGE"]))
        rows = [
            replace(row, expires_at=row.created_at + max_age) if row.route_rank is not None else row
            for row in queries.claimed_batch(claim.ids)
        ]
        return Batch(rows, queries.templates_for(channel.name, {row.type for row in rows}))

    def recheck(self, batch: Batch, channel, facts: Recheck) -> policy.Plan:
        """The notification's rules (module docstring), then the frequency caps (which take their locks)."""
        online = online_user_ids({row.user_id for row in batch.rows if row.skip_when_online})
        plan = policy.plan(batch.rows, facts.configured, facts.now, channel.skip_reason, online)
        waiting = [(row.user_id, row.notification_id) for row in plan.send if policy.waits_for_tab(row)]
        if waiting:
            wait = timedelta(seconds=float(current_app.config["REALTIME_ACK_TIMEOUT_SECONDS"]))
            policy.apply_tab_acks(plan, shown_in_a_tab(waiting), facts.now, wait)
        if channel.no_target_reason:
            policy.require_targets(plan, set(facts.targets), channel.no_target_reason)
        capped = policy.cap_groups(plan.send)
        if capped:  # types without a cap never take the locks
            policy.apply_caps(plan, service.admit_capped(capped))
        return plan

    def write_plan(self, plan: policy.Plan, claim: Claim, provider: str) -> None:
        """Skips with their reasons, rows done already (reached in part, the rest gone since), deferrals with an
        attempt row that says why, holds without a try."""
        service.record_skips([(row.id, reason) for row, reason in plan.skip], claim.lease)
        service.record_done([row.id for row in plan.done], claim.lease)
        service.record_deferrals([(row.id, until) for row, until in plan.defer], claim.lease, provider)
        service.postpone([(row.id, until) for row, until in plan.hold], claim.lease)
        chained = [row.notification_id for row, _ in plan.skip if row.route_rank is not None]
        service.wake_successors(chained, after_commit=True)  # a skipped chain row handed over to its next channel

    def render(self, row, batch: Batch, channel, provider: Provider, targets: tuple, config: Mapping) -> Message:
        """The channel renders the notification with the operator's template along the recipient's locale chain."""
        return channel.build_message(row, batch.context, config, targets)

    def record(self, conn, tries: list[Try], lease: datetime) -> None:
        """One statement per try (record_every is 1), durable at once; a failed chain row's next channel goes now."""
        for attempt in tries:
            service.record_result(attempt, lease, conn)
        chained = [
            t.result.row.notification_id for t in tries if t.status == "failed" and t.result.row.route_rank is not None
        ]
        service.wake_successors(chained, conn)

    def hold(self, conn, waits: list[tuple[int, datetime]], lease: datetime) -> None:
        """Back to pending until then, without a try; held_since keeps when the holding began."""
        service.postpone(waits, lease, conn)

    def release(self, conn, ids: list[int], lease: datetime) -> None:
        """Back to pending, due in a second, without a try."""
        service.release(ids, lease, conn)


LEDGER = Ledger()
