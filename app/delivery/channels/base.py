"""The interface every delivery channel implements (see app/delivery/channels/__init__.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.delivery.source import Source
from app.providers import Message, Provider, provider_names, providers_for


class Channel:
    """One channel's declaration and its own steps; the engine (app/delivery/engine.py) does the rest.

    A channel module defines one subclass and `CHANNEL = TheChannel()`; the registry finds it by itself.
    """

    name: str
    # What people see (the preference matrix, the console); a lazy_pgettext("channel", …) string.
    label: str
    # Where this channel's rows live (the ledger, or the webhook outbox); set by each channel module.
    source: Source | None = None
    # Display order among the channels (the preference matrix, the template editor, filters, the API's enums).
    order: int = 100
    # Whether members choose it (a preference column) and a notification may be routed to it.
    for_members: bool = True
    # Whether it sends rows through the engine (in-app has none: the notification itself is the in-app record).
    delivers: bool = True
    # The parts of an operator's template for it, in the editor's order; () when it has no templates.
    template_parts: tuple[str, ...] = ("subject", "body_text")
    # Why a new ledger row is born skipped when the recipient has nowhere to receive it: (an SQL condition on
    # the ingest's cell `c` (user_id, email) and new row `i` (user_id), the skip reason); None: never at birth.
    born_skip: tuple[str, str] | None = None
    # Rows with no target (see targets()) are skipped with this reason; None: the channel needs no lookup.
    no_target_reason: str | None = None
    # Whether a batch's messages may go out over several connections at once (DELIVERY_SEND_CONCURRENCY).
    concurrent_sends: bool = False
    # Whether each row has exactly one target in one scope of its provider (a webhook endpoint): such rows
    # share a lane per scope, which asks the scope's gate (pause, breaker) before each send.
    scoped_rows: bool = False

    def configured(self, config: Mapping) -> bool:
        """Whether this installation can send on it (a member sees its preference column only then)."""
        return not self.delivers or bool(provider_names(self.name, config))

    def providers(self, config: Mapping) -> list[Provider]:
        """The channel's configured providers in failover order (<NAME>_PROVIDER, each with its fallback)."""
        return providers_for(self.name, config)

    def lanes(self, config: Mapping) -> int:
        """How many sends of one batch may be under way at once."""
        return int(config["DELIVERY_SEND_CONCURRENCY"]) if self.concurrent_sends else 1

    def send_timeout(self, config: Mapping) -> float:
        """The longest one send may take when the provider does not bound a batch itself (0: it does)."""
        return 0.0

    def skip_reason(self, row) -> str | None:
        """Why row cannot go out on this channel at all, from what the batch read knows; None if it can."""
        return None

    def targets(self, rows: Iterable) -> dict[int, tuple]:
        """Where each row's message goes, by row id, when the channel has to look it up (one read per batch)."""
        return {}

    def scope_of(self, row) -> str:
        """The scope of the provider that row's one target belongs to (channels with scoped_rows)."""
        raise NotImplementedError(f"the {self.name} channel has no scoped rows")

    def build_message(self, row, templates: Mapping, config: Mapping, targets: tuple = ()) -> Message:
        """Render row into the provider's Message (raises rendering.RenderError)."""
        raise NotImplementedError(f"the {self.name} channel does not render notifications")

    def record_outcome(self, conn, result) -> None:
        """Write at once what the provider's answer means beyond the row, on the send ledger's connection."""
        return None

    def stamps(self, result) -> list:
        """What the answer leaves to note that may wait for the batch's end (which phones took it), if anything.

        A record costs one round trip under the engine's fence; notes that say when something last worked
        need not be durable with it, so the batch writes them together (write_stamps) as it ends.
        """
        return []

    def write_stamps(self, conn, stamps: list) -> None:
        """Write a batch's stamps (what stamps() returned for its sends)."""
        return None
