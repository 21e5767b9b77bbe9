"""GET /healthz: whether PostgreSQL and Redis answer."""

from __future__ import annotations

import time

import sqlalchemy as sa
from flask import Blueprint, jsonify

from app.extensions import db, redis

bp = Blueprint("health", __name__)


def _probe(check) -> dict:
    started = time.perf_counter()
    try:
        check()
    except Exception as exc:  # any failure means "down"; the message names it
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ok": True, "latency_ms": round((time.perf_counter() - started) * 1000, 2)}


def _postgres() -> None:
    try:
        db.session.execute(sa.text("SELECT 1"))
    finally:
        db.session.rollback()


@bp.get("/healthz")
def healthz():
    """Report each dependency; 503 names the one that failed."""
    checks = {"postgres": _probe(_postgres), "redis": _probe(lambda: redis.client().ping())}
    failing = [name for name, result in checks.items() if not result["ok"]]
    body = {"status": "ok" if not failing else "unavailable", "checks": checks}
    if failing:
        body["failing"] = failing
    return jsonify(body), (200 if not failing else 503)
