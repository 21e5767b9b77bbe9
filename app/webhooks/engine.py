"""The webhook channel's engine: claim a batch, then each endpoint's rows on its own thread, signed and posted.

The shape of app/delivery/engine.py: a SKIP LOCKED claim under a lease, tries recorded in small groups
on the autocommit send ledger (a worker killed mid-batch re-sends at most one group, with the same
webhook-ids: at-least-once), backoff with full jitter (app/delivery/policy.py),
the DLQ (`failed`) after RETRY_MAX_ATTEMPTS or a permanent answer. A circuit breaker per endpoint
(app/providers/breaker.py, scoped to the endpoint id): while it is open the endpoint's rows wait
without a try. Endpoints run side by side, each with its own connection and its own deadline, so a
slow or failing endpoint never delays another; webhooks have their own jobs, so never another channel.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from flask import current_app

from app.delivery import policy
from app.delivery.channels.webhook import Outcome, WebhookPolicy, WebhookSession, post
from app.delivery.service import send_ledger
from app.extensions import db, redis
from app.providers.breaker import CircuitBreaker
from app.providers.breaker import Settings as BreakerSettings
from app.unitofwork import commit
from app.webhooks import service, signing

log = logging.getLogger(__name__)
MAX_PARALLEL_ENDPOINTS = 8
# Sent rows are recorded in groups of this many (one statement): a worker killed mid-group sends those
# again after its lease expires, with the same webhook-ids (at-least-once; receivers drop the copies).
# A failure is recorded at once, with the group before it.
RECORD_EVERY = 50
BREAKER_RECHECK_SECONDS = 1.0


def deliver_batch(delivery_ids: list[int], config: Mapping) -> dict:
    """Claim, sign, post and record a batch of webhook deliveries; return the counts."""
    lease_seconds = float(config["DELIVERY_LEASE_SECONDS"])
    deadline = time.monotonic() + lease_seconds - float(config["LEASE_MARGIN_SECONDS"])
    try:
        claim = service.claim(sorted({int(i) for i in delivery_ids}), lease_seconds)
        commit()
        if claim is None:
            return {"claimed": 0}
        rows = service.claimed_batch(claim.ids)
        commit()  # the send loop holds no transaction while it waits on endpoints
    except BaseException:
        db.session.rollback()
        raise
    by_endpoint: dict[int, list] = {}
    for row in rows:
        by_endpoint.setdefault(row.endpoint_id, []).append(row)
    app = current_app._get_current_object()
    counts: dict[str, int] = {"claimed": len(claim.ids)}
    work = [(rows, claim, deadline, config) for rows in by_endpoint.values()]
    if len(work) == 1:
        results = [_send_endpoint(*work[0])]
    else:
        with ThreadPoolExecutor(min(len(work), MAX_PARALLEL_ENDPOINTS)) as pool:
            results = list(pool.map(lambda args: _in_app(app, *args), work))
    for states in results:
        for state, n in states.items():
            counts[state] = counts.get(state, 0) + n
    return counts


def _in_app(app, *args) -> dict[str, int]:
    with app.app_context():  # a thread of its own: its own context, so its own session and connections
        return _send_endpoint(*args)


def _send_endpoint(rows: list, claim: service.Claim, deadline: float, config: Mapping) -> dict[str, int]:
    first = rows[0]
    states: dict[str, int] = {}
    backoff = policy.Backoff(config["RETRY_BASE_SECONDS"], config["RETRY_CAP_SECONDS"], config["RETRY_MAX_ATTEMPTS"])
    breaker = CircuitBreaker(
        redis.client(), "webhook", BreakerSettings.from_config(config), scope=str(first.endpoint_id)
    )
    timeout = float(config["WEBHOOK_TIMEOUT_SECONDS"])
    with send_ledger() as ledger, WebhookSession(WebhookPolicy.from_config(config)) as session:
        if not first.enabled:  # switched off after the event: the rows wait (DELIVERY_MAX_AGE bounds it)
            service.postpone(ledger, [r.id for r in rows], datetime.fromtimestamp(time.time() + 60, UTC), claim.lease)
            return {"held": len(rows)}
        key = signing.secret_bytes(signing.unseal(first.secret_sealed, first.endpoint_id, config["SECRET_KEY"]))
        tried: list[service.Tried] = []
        closed_since = None  # since when this loop knows the breaker closed (its own successes)
        for index, row in enumerate(rows):
            if time.monotonic() > deadline - timeout:
                service.record_many(ledger, tried, claim.lease)
                tried.clear()
                service.release(ledger, [r.id for r in rows[index:]], claim.lease)
                states["released"] = len(rows) - index
                break
            # Ask the breaker before the first row, after any failure, and every BREAKER_RECHECK_SECONDS
            # (another worker's failures may have opened it); a closed breaker needs no call per row.
            if closed_since is None or time.monotonic() - closed_since > BREAKER_RECHECK_SECONDS:
                permit = breaker.allow()
                if not permit.allowed:
                    service.record_many(ledger, tried, claim.lease)
                    tried.clear()
                    until = datetime.fromtimestamp(max(permit.retry_at, time.time() + 0.05), UTC)
                    service.postpone(ledger, [r.id for r in rows[index:]], until, claim.lease)
                    states["held"] = len(rows) - index
                    break
            body = row.payload.encode()
            started_at = datetime.now(UTC)
            headers = signing.headers(key, row.webhook_id, int(time.time()), body)
            result = post(session, row.url, headers, body, timeout)
            if result.outcome == "transient":
                breaker.failure()
                closed_since = None
            elif closed_since is None:
                breaker.success()  # closes a half-open breaker (this was its probe)
                closed_since = time.monotonic()
            status, kind, delay = _next_state(result, row.attempts + 1, backoff)
            tried.append(service.Tried(row.id, status, delay, kind, result, started_at))
            if len(tried) >= RECORD_EVERY or status != "sent":
                service.record_many(ledger, tried, claim.lease)
                tried.clear()
            states[status] = states.get(status, 0) + 1
        service.record_many(ledger, tried, claim.lease)
    return states


def _next_state(result: Outcome, attempts: int, backoff: policy.Backoff) -> tuple[str, str | None, float]:
    if result.outcome == "sent":
        return "sent", None, 0.0
    if result.outcome == "permanent":
        return "failed", result.kind or "permanent", 0.0
    if backoff.exhausted(attempts):
        return "failed", "exhausted", 0.0
    return "pending", None, min(max(backoff.delay(attempts), result.retry_after or 0.0), backoff.cap)
