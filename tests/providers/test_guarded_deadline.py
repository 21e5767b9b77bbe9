"""The guarded transport's deadline: a blocked read is cut when its exchange's time is up, and a stream of
quick exchanges under a long deadline does not wake the watchdog thread once per request."""

from __future__ import annotations

import socket
import threading
import time

from app.providers.guardedhttp import _Watchdog


class CountingEvent(threading.Event):
    """An Event that counts set() calls (each one a wake-up of the watchdog thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.sets = 0

    def set(self) -> None:
        self.sets += 1
        super().set()


def blocked_read(watchdog: _Watchdog, seconds: float) -> float:
    """Arm for seconds, read from a socket nobody writes to; return how long until the read was cut."""
    ours, theirs = socket.socketpair()
    try:
        watchdog.arm(seconds)
        watchdog.watch(ours)
        started = time.monotonic()
        assert ours.recv(1) == b""  # shut by the watchdog: the read returns end-of-stream
        elapsed = time.monotonic() - started
        assert watchdog.disarm() is True
        return elapsed
    finally:
        ours.close()
        theirs.close()


def quick_exchanges(watchdog: _Watchdog, count: int, seconds: float) -> None:
    for _ in range(count):
        watchdog.arm(seconds)
        assert watchdog.disarm() is False


def test_a_blocked_read_is_cut_at_its_deadline():
    watchdog = _Watchdog()
    try:
        assert 0.25 <= blocked_read(watchdog, 0.3) < 1.5
    finally:
        watchdog.close()


def test_quick_exchanges_under_a_long_deadline_wake_the_thread_once_not_per_request():
    watchdog = _Watchdog()
    watchdog._wake = CountingEvent()
    try:
        quick_exchanges(watchdog, 1, 30.0)
        time.sleep(0.1)  # the thread has read the first deadline and sleeps until it
        quick_exchanges(watchdog, 1000, 30.0)
        assert watchdog._wake.sets <= 2
    finally:
        watchdog.close()


def test_a_shorter_deadline_after_long_ones_still_cuts_in_time():
    watchdog = _Watchdog()
    try:
        quick_exchanges(watchdog, 1, 30.0)
        time.sleep(0.1)  # asleep until 30 s from now: the short deadline must wake it
        assert blocked_read(watchdog, 0.3) < 1.5
    finally:
        watchdog.close()


def test_a_deadline_later_than_the_one_the_thread_sleeps_until_is_read_when_it_wakes():
    watchdog = _Watchdog()
    try:
        quick_exchanges(watchdog, 1, 0.3)
        time.sleep(0.1)  # asleep until the first exchange's deadline, 0.2 s from now
        started = time.monotonic()
        cut_after = blocked_read(watchdog, 0.6)  # not woken: it wakes at the old deadline, then sleeps to this one
        assert 0.55 <= time.monotonic() - started and cut_after < 1.8
    finally:
        watchdog.close()
