"""Send a batch of digest runs: claim (lease), load their unread items, render, send through the e-mail path.

Each run's outcome is recorded right after its provider answers, in one autocommit statement on the
ledger's send connection (app.delivery.service.send_ledger), so a worker killed with SIGKILL can
resend at most the one digest in flight, with the same Message-ID (the run's ledger_id). The
e-mail goes through the ledger's providers with their token bucket and circuit breaker
(app/providers/routing.py); suppression and quiet hours are checked like any e-mail's; a run whose
items were all read in the meantime ends 'empty' and sends nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from app.delivery.engine import backoff_from
from app.delivery.policy import quiet_until
from app.delivery.rendering import RenderError
from app.delivery.service import send_ledger
from app.digests import queries, rendering, service, templates
from app.extensions import db, redis
from app.limits import ERROR_TEXT_MAX
from app.providers import Message, ProviderError, providers_for
from app.providers.routing import Router
from app.unitofwork import commit


def send_runs(run_ids: list[int], config: Mapping) -> dict:
    """Claim the runs of run_ids that are due, send each one's digest, record each; return the counts."""
    # Stop taking runs LEASE_MARGIN_SECONDS before the lease ends, like the delivery engine.
    deadline = time.monotonic() + float(config["DELIVERY_LEASE_SECONDS"]) - float(config["LEASE_MARGIN_SECONDS"])
    try:
        leases = service.claim([int(i) for i in run_ids], float(config["DELIVERY_LEASE_SECONDS"]))
        commit()
        if not leases:
            return {"claimed": 0}
        runs = queries.claimed_runs(leases)
        wordings = templates.all_templates()
        commit()  # end the read transaction: nothing is locked while a provider is waited on
        counts: dict[str, int] = {"claimed": len(runs)}
        providers = providers_for("email", config)
        with Router(providers, config, redis.client()) as router, send_ledger() as ledger:
            for run in runs:
                if time.monotonic() > deadline:  # hand the rest back before the lease ends (the sweeper re-enqueues)
                    service.record(ledger, run.id, leases[run.id], "pending")
                    state = "released"
                else:
                    wording = templates.pick(wordings, run.locale, config["DEFAULT_LOCALE"])
                    state = _send_one(ledger, run, leases[run.id], router, bool(providers), config, wording)
                counts[state] = counts.get(state, 0) + 1
        return counts
    except BaseException:
        db.session.rollback()
        raise


def _send_one(ledger, run: queries.Run, lease: datetime, router: Router, configured: bool, config: Mapping,
              wording: rendering.DigestTemplate) -> str:  # fmt: skip
    if not run.items:
        service.record(ledger, run.id, lease, "empty")
        return "empty"
    if not (run.email or "").strip() or run.suppressed or not configured:
        reason = "suppressed" if run.suppressed else ("no_address" if configured else "email_not_configured")
        service.record(ledger, run.id, lease, "skipped", len(run.items), reason)
        return "skipped"
    now = datetime.now(UTC)
    until = quiet_until(now, run.timezone, run.quiet_hours_start, run.quiet_hours_end)
    if until is not None:  # quiet hours: the sweeper hands the run to a job again when they end
        service.record(ledger, run.id, lease, "pending", len(run.items), None, until)
        return "deferred"
    base_url = config["BASE_URL"]
    context = rendering.digest_context(run.display_name, run.email, run.locale, run.kind, run.items, base_url)
    try:
        rendered = rendering.render_digest(context, config, wording)
    except RenderError as exc:
        service.record(ledger, run.id, lease, "failed", len(run.items), f"render: {exc}"[:ERROR_TEXT_MAX])
        return "failed"
    route = router.route()
    if route.provider is None:  # breaker open or out of tokens: try again then, no attempt spent
        service.record(
            ledger, run.id, lease, "pending", len(run.items), None, datetime.fromtimestamp(route.wait_until, UTC)
        )
        return "waiting"
    message = Message(delivery_id=run.ledger_id, channel="email", to=run.email.strip(), to_name=run.display_name,
                      subject=rendered.subject, text=rendered.text, html=rendered.html)  # fmt: skip
    try:
        route.provider.send(message)
    except ProviderError as exc:
        router.report(route.provider, "transient" if exc.transient else "permanent", exc.retry_after)
        backoff = backoff_from(config)
        if exc.transient and not backoff.exhausted(run.attempts):
            retry_at = now + timedelta(seconds=exc.retry_after or backoff.delay(run.attempts))
            service.record(ledger, run.id, lease, "pending", len(run.items), str(exc)[:ERROR_TEXT_MAX], retry_at)
            return "retry"
        service.record(ledger, run.id, lease, "failed", len(run.items), str(exc)[:ERROR_TEXT_MAX])
        return "failed"
    router.report(route.provider, "sent")
    service.record(ledger, run.id, lease, "sent", len(run.items))
    return "sent"
