"""Reading the rollups for the analytics page and its CSV: totals per group, a series over time, skip reasons.

Only delivery_rollups is read, never the ledger: the range picks hour rows (up to two days) or day rows,
found by the primary key's leading (grain, bucket). Histograms are summed bucket by bucket with one
aggregate per bucket (h[1] … h[40]), which is far cheaper than unnesting every row's array.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa

from app.analytics import histogram
from app.analytics.histogram import BUCKETS, FACTS
from app.extensions import db

GROUPS = ("type", "channel", "provider", "tenant")
PROVIDERS = ("smtp", "webpush", "apns", "fcm", "twilio", "vonage", "slack", "msteams", "discord", "line")
HOURLY_UP_TO = timedelta(days=2)  # a longer range reads day rows
MAX_RANGE = timedelta(days=400)
GROUP_COLUMN = {"type": "type", "channel": "channel", "provider": "provider", "tenant": "tenant_id"}

_sums = ", ".join(f"sum({name})::bigint AS {name}" for name in FACTS)
_hist_sums = ", ".join(
    f"sum({col}[{i}])::bigint AS {col}_{i}" for col in ("sent_hist", "delivered_hist") for i in range(1, BUCKETS + 1)
)


@dataclass(frozen=True)
class Query:
    """A range (UTC, [since, until)), its grain, the filters and the grouping; empty filters mean "any"."""

    since: datetime
    until: datetime
    type: str = ""
    channel: str = ""
    provider: str = ""
    tenant_id: int | None = None
    group: str = "type"

    @property
    def grain(self) -> str:
        """Hour rows for ranges up to two days, day rows beyond."""
        return "hour" if self.until - self.since <= HOURLY_UP_TO else "day"

    def where(self) -> tuple[str, dict]:
        """The conditions on delivery_rollups and their parameters."""
        parts = ["grain = :grain", "bucket >= :since", "bucket < :until"]
        params: dict = {"grain": self.grain, "since": self.since, "until": self.until}
        for name in ("type", "channel", "provider"):
            if getattr(self, name):
                parts.append(f"{name} = :{name}")
                params[name] = getattr(self, name)
        if self.tenant_id is not None:
            parts.append("tenant_id = :tenant_id")
            params["tenant_id"] = self.tenant_id
        return " AND ".join(parts), params


@dataclass
class Figures:
    """The counts and time histograms of one group (or of everything), with the rates and percentiles read from them."""

    key: object
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FACTS, 0))
    sent_hist: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    delivered_hist: list[int] = field(default_factory=lambda: [0] * BUCKETS)

    def add(self, other: Figures) -> None:
        """Add another group's figures to these."""
        for name in FACTS:
            self.counts[name] += other.counts[name]
        self.sent_hist = histogram.merge([self.sent_hist, other.sent_hist])
        self.delivered_hist = histogram.merge([self.delivered_hist, other.delivered_hist])

    def rate(self, part: str, whole: str) -> float | None:
        """part / whole, None when whole is 0."""
        return self.counts[part] / self.counts[whole] if self.counts[whole] else None

    @property
    def rates(self) -> dict[str, float | None]:
        """Delivered and bounced per message sent; opened and clicked per message delivered."""
        return {
            "delivery_rate": self.rate("delivered", "sent"),
            "bounce_rate": self.rate("bounced", "sent"),
            "open_rate": self.rate("opened", "delivered"),
            "click_rate": self.rate("clicked", "delivered"),
        }

    @property
    def times(self) -> dict[str, float | None]:
        """p50 and p99 of 202 → provider accepted and 202 → delivered, in ms (each at most this)."""
        return {
            "sent_p50_ms": histogram.percentile(self.sent_hist, 0.5),
            "sent_p99_ms": histogram.percentile(self.sent_hist, 0.99),
            "delivered_p50_ms": histogram.percentile(self.delivered_hist, 0.5),
            "delivered_p99_ms": histogram.percentile(self.delivered_hist, 0.99),
        }


@dataclass
class Report:
    """What the page shows: totals per group and overall, a series per bucket, skips per reason."""

    query: Query
    groups: list[Figures]
    total: Figures
    series: list[tuple[datetime, dict[str, int]]]
    skips: list[tuple[str, int]]


def _figures(row) -> Figures:
    data = row._mapping
    return Figures(
        key=data["key"],
        counts={name: int(data[name] or 0) for name in FACTS},
        sent_hist=[int(data[f"sent_hist_{i}"] or 0) for i in range(1, BUCKETS + 1)],
        delivered_hist=[int(data[f"delivered_hist_{i}"] or 0) for i in range(1, BUCKETS + 1)],
    )


def report(query: Query) -> Report:
    """Read the figures of a query from the rollups (three statements over the range's rows)."""
    where, params = query.where()
    column = GROUP_COLUMN[query.group]
    rows = db.session.execute(
        sa.text(
            f"SELECT {column} AS key, {_sums}, {_hist_sums} FROM delivery_rollups WHERE {where} "
            f"GROUP BY {column} ORDER BY sum(accepted) DESC, {column}"
        ),
        params,
    )
    groups = [_figures(row) for row in rows]
    total = Figures(key=None)
    for group in groups:
        total.add(group)
    series = [
        (row.bucket, {name: int(row._mapping[name]) for name in FACTS})
        for row in db.session.execute(
            sa.text(f"SELECT bucket, {_sums} FROM delivery_rollups WHERE {where} GROUP BY bucket ORDER BY bucket"),
            params,
        )
    ]
    skips = [
        (row.skip_reason, int(row.skipped))
        for row in db.session.execute(
            sa.text(
                f"SELECT skip_reason, sum(skipped)::bigint AS skipped FROM delivery_rollups "
                f"WHERE {where} AND skip_reason <> '' GROUP BY skip_reason HAVING sum(skipped) <> 0 "
                "ORDER BY sum(skipped) DESC, skip_reason"
            ),
            params,
        )
    ]
    return Report(query, groups, total, series, skips)


def tenant_keys() -> dict[int, str]:
    """Every tenant's id and key (at most 1,000), for the filter and the tenant grouping."""
    return dict(db.session.execute(sa.text("SELECT id, key FROM tenants ORDER BY key LIMIT 1000")).tuples().all())


def tenant_id(key: str) -> int | None:
    """The id of the tenant with that key, None when there is none."""
    return db.session.execute(sa.text("SELECT id FROM tenants WHERE key = :key"), {"key": key}).scalar()
