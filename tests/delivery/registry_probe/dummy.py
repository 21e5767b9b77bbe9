"""A channel written for tests/delivery/test_channel_registry.py: the one module a new channel needs.

Its provider writes each message to the file DUMMY_SINK names (a stand-in for a real service).
"""

from __future__ import annotations

import json
import os

from flask_babel import lazy_pgettext

from app.delivery.channels.base import Channel
from app.delivery.ledger import LEDGER
from app.providers import Message, Receipt, register


class DummyProvider:
    """Appends each message to DUMMY_SINK as one JSON line."""

    name = "dummy_sink"

    def __enter__(self) -> DummyProvider:
        return self

    def __exit__(self, *exc_info) -> None:
        return None

    def send(self, message: Message) -> Receipt:
        with open(os.environ["DUMMY_SINK"], "a", encoding="utf-8") as sink:
            sink.write(json.dumps({"id": message.delivery_id, "to": message.to, "text": message.text}) + "\n")
        return Receipt(self.name, f"dummy-{message.delivery_id}")


register("dummy_sink")(lambda config: DummyProvider())


class DummyChannel(Channel):
    """Sends the notification's title and body to the user id."""

    name = "dummy"
    label = lazy_pgettext("channel", "Dummy")
    order = 50
    source = LEDGER

    def providers(self, config) -> list:
        return [DummyProvider()]

    def configured(self, config) -> bool:
        return True

    def build_message(self, row, templates, config, targets=()) -> Message:
        return Message(delivery_id=row.id, channel=self.name, to=f"user:{row.user_id}", subject=row.title,
                       text=f"{row.title}: {row.body}")  # fmt: skip


CHANNEL = DummyChannel()
