"""GET /metrics for Prometheus, computed from PostgreSQL and Redis at scrape time.

Why not counters in process memory: gunicorn runs several web processes and the workers are other
processes (forking ones even start a process per job), so an in-memory counter in any one of them is
a fraction of the truth, and prometheus-client's multiprocess mode only adds up files on one host
(and grows a file per forked work horse). The ledger already records every try, so a custom
collector reads the totals from it: every process (and every host) answers the same numbers, and
they survive restarts. Cost: two GROUP BY scans per scrape, fine at a 15-60 s scrape interval; a
rollup table is the next step if delivery_attempts grows past tens of millions of rows.

Who may scrape: with METRICS_TOKEN set, a request bearing it; without, only a client on this host that
came straight in (loopback, no proxy in between), so a public deployment never serves the figures to
the Internet. The body is kept METRICS_CACHE_SECONDS per process, so a flood of scrapes costs one pair
of scans per interval, not one per request.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import threading
import time

from flask import Blueprint, Response, current_app, request
from flask_babel import gettext
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from redis.exceptions import RedisError

from app import backpressure, replicas
from app.delivery import stats, switches
from app.extensions import REALTIME_ERRORS, db, redis
from app.ops.realtime_metrics import RealtimeCollector
from app.providers import breaker
from app.queue_state import queue_lags
from app.queueing import QUEUE_NAMES, get_queue
from app.retention import service as retention

log = logging.getLogger(__name__)

bp = Blueprint("metrics", __name__)


class LedgerCollector:
    """Yield delivery metrics from the ledger tables, and queue depths, lags and backpressure from Redis."""

    def collect(self):
        yield from self._attempts()
        yield from self._ledger()
        yield from self._provider_events()
        yield from self._queues()
        yield from self._breakers()
        yield from self._switches()
        yield from self._retention()

    def _attempts(self):
        attempts = CounterMetricFamily(
            "hato_delivery_attempts",
            "Delivery tries by provider and outcome (sent, transient, permanent, deferred, expired).",
            labels=["provider", "outcome"],
        )
        latency = HistogramMetricFamily(
            "hato_delivery_attempt_duration_seconds", "Time a provider took to answer one try.", labels=["provider"]
        )
        merged: dict[str, dict] = {}
        for row in stats.attempt_stats():
            attempts.add_metric([row.provider, row.outcome], row.total)
            if row.outcome in ("deferred", "expired"):
                continue  # a deferral or an expiry calls no provider
            agg = merged.setdefault(
                row.provider, {"sum": 0, "count": 0, "buckets": [0] * len(stats.ATTEMPT_BUCKETS_MS)}
            )
            agg["sum"] += row.sum_ms
            agg["count"] += row.total
            for i, bound in enumerate(stats.ATTEMPT_BUCKETS_MS):
                agg["buckets"][i] += getattr(row, f"le_{bound}")
        for provider, agg in merged.items():
            buckets = [(str(b / 1000), n) for b, n in zip(stats.ATTEMPT_BUCKETS_MS, agg["buckets"], strict=True)]
            buckets.append(("+Inf", agg["count"]))
            latency.add_metric([provider], buckets, sum_value=agg["sum"] / 1000)
        yield attempts
        yield latency

    def _ledger(self):
        rows = GaugeMetricFamily("hato_deliveries", "Ledger rows by channel and status.", labels=["channel", "status"])
        dlq = GaugeMetricFamily(
            "hato_dlq_size",
            "Failed deliveries (the dead-letter queue) by error kind.",
            labels=["channel", "error_kind"],
        )
        # sent is terminal, so its count only grows; failed is not (a DLQ replay moves rows back).
        sent = CounterMetricFamily("hato_deliveries_sent", "Deliveries sent.", labels=["channel"])
        by_status: dict[tuple[str, str], int] = {}
        for row in stats.status_counts():
            by_status[(row.channel, row.status)] = by_status.get((row.channel, row.status), 0) + row.total
            if row.status == "failed":
                dlq.add_metric([row.channel, row.error_kind or "unknown"], row.total)
        for (channel, status), total in sorted(by_status.items()):
            rows.add_metric([channel, status], total)
            if status == "sent":
                sent.add_metric([channel], total)
        yield from (rows, dlq, sent)

    def _provider_events(self):
        events = CounterMetricFamily(
            "hato_provider_events",
            "Events e-mail providers reported through their webhooks, each once, by whether a delivery had the "
            "message id (matched=false: an unknown message id).",
            labels=["provider", "event", "matched"],
        )
        for row in stats.provider_event_counts():
            events.add_metric([row.provider, row.event, "true" if row.matched else "false"], row.total)
        yield events

    def _queues(self):
        depth = GaugeMetricFamily(
            "hato_queue_depth", "Jobs waiting in each RQ queue (each job is a batch).", labels=["queue"]
        )
        lag = GaugeMetricFamily(
            "hato_queue_lag_seconds",
            "How long each queue's oldest work that no worker has started has waited (its next job, or live "
            "deliveries gathered for a drain that is not running); 0 when nothing waits.",
            labels=["queue"],
        )
        up = GaugeMetricFamily("hato_redis_up", "Whether Redis answered this scrape.")
        try:
            for name in QUEUE_NAMES:
                depth.add_metric([name], get_queue(name).count)
            for name, seconds in queue_lags().items():
                lag.add_metric([name], seconds)
            up.add_metric([], 1)
        except RedisError as exc:
            log.warning("queue depth unavailable: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        yield from (depth, lag, up)
        yield from self._backpressure()

    def _backpressure(self):
        pressure = backpressure.status()
        active = GaugeMetricFamily(
            "hato_backpressure_active",
            "1 while low-priority work is held because the high queue's lag is over the threshold.",
        )
        threshold = GaugeMetricFamily(
            "hato_backpressure_threshold_seconds", "BACKPRESSURE_HIGH_LAG_SECONDS (0: backpressure is off)."
        )
        holds = CounterMetricFamily("hato_backpressure_holds", "Times low-priority work began to be held.")
        active.add_metric([], 1 if pressure.held else 0)
        threshold.add_metric([], pressure.threshold)
        holds.add_metric([], pressure.activations)
        yield from (active, threshold, holds)
        if pressure.since is not None:
            since = GaugeMetricFamily(
                "hato_backpressure_since_seconds", "Unix time the current hold of low-priority work began."
            )
            since.add_metric([], pressure.since.timestamp())
            yield since

    def _breakers(self):
        state = GaugeMetricFamily(
            "hato_circuit_breaker_state", "1 for each provider's current breaker state.", labels=["provider", "state"]
        )
        transitions = CounterMetricFamily(
            "hato_circuit_breaker_transitions",
            "Breaker state changes per provider.",
            labels=["provider", "from_state", "to_state"],
        )
        try:
            states, counts = breaker.snapshot(redis.realtime())  # breakers live in the realtime store
        except REALTIME_ERRORS as exc:
            log.warning("circuit breaker state unavailable: %s", exc)
            states, counts = {}, {}
        for provider, current in states.items():
            for name in breaker.STATES:
                state.add_metric([provider, name], 1 if name == current else 0)
        for (provider, before, after), total in sorted(counts.items()):
            transitions.add_metric([provider, before, after], total)
        yield state
        yield transitions

    def _switches(self):
        paused = GaugeMetricFamily(
            "hato_channel_paused",
            "1 while an operator's kill switch pauses a channel (provider empty) or one provider of it.",
            labels=["channel", "provider"],
        )
        waiting = GaugeMetricFamily(
            "hato_channel_waiting", "Deliveries waiting for a paused channel or provider to resume.", labels=["channel"]
        )
        for switch in switches.read().switches:
            paused.add_metric([switch.channel, switch.provider], 1)
        for channel, count in sorted(switches.waiting().items()):
            waiting.add_metric([channel], count)
        yield paused
        yield waiting

    def _retention(self):
        deleted = CounterMetricFamily(
            "hato_retention_deleted", "Rows the retention step deleted, per step.", labels=["step"]
        )
        last = GaugeMetricFamily(
            "hato_retention_last_complete_walk_seconds", "Unix time of the retention step's last complete walk."
        )
        figures = retention.totals()
        for step in retention.STEPS:
            deleted.add_metric([step], figures.get(f"deleted_{step}", 0))
        if "last_complete_walk" in figures:
            last.add_metric([], figures["last_complete_walk"])
        yield deleted
        yield last


class ReplicaCollector:
    """Yield this process's reads per server and each replica's last probe (app/replicas.py), if any are set."""

    def collect(self):
        chosen = replicas.replica_set()
        if chosen is None:
            return
        reads = CounterMetricFamily(
            "hato_replica_reads", "Reads that may use a replica, by the server that answered (this process).",
            labels=["server"],
        )  # fmt: skip
        for server in (replicas.PRIMARY, *(r.name for r in chosen.replicas)):
            reads.add_metric([server], chosen.reads[server])
        state = GaugeMetricFamily(
            "hato_replica_state", "1 for each replica's state at its last probe (ok, lagging, down, primary, unknown).",
            labels=["replica", "state"],
        )  # fmt: skip
        behind = GaugeMetricFamily(
            "hato_replica_replay_age_seconds", "Age of the last commit each replica replayed, at its last probe.",
            labels=["replica"],
        )  # fmt: skip
        for replica in chosen.replicas:
            state.add_metric([replica.name, replica.health.state], 1)
            if replica.health.behind_seconds is not None:
                behind.add_metric([replica.name], replica.health.behind_seconds)
        yield from (reads, state, behind)


class CachedBody:
    """The last exposition and when it was made; one scrape computes it while the others wait."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.body = b""
        self.made_at = float("-inf")

    def get(self, max_age: float) -> bytes:
        """Return a body at most max_age seconds old, computing it if needed."""
        with self.lock:
            if max_age <= 0 or time.monotonic() - self.made_at > max_age:
                self.body = _exposition()
                self.made_at = time.monotonic()
            return self.body


