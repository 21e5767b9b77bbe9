"""An in-memory provider for tests: records what it sends and fails on request."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from app.providers.base import Message, ProviderError, Receipt, register


class FakeProvider:
    """Records every accepted message in `sent`; `fail_next(error, times)` queues failures."""

    name = "fake"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent: list[Message] = []
        self.calls = 0
        self.sessions = 0
        self._failures: list[ProviderError] = []

    def reset(self) -> FakeProvider:
        """Forget everything sent and every queued failure."""
        with self._lock:
            self.sent.clear()
            self._failures.clear()
            self.calls = self.sessions = 0
        return self

    def fail_next(self, error: ProviderError, times: int = 1) -> None:
        """Make the next `times` sends raise error (a TransientError or PermanentError)."""
        with self._lock:
            self._failures.extend([error] * times)

    def __enter__(self) -> FakeProvider:
        with self._lock:
            self.sessions += 1
        return self

    def __exit__(self, *exc_info) -> None:
        return None

    def send(self, message: Message) -> Receipt:
        """Record message, or raise the next queued failure."""
        with self._lock:
            self.calls += 1
            if self._failures:
                raise self._failures.pop(0)
            self.sent.append(message)
        return Receipt(provider=self.name, message_id=f"<fake-{message.delivery_id}@hato.test>")


# One per process, so a test can program it and then inspect what the engine sent through it.
FAKE = FakeProvider()


@register("fake")
def from_config(config: Mapping) -> FakeProvider:
    """Every channel configured as `fake` shares the process-wide FAKE."""
    return FAKE
