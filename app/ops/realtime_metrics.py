"""The realtime tier's figures per web process (node): inbound events, frames, acks, resends, churn, 202-to-ack.

Each node adds its counters to Redis (app/live/nodestats.py); a scrape reads those of the nodes alive
within PRESENCE_TTL_SECONDS (app/live/registry.py), so any process answers for all of them.
"""

from __future__ import annotations

import logging

from flask import current_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from app.extensions import REALTIME_ERRORS, redis
from app.live import nodestats, registry

log = logging.getLogger(__name__)

COUNTER_HELP = {
    "inbound_messages": "Node-channel messages this web process received.",
    "inbound_events": "User events this web process received (only its own sockets' users are routed to it).",
    "frames": "Frames sent that change what a member sees (counts, toasts), greetings included.",
    "acks": "Of those frames, the ones the client acked.",
    "resends": "Frames resent once for want of an ack within REALTIME_ACK_TIMEOUT_SECONDS.",
    "unacked": "Frames given up after their resend went unacked too.",
    "connects": "Websockets opened.",
    "disconnects": "Websockets closed.",
}


class RealtimeCollector:
    """Yield each live node's realtime counters, socket count, ack ratio and 202-to-ack histogram."""

    def collect(self):
        try:
            client = redis.realtime()
            nodes = registry.live_nodes(client, float(current_app.config["PRESENCE_TTL_SECONDS"]))
            figures = nodestats.read(client, nodes)
        except REALTIME_ERRORS as exc:
            log.warning("realtime figures unavailable: %s", exc)
            figures = {}
        counters = {
            name: CounterMetricFamily(f"hato_realtime_{name}", text, labels=["node"])
            for name, text in COUNTER_HELP.items()
        }
        sockets = GaugeMetricFamily("hato_realtime_sockets", "Websockets open in this web process.", labels=["node"])
        ratio = GaugeMetricFamily(
            "hato_realtime_ack_ratio", "Acked frames over frames sent (since the process started).", labels=["node"]
        )
        latency = HistogramMetricFamily(
            "hato_realtime_ack_seconds",
            "From the API's 202 to the client's ack of the frame that showed the notification.",
            labels=["node"],
        )
        for node, values in sorted(figures.items()):
            for name, family in counters.items():
                family.add_metric([node], values.get(name, 0))
            sockets.add_metric([node], values.get("sockets", 0))
            if values.get("frames"):
                ratio.add_metric([node], values.get("acks", 0) / values["frames"])
            buckets = [(str(b), values.get(f"ack_le_{b}", 0)) for b in nodestats.ACK_BUCKETS]
            buckets.append(("+Inf", values.get("ack_count", 0)))
            latency.add_metric([node], buckets, sum_value=values.get("ack_sum", 0))
        yield from counters.values()
        yield sockets
        yield ratio
        yield latency
