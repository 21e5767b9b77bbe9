"""Waiting for a positive signal across threads and processes, and free ports on 127.0.0.1."""

from __future__ import annotations

import socket
import time


def wait_for(predicate, seconds: float, what: str, interval: float = 0.1) -> None:
    """Poll predicate until it holds; fail naming `what` after `seconds` (for tests across processes)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
