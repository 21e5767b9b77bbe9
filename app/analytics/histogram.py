"""Fixed log-bucket histograms of delivery times, and the facts a ledger row counts for.

Why a histogram per rollup row, and why fixed buckets: percentiles do not add up (the p99 of two hours is not
the mean of their p99s), so a rollup that kept p50/p99 could not answer for a day, a tenant or a filter. Counts
per bucket do add: with the same buckets in every row, the rows of any selection are summed bucket by bucket
and p50/p99 read from the sum, exact to one bucket's width (×1.5, so a figure is at most 50 % above the true
value). 40 buckets from 10 ms by ×1.5 reach ~13 h; the last one holds everything slower.
The SQL twin of bucket_of is hato_rollup_bucket (migrations/versions/0041_delivery_rollups.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

BUCKETS = 40
BASE_MS = 10
RATIO = 1.5

# One bit per fact in delivery_rollup_changes (hato_rollup_facts, hato_rollup_engaged), and its rollup column.
FACTS = {
    "accepted": 1,
    "sent": 2,
    "delivered": 4,
    "bounced": 8,
    "complained": 16,
    "failed": 32,
    "skipped": 64,
    "opened": 128,
    "clicked": 256,
}


def bucket_of(ms: float) -> int:
    """The bucket of a time in milliseconds: 0 below BASE_MS, then one per ×RATIO, the last open-ended."""
    if ms < BASE_MS:
        return 0
    return min(BUCKETS - 1, 1 + math.floor(math.log(ms / BASE_MS) / math.log(RATIO)))


def upper_ms(bucket: int) -> float:
    """The upper edge of a bucket (the last bucket's is its lower edge: it has none)."""
    return BASE_MS * RATIO ** min(bucket, BUCKETS - 2) if bucket < BUCKETS - 1 else BASE_MS * RATIO ** (BUCKETS - 2)


def merge(histograms: Iterable[Sequence[int]]) -> list[int]:
    """The bucket-by-bucket sum."""
    total = [0] * BUCKETS
    for histogram in histograms:
        for index, count in enumerate(histogram):
            total[index] += count
    return total


def percentile(histogram: Sequence[int], q: float) -> float | None:
    """The upper edge of the bucket that holds the q-quantile (0 < q ≤ 1): an honest "at most"; None when empty."""
    total = sum(histogram)
    if total <= 0:
        return None
    rank = math.ceil(q * total)
    seen = 0
    for index, count in enumerate(histogram):
        seen += count
        if seen >= rank:
            return upper_ms(index)
    return upper_ms(BUCKETS - 1)
