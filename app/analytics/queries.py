"""Reading the rollups for the analytics page and its CSV: totals per group, a series over time, skip reasons.

Only delivery_rollups is read, never the ledger: the range picks hour rows (up to two days) or day rows,
found by the primary key's leading (grain, bucket). Two statements: the counts per group, per bucket and per
skip reason in one scan (GROUPING SETS); then the histograms per group, summed bucket by bucket with one
aggregate per bucket (h[1] … h[40], about 3 times cheaper than unnesting every row's array), over the rows that
can hold a time only.
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
        sent_hist=[int(data[f"sent_hist_{i}"] or 0) for i in range(1, BUCKETS + 1)],
        delivered_hist=[int(data[f"delivered_hist_{i}"] or 0) for i in range(1, BUCKETS + 1)],
    )


# One scan for every count: per group, per bucket and per skip reason (GROUPING SETS).
COUNTS_SQL = """
SELECT GROUPING({column}) AS by_group, GROUPING(bucket) AS by_bucket, {column} AS key, bucket, skip_reason, {sums}
FROM delivery_rollups WHERE {where}
GROUP BY GROUPING SETS (({column}), (bucket), (skip_reason))
"""
# The histograms per group, from the rows that can hold a time: a skipped row was never sent (no histogram), so
# the rows of skip reasons (most of the keys) are left out of the 80 sums.
TIMES_SQL = """
SELECT {column} AS key, {hist_sums} FROM delivery_rollups WHERE {where} AND skip_reason = '' GROUP BY {column}
"""


def report(query: Query) -> Report:
    """Read the figures of a query from the rollups (two statements over the range's rows)."""
    where, params = query.where()
    column = GROUP_COLUMN[query.group]
    groups: dict = {}
    series, skips = [], []
    for row in db.session.execute(sa.text(COUNTS_SQL.format(column=column, sums=_sums, where=where)), params):
        counts = {name: int(row._mapping[name] or 0) for name in FACTS}
        if row.by_group == 0:
            groups[row.key] = Figures(key=row.key, counts=counts)
        elif row.by_bucket == 0:
            series.append((row.bucket, counts))
        elif row.skip_reason and counts["skipped"]:
            skips.append((row.skip_reason, counts["skipped"]))
    for row in db.session.execute(sa.text(TIMES_SQL.format(column=column, hist_sums=_hist_sums, where=where)), params):
        timed = _figures(row)
        if row.key in groups:
            groups[row.key].sent_hist, groups[row.key].delivered_hist = timed.sent_hist, timed.delivered_hist
    ordered = sorted(groups.values(), key=lambda f: (-f.counts["accepted"], str(f.key)))
    total = Figures(key=None)
    for group in ordered:
        total.add(group)
    series.sort(key=lambda item: item[0])
    skips.sort(key=lambda item: (-item[1], item[0]))
    return Report(query, ordered, total, series, skips)


def tenant_keys() -> dict[int, str]:
    """Every tenant's id and key (at most 1,000), for the filter and the tenant grouping."""
    return dict(db.session.execute(sa.text("SELECT id, key FROM tenants ORDER BY key LIMIT 1000")).tuples().all())


def tenant_id(key: str) -> int | None:
    """The id of the tenant with that key, None when there is none."""
    return db.session.execute(sa.text("SELECT id FROM tenants WHERE key = :key"), {"key": key}).scalar()
