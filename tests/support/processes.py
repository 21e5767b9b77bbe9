"""Real processes for chaos tests and benchmarks: spawn one in its own session, the SMTP sink, stop them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start `python args…` from the repo root in its own session (so its group can be killed)."""
    handle = open(log, "ab")
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def flask_args(*command: str) -> list[str]:
    """`python -m flask --app wsgi COMMAND…`."""
    return ["-m", "flask", "--app", "wsgi", *command]


def start_sink(port: int, log: Path, out: Path, stamp: bool = False) -> subprocess.Popen:
    """Start the recording SMTP sink in its own process and wait until it accepts connections.

    With stamp, each log line starts with the receipt time (read them with smtp.stamped_arrivals).
    """
    argv = ["-m", "tests.support.smtp", "--port", str(port), "--log", str(log)] + (["--stamp"] if stamp else [])
    proc = spawn(argv, dict(os.environ), out)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the SMTP sink did not start")


def message_ids(log: Path) -> list[str]:
    """Every Message-ID the sink logged, in arrival order (with duplicates)."""
    if not log.exists():
        return []
    return [line for line in log.read_text(encoding="utf-8").splitlines() if line]


def stop_all(procs, timeout: float = 10) -> None:
    """SIGTERM every process group at once, then SIGKILL what lingers past one shared deadline.

    One after another, each process's shutdown (a worker finishing its job) was waited for in turn: a chaos test's
    teardown of a sink, two workers and a sweeper took 10-18 s.
    """
    running = [proc for proc in procs if proc is not None and proc.poll() is None]
    for proc in running:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    for proc in running:
        try:
            proc.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            stop(proc, timeout=0)


def stop(proc: subprocess.Popen | None, timeout: float = 10) -> None:
    """SIGTERM the process group, SIGKILL it if it lingers."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
    except ProcessLookupError:
        pass
