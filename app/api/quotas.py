"""The quotas of a request that creates notifications: its key's and its tenant's, counted before any work.

charge() counts the request once (app/quotas/counter.py: one round trip, which also counts the API's rate limit
the guard left to it, app/api/ratelimit.py defer()) before the view writes anything, so a request over a limit
gets 429 and nothing is written. A request that then fails (a 4xx or 5xx: an unknown
recipient, a crash) gives its notifications back to the daily quotas (settle(), from the blueprint's
after_request); its requests stay counted against the rates, which limit requests, not outcomes.

The 429 is a problem document whose `limit` (rate or daily) and `subject` (api_key or tenant) say which limit
it hit, with Retry-After and RateLimit-* headers of that limit; RateLimit-Policy names it
(draft-ietf-httpapi-ratelimit-headers: `"api-key-daily";q=1000;w=86400`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from flask import Response, current_app, request
from flask_babel import gettext

from app.api import auth, ratelimit
from app.api.schemas import ApiError
from app.quotas import counter
from app.quotas.counter import Quota, Refusal

QUOTA_EXCEEDED = "urn:hato:problem:quota_exceeded"


def _subject(quota: Quota) -> str:
    return "tenant" if quota.subject.startswith("tenant:") else "api_key"


def _refused(refusal: Refusal) -> ApiError:
    """The 429 for a refusal, naming the limit and whose it is."""
    config = current_app.config
    subject, kind = _subject(refusal.quota), refusal.kind
    window = 1 if kind == "rate" else counter.DAY_SECONDS
    policy = f"{subject.replace('_', '-')}-{kind}"
    headers = {
        config["RATELIMIT_HEADER_LIMIT"]: str(refusal.limit),
        config["RATELIMIT_HEADER_REMAINING"]: str(refusal.remaining),
        config["RATELIMIT_HEADER_RESET"]: str(int(time.time()) + refusal.reset_seconds),
        config["RATELIMIT_HEADER_RETRY_AFTER"]: str(refusal.reset_seconds),
        "RateLimit-Reset": str(refusal.reset_seconds),
        "RateLimit-Policy": f'"{policy}";q={refusal.limit};w={window}',
    }
    tenant = refusal.quota.subject.removeprefix("tenant:") if subject == "tenant" else None
    if kind == "rate":
        detail = (
            gettext("Tenant %(tenant)s sends more than its rate allows; try again in %(seconds)s s.",
                    tenant=tenant, seconds=refusal.reset_seconds)
            if tenant
            else gettext("This API key sends more than its rate allows; try again in %(seconds)s s.",
                         seconds=refusal.reset_seconds)
        )  # fmt: skip
    else:
        detail = (
            gettext("Tenant %(tenant)s has %(left)s of its %(limit)s notifications left today (UTC).",
                    tenant=tenant, left=refusal.remaining, limit=refusal.limit)
            if tenant
            else gettext("This API key has %(left)s of its %(limit)s notifications left today (UTC).",
                         left=refusal.remaining, limit=refusal.limit)
        )  # fmt: skip
    extra = {"limit": kind, "subject": subject, **({"tenant": tenant} if tenant else {})}
    return ApiError(429, detail, headers=headers, type=QUOTA_EXCEEDED, title=gettext("Quota exceeded"), **extra)


def charges(view):
    """Mark a view that calls charge(): its guard leaves the API rate limit's count to that round trip."""
    view.charges_quota = True
    return view


def charge(cost: int, tenant_quota: Quota | None = None) -> None:
    """Count this request, creating cost notifications, against its key's and tenant's quotas (and the API rate
    limit the guard deferred); 429 when over."""
    quotas: Sequence[Quota] = auth.current_key().quotas() + ([tenant_quota] if tenant_quota is not None else [])
    deferred = ratelimit.take_deferred()
    if deferred is not None:  # the API limit's windows first, in the same round trip
        counted = counter.take_counting(deferred.windows(), quotas, cost)
        ratelimit.count_deferred(deferred, counted[0] if counted is not None else None)  # 429 over a window
        outcome = counted[1] if counted is not None else counter.take(quotas, cost)
    elif quotas:
        outcome = counter.take(quotas, cost)
    else:
        return
    if isinstance(outcome, Refusal):
        request.hato_rate_limit = None  # the headers speak of the quota that refused, not the shared API limit
        raise _refused(outcome)
    request.hato_quota_charge = (quotas, cost)


def settle(response: Response) -> Response:
    """Give a failed request's notifications back to the daily quotas it was charged."""
    charged = getattr(request, "hato_quota_charge", None)
    if charged is not None and response.status_code >= 400:
        request.hato_quota_charge = None
        counter.refund(*charged)
    return response
