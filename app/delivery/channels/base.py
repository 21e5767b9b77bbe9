"""The interface every delivery channel implements (see app/delivery/channels/__init__.py)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from app.delivery.queries import BatchRow, Template
from app.providers import Message


class Channel(ABC):
    """One delivery channel's own steps."""

    name: str
    # Rows whose user has no target (see targets()) are skipped with this reason; None: targets not needed.
    no_target_reason: str | None = None
    # Whether a batch's messages may go out over several connections at once (DELIVERY_SEND_CONCURRENCY).
    concurrent_sends: bool = False

    def skip_reason(self, row: BatchRow) -> str | None:
        """Why row cannot go out on this channel at all, from what the batch read knows; None if it can."""
        return None

    def targets(self, user_ids: set[int]) -> dict[int, tuple]:
        """Where each user's message goes, when the channel has to look it up (one read per batch)."""
        return {}

    @abstractmethod
    def build_message(self, row: BatchRow, templates: dict[tuple[str, str], Template], config: Mapping,
                      targets: tuple = ()) -> Message:  # fmt: skip
        """Render row into the provider's Message (raises rendering.RenderError)."""

    @abstractmethod
    def record_outcome(self, conn, result) -> None:
        """Write what the provider's answer means beyond the ledger row, on the send ledger's connection."""
