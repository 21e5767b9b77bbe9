"""The Twilio stand-in served in a process of its own, for benchmarks: SmsStandin starts and asks it.

    python -m tests.perf.sms_standin

The child runs tests/support/twilio_server.py's TwilioServer on 127.0.0.1 (the Messages API, Basic auth, every
form checked; no status callbacks asked for, none posted), prints one JSON line of the TWILIO_* settings that
reach it, then answers one JSON line per command read on stdin: `counts` (accepted, distinct deliveries,
duplicates, refused), `received` (accepted only: cheap enough to poll), `stamps` (the receipt time, time.time()
in this process, of each accepted body that starts with a stamped prefix, first receipt only), `reset`. A
delivery is identified by (To, Body): the benchmarks give each row its own number or its own text. EOF,
`stop` or SIGTERM stops the server. A process of its own, so the stand-in's CPU is not taken from the
benchmark's GIL.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from tests.perf.mobile_standins import _no_delay

ANSWER_SECONDS = 30
STAMPED = "OTP-"  # bodies starting with this get their receipt time kept (the one-time-password latency)


def serve() -> None:
    """Run the stand-in until stdin ends; see the module docstring."""
    from tests.support.twilio_server import TwilioServer

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so the with-block below stops the server
    deliveries: Counter = Counter()
    stamps: dict[str, float] = {}
    lock = threading.Lock()

    def on_send(to: str, status: int, body: str) -> None:
        if status != 201:
            return
        now = time.time()
        with lock:
            deliveries[(to, body)] += 1
            if body.startswith(STAMPED):
                stamps.setdefault(body.split("\n", 1)[0], now)

    with TwilioServer(callback_delay=0) as server:
        _no_delay(server.httpd)
        server.state.record = False  # 100,000s of sends: counted, not kept
        server.state.on_send = on_send
        print(json.dumps(server.settings()), flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "stop":
                break
            with lock, server.state.lock:
                if command == "counts":
                    answer = {"accepted": server.state.accepted, "distinct": len(deliveries),
                              "duplicates": sum(n - 1 for n in deliveries.values()),
                              "refused": server.state.refused}  # fmt: skip
                elif command == "received":
                    answer = {"accepted": server.state.accepted}
                elif command == "stamps":
                    answer = dict(stamps)
                elif command == "reset":
                    deliveries.clear()
                    stamps.clear()
                    server.state.accepted = server.state.refused = 0
                    server.state.recipients.clear()
                    answer = {}
                else:
                    answer = {"error": f"unknown command {command!r}"}
            print(json.dumps(answer), flush=True)


class SmsStandin:
    """The parent's handle on the child: its settings, and its answers."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        from tests.support.processes import ROOT

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.perf.sms_standin"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(log, "ab"),
            text=True,
            start_new_session=True,
        )
        self.settings: dict = self._line(60)

    def _line(self, seconds: float) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], seconds)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise SystemExit("bench: the Twilio stand-in did not answer (see twilio.log)")
        return json.loads(line)

    def ask(self, command: str) -> dict:
        """Send one command; return the child's answer."""
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._line(ANSWER_SECONDS)

    def close(self) -> None:
        """Stop the child (stdin closed: it stops its server), killing its group if it lingers."""
        if self.proc.poll() is not None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(15)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


if __name__ == "__main__":
    serve()
