"""Push to every kind of device a member has: browsers over Web Push, iPhones over APNs, Android over FCM.

The push channel's one provider for the engine. Each target goes to its own part (the configured web push
provider, "apns" or "fcm"), and every part of a message sends at the same time, so a slow APNs does not
hold back FCM or Web Push; each target's scope (a push service, APNs' host, FCM's host) keeps its own
breaker and pause (app/providers/routing.py), and part_of() lets the engine hold the targets of a part an
operator paused. A message counts as sent when any target accepted it, and its provider reads as the parts
that took it ("webpush+apns"); the targets that failed for now, or were held, get it on the row's next try,
which leaves out the ones it reached (notification_deliveries.reached), so nobody gets it twice.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import replace

from app.providers.base import (
    Message,
    PermanentError,
    Provider,
    ProviderError,
    Receipt,
    TargetOutcome,
    TransientError,
    point_of_no_return,
)
from app.providers.mobile import DeviceTarget

MOBILE_PARTS = {"ios": "apns", "android": "fcm"}


class PushFanout:
    """The parts of the push channel that are on, as one provider; `with fanout:` enters each part."""

    name = "push"
    fences = True  # send() marks its point of no return: everything before the first request runs unfenced

    def __init__(self, parts: list[Provider]) -> None:
        self.parts = {part.name: part for part in parts}
        # Browsers go to the configured web push provider: the part that is neither APNs nor FCM.
        self.web = next((p.name for p in parts if p.name not in MOBILE_PARTS.values()), None)
        self._stack: ExitStack | None = None
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> PushFanout:
        self._stack = ExitStack()
        for part in self.parts.values():
            self._stack.enter_context(part)
        return self

    def __exit__(self, *exc_info) -> None:
        stack, self._stack = self._stack, None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if stack is not None:
            stack.close()

    def part_of(self, target) -> str | None:
        """The name of the part that sends to target (None: no part of this installation can)."""
        name = MOBILE_PARTS[target.platform] if isinstance(target, DeviceTarget) else self.web
        return name if name in self.parts else None

    def scope_of(self, target) -> str:
        """The scope of target within its part (a push service's host:port, apns:<host>, fcm:<host>)."""
        name = self.part_of(target)
        scope_of = getattr(self.parts.get(name), "scope_of", None)
        return scope_of(target) if scope_of is not None else str(name)

    def send(self, message: Message) -> Receipt:
        """Send message to each target through its part, the parts side by side; see the module docstring."""
        groups: dict[str, list] = {}
        for target in message.targets:
            name = self.part_of(target)
            if name is not None:
                groups.setdefault(name, []).append(target)
        if not groups:
            raise PermanentError("the recipient has no browser or phone this server can push to", kind="no_target")
        calls = [(name, replace(message, targets=tuple(targets))) for name, targets in groups.items()]
        point_of_no_return()  # from here a part may have reached a device (its parts run on other threads)
        if len(calls) == 1:
            answers = [self._one(*calls[0])]
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(len(MOBILE_PARTS) + 1, thread_name_prefix="hato-push-part")
            answers = list(self._pool.map(lambda call: self._one(*call), calls))
        return _merged(answers)

    def _one(self, name: str, message: Message) -> tuple[str, Receipt | ProviderError]:
        try:
            return name, self.parts[name].send(message)
        except ProviderError as exc:
            return name, exc


def _merged(answers: list[tuple[str, Receipt | ProviderError]]) -> Receipt:
    """One receipt for the parts' answers, or the error of a message no target took."""
    reached: tuple[str, ...] = ()
    invalidated: tuple[str, ...] = ()
    outcomes: tuple[TargetOutcome, ...] = ()
    took, errors = [], []
    for name, answer in answers:
        invalidated += answer.invalidated
        outcomes += answer.outcomes
        if isinstance(answer, Receipt):
            reached += answer.reached
            took.append((name, answer))
        else:
            errors.append(answer)
    if took:
        provider = "+".join(receipt.provider for _, receipt in took)
        return Receipt(provider, took[0][1].message_id, reached=reached, invalidated=invalidated, outcomes=outcomes)
    transient = [error for error in errors if error.transient]
    first = (transient or errors)[0]
    waits = [error.retry_after for error in transient if error.retry_after]
    cls = TransientError if transient else PermanentError
    raise cls(str(first), kind=first.kind, retry_after=max(waits) if waits else None, invalidated=invalidated,
              outcomes=outcomes)  # fmt: skip
