"""Digest runs as a source of the delivery engine: one e-mail per (user, kind, period), on the e-mail channel.

A digest is an e-mail like any other: the e-mail channel's providers, kill switch, breaker and bucket,
its skip reasons (no address, a suppressed one) and its envelope, so it carries List-Unsubscribe (a
one-click link that stops this kind of digest). Its own rules: a run whose items were all read in the
meantime ends `empty` and sends nothing; quiet hours defer it. Each run is recorded right after its
provider answers (record_every 1), so a worker killed with SIGKILL resends at most the one digest in
flight, with the same Message-ID (the run's ledger_id).

The claim counts a try (a poison digest that kills its worker cannot come back forever), so a loaded
run's `attempts` is the number of tries before this one, as the engine expects of every row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from app.delivery.policy import Plan, quiet_until
from app.delivery.rendering import brand_html
from app.delivery.source import Batch, Claim, Recheck, Try
from app.delivery.unsubscribe import unsubscribe_url
from app.digests import queries, rendering, service, templates
from app.extensions import db
from app.providers import Message, Provider

DIGEST_UNSUBSCRIBE = "digest:{kind}"  # the one-click target of a digest: every type this kind of digest carries


class Digests:
    """digest_runs, claimed as a batch of e-mails."""

    name = "digests"
    record_every = 1

    def claim(self, channel: str, ids: Sequence[int], lease_seconds: float) -> Claim | None:
        """Lease the runs of ids that are pending (or whose worker died with the lease)."""
        claimed = service.claim(list(ids), lease_seconds)
        return Claim(*claimed) if claimed else None

    def load(self, claim: Claim, channel) -> Batch:
        """The runs with their recipient and unread items, and every digest wording (per locale)."""
        runs = [dataclasses.replace(run, attempts=run.attempts - 1) for run in queries.claimed_runs(claim.ids)]
        return Batch(runs, templates.all_templates())

    def recheck(self, batch: Batch, channel, facts: Recheck) -> Plan:
        """Nothing left unread: empty; the e-mail channel's skip reasons; quiet hours defer (never urgent)."""
        plan = Plan()
        for run in batch.rows:
            reason = None if run.items else "empty"
            if reason is None and not facts.configured:
                reason = f"{channel.name}_not_configured"
            reason = reason or channel.skip_reason(run)
            if reason:
                plan.skip.append((run, reason))
                continue
            until = quiet_until(facts.now, run.timezone, run.quiet_hours_start, run.quiet_hours_end)
            if until is not None:
                plan.defer.append((run, until))
            else:
                plan.send.append(run)
        return plan

    def write_plan(self, plan: Plan, claim: Claim, provider: str) -> None:
        """Empty and skipped runs end; deferred ones wait until quiet hours end; held ones without a try."""
        conn = db.session
        for run, reason in plan.skip:
            status = "empty" if reason == "empty" else "skipped"
            service.record(conn, run.id, claim.lease, status, len(run.items), None if status == "empty" else reason)
        for run, until in plan.defer:
            service.record(conn, run.id, claim.lease, "pending", len(run.items), None, until)
        for run, until in plan.hold:
            service.record(conn, run.id, claim.lease, "pending", len(run.items), None, until, held=True)

    def render(self, run, batch: Batch, channel, provider: Provider, targets: tuple, config: Mapping) -> Message:
        """The digest in the recipient's wording, in the e-mail channel's envelope (List-Unsubscribe included)."""
        base_url = config["BASE_URL"]
        wording = templates.pick(batch.context, run.locale, config["DEFAULT_LOCALE"])
        context = rendering.digest_context(run.display_name, run.email, run.locale, run.kind, run.items, base_url)
        # A digest whose items are all one tenant's is branded as its e-mails are (queries.claimed_runs).
        brand = brand_html(run.tenant_name, run.tenant_logo_url, run.tenant_color)
        rendered = rendering.render_digest(context, config, wording, brand)
        unsubscribe = unsubscribe_url(base_url, run.user_id, DIGEST_UNSUBSCRIBE.format(kind=run.kind))
        return channel.envelope(run.ledger_id, run.email, run.display_name, rendered, unsubscribe,
                                from_name=run.tenant_sender_name, reply_to=run.tenant_reply_to)  # fmt: skip

    def record(self, conn, tries: list[Try], lease: datetime) -> None:
        """One statement per run, durable at once."""
        for attempt in tries:
            run, result = attempt.result.row, attempt.result
            retry_at = result.started_at + timedelta(seconds=attempt.delay) if attempt.status == "pending" else None
            service.record(conn, run.id, lease, attempt.status, len(run.items), result.error, retry_at)

    def hold(self, conn, waits: list[tuple[int, datetime]], lease: datetime) -> None:
        """Back to pending until then, without a try; held_since keeps when the holding began."""
        for run_id, until in waits:
            service.record(conn, run_id, lease, "pending", None, None, until, held=True)

    def release(self, conn, ids: list[int], lease: datetime) -> None:
        """Back to pending for the sweeper to hand to a job again."""
        for run_id in ids:
            service.record(conn, run_id, lease, "pending")


DIGESTS = Digests()
