"""One try at one outbound row: its source renders it, the provider takes it, timed, the outcome classified."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.delivery import rendering
from app.limits import ERROR_TEXT_MAX
from app.providers import Message, Provider, ProviderError, TargetOutcome


@dataclass(frozen=True)
class Result:
    """How one try ended: outcome sent | transient | permanent, with what the ledger stores."""

    row: Any  # the source's row (a ledger row, a digest run, a webhook event)
    outcome: str
    provider: str
    started_at: datetime
    duration_ms: int
    message_id: str | None = None
    error: str | None = None
    kind: str | None = None
    subject: str | None = None
    body: str | None = None
    retry_after: float | None = None
    reached: tuple[str, ...] = ()
    invalidated: tuple[str, ...] = ()
    outcomes: tuple[TargetOutcome, ...] = ()  # each target's own outcome (Web Push), for its scope's gate
    response_code: int | None = None  # the HTTP status an HTTP provider got (webhooks keep it)
    # Push, sent: targets of the row left out because their scope was held, and until when (epoch seconds).
    held_until: float | None = None

    @property
    def waiting(self) -> bool:
        """Sent, and some of its targets failed for now: they get it on the row's next try."""
        return self.outcome == "sent" and any(o.outcome == "transient" for o in self.outcomes)

    @property
    def targets_retry_after(self) -> float | None:
        """The longest Retry-After among the targets that failed for now."""
        waits = [o.retry_after for o in self.outcomes if o.outcome == "transient" and o.retry_after]
        return max(waits) if waits else None


Prepared = Message | Result  # a rendered message, or the permanent result of a render that failed


def prepare(row, provider: Provider, render: Callable[[], Message]) -> Prepared:
    """render() row into its Message; a render error comes back as its permanent Result."""
    try:
        return render()
    except rendering.RenderError as exc:
        return Result(row, "permanent", provider.name, datetime.now(UTC), 0, error=f"render: {exc}", kind="render")


def send(row, message: Message, provider: Provider) -> Result:
    """Hand one prepared message to the provider and time it; provider errors become a Result."""
    started_at = datetime.now(UTC)
    clock = time.perf_counter()
    try:
        receipt = provider.send(message)
    except ProviderError as exc:
        return _failed(row, provider, started_at, round((time.perf_counter() - clock) * 1000), exc, message)
    elapsed = round((time.perf_counter() - clock) * 1000)
    return Result(
        row,
        "sent",
        receipt.provider,
        started_at,
        elapsed,
        message_id=receipt.message_id,
        error=not_reached(receipt.outcomes),
        subject=message.subject,
        body=message.text if message.logged_text is None else message.logged_text,
        reached=receipt.reached,
        invalidated=receipt.invalidated,
        outcomes=receipt.outcomes,
        response_code=receipt.response_code,
    )


def not_reached(outcomes: tuple[TargetOutcome, ...]) -> str | None:
    """For a message some targets took: how many of them, and each other one with its outcome and what its service
    said (`1/3 · slack:C1 permanent: channel_not_found; apns:1a2b3c4d… transient: 503`); None when every one did."""
    missed = [outcome for outcome in outcomes if outcome.outcome != "sent"]
    if not missed:
        return None
    notes = [f"{_target_name(o)} {o.outcome}" + (f": {o.error}" if o.error else "") for o in missed]
    return f"{len(outcomes) - len(missed)}/{len(outcomes)} · {'; '.join(notes)}"[:ERROR_TEXT_MAX]


def _target_name(outcome: TargetOutcome) -> str:
    # A device token is long and says nothing to a reader: its start is enough to tell it from the member's others.
    target = outcome.target
    if not target:
        return outcome.scope
    return target if len(target) <= 40 else target[:12] + "…"


def _failed(
    row, provider: Provider, started_at: datetime, elapsed: int, exc: ProviderError, message: Message
) -> Result:
    return Result(
        row,
        "transient" if exc.transient else "permanent",
        provider.name,
        started_at,
        elapsed,
        error=str(exc)[:ERROR_TEXT_MAX],
        kind=exc.kind,
        subject=message.subject,
        body=message.text if message.logged_text is None else message.logged_text,
        retry_after=exc.retry_after,
        invalidated=exc.invalidated,
        outcomes=exc.outcomes,
        response_code=exc.response_code,
    )
