"""GET /healthz: whether PostgreSQL and Redis answer, and which providers each channel sends through.

The answer is public (load balancers call it without credentials), so it says only ok/failing per
part: the exception text (host names, user names, addresses) goes to the log, never to the client.
The providers are registry names only (smtp, webpush, apns, fcm…), never their endpoints or keys.
"""

from __future__ import annotations

import logging
import time

import sqlalchemy as sa
from flask import Blueprint, current_app, jsonify

from app.delivery.channels import all_channels
from app.extensions import db, redis
from app.providers import provider_names

log = logging.getLogger(__name__)

bp = Blueprint("health", __name__)


def _probe(name: str, check) -> dict:
    started = time.perf_counter()
    try:
        check()
    except Exception as exc:  # any failure means "down"; why is for the operator's log only
        log.warning("health check %s failing: %s: %s", name, type(exc).__name__, exc)
        return {"ok": False, "status": "failing"}
    return {"ok": True, "status": "ok", "latency_ms": round((time.perf_counter() - started) * 1000, 2)}


def _postgres() -> None:
    try:
        db.session.execute(sa.text("SELECT 1"))
    finally:
        db.session.rollback()


def _providers() -> dict[str, list[str]]:
    """The providers that are on, per channel this installation sends on (APNs and FCM under push)."""
    config = current_app.config
    return {c.name: provider_names(c.name, config) for c in all_channels() if c.delivers and c.configured(config)}


@bp.get("/healthz")
def healthz():
    """Report each dependency; 503 names the one that failed."""
    checks = {"postgres": _probe("postgres", _postgres), "redis": _probe("redis", lambda: redis.client().ping())}
    failing = [name for name, result in checks.items() if not result["ok"]]
    body = {"status": "ok" if not failing else "unavailable", "checks": checks, "providers": _providers()}
    if failing:
        body["failing"] = failing
    return jsonify(body), (200 if not failing else 503)