def _exposition() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector())
    registry.register(RealtimeCollector())
    registry.register(ReplicaCollector())
    try:
        return generate_latest(registry)
    finally:
        db.session.rollback()


def _direct_loopback_client() -> bool:
    """True for a client on this host with no proxy in between (ProxyFix keeps the original address)."""
    original = request.environ.get("werkzeug.proxy_fix.orig", {}).get("REMOTE_ADDR")
    address = original or request.environ.get("REMOTE_ADDR") or ""
    if "HTTP_X_FORWARDED_FOR" in request.environ or "HTTP_FORWARDED" in request.environ:
        return False
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _refusal() -> Response | None:
    """None when this request may read the metrics, else the 401/403 to send."""
    token = current_app.config["METRICS_TOKEN"]
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
            return None
        return Response(gettext("A bearer token is required.") + "\n", 401,
                        {"WWW-Authenticate": 'Bearer realm="metrics"'}, mimetype="text/plain")  # fmt: skip
    if _direct_loopback_client():
        return None
    refusal = gettext("Metrics are served to this host only; set METRICS_TOKEN to scrape from elsewhere.")
    return Response(refusal + "\n", 403, mimetype="text/plain")


@bp.get("/metrics")
def metrics():
    """Prometheus text exposition of the delivery metrics, for the token holder or this host."""
    refused = _refusal()
    if refused is not None:
        return refused
    cache = current_app.extensions.setdefault("hato_metrics_cache", CachedBody())
    body = cache.get(float(current_app.config["METRICS_CACHE_SECONDS"]))
    return Response(body, headers={"Content-Type": CONTENT_TYPE_LATEST, "Cache-Control": "no-store"})
