"""What a sent attempt says of the targets that did not take it (the delivery log's "Not reached")."""

from __future__ import annotations

from app.delivery.sending import not_reached
from app.limits import ERROR_TEXT_MAX
from app.providers import TargetOutcome


def test_every_target_took_it_says_nothing():
    assert not_reached((TargetOutcome("apns:host", "sent", target="a" * 64),)) is None
    assert not_reached(()) is None


def test_the_others_are_named_with_their_outcome_and_what_their_service_said():
    token = "1a2b3c4d" * 8
    note = not_reached((
        TargetOutcome("apns:api.push.apple.com", "sent", target="f" * 64),
        TargetOutcome("apns:api.push.apple.com", "permanent", target=token, error="400 BadDeviceToken"),
        TargetOutcome("fcm.googleapis.com:443", "transient", 30.0),  # no target (Web Push): its service's scope
    ))  # fmt: skip
    assert note == "1/3 · 1a2b3c4d1a2b… permanent: 400 BadDeviceToken; fcm.googleapis.com:443 transient"
    assert token not in note  # a device token is shortened


def test_a_long_note_is_cut_to_the_ledgers_limit():
    outcomes = tuple(TargetOutcome("s", "permanent", target=f"slack:C{n}", error="x" * 150) for n in range(40))
    assert len(not_reached(outcomes)) == ERROR_TEXT_MAX
