"""The APNs and FCM stand-ins served in a process of their own, for benchmarks: Standins starts and asks it.

    python -m tests.perf.mobile_standins DIRECTORY

The child runs tests/support/apns_server.py's ApnsServer and tests/support/fcm_server.py's FcmServer on
127.0.0.1 (their keys, certificates and service account written under DIRECTORY), prints one JSON line
of the APNS_* and FCM_* settings that reach them, then answers one JSON line per command read on stdin:
`counts` (accepted, refused, distinct device tokens, connections, peak in flight, per stand-in), `reset`
(forget what was received). EOF, `stop` or SIGTERM stops both servers. A process of its own, so the
stand-ins' CPU is not taken from the benchmark's GIL.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

ANSWER_SECONDS = 30  # the child answers a command at once; longer means it is stuck


def _counts(apns, fcm) -> dict:
    received = list(apns.received)
    with fcm.state.lock:
        fcm_received = list(fcm.state.received)
        refused = sum(1 for _, status in fcm.state.answered if status != 200) + len(fcm.state.rejected)
        fcm_figures = {"refused": refused,
                       "connections": len(fcm.state.connections), "peak_in_flight": fcm.state.peak_in_flight,
                       "tokens_issued": fcm.state.tokens_issued}  # fmt: skip
    return {
        "apns": {
            "received": len(received),
            "distinct": len({push.token for push in received}),
            "refused": len(apns.refused),
            "connections": len(apns.connections),
            "peak_in_flight": apns.max_streams,
        },  # fmt: skip
        "fcm": {"received": len(fcm_received), "distinct": len({r.token for r in fcm_received}), **fcm_figures},
    }


def _received(apns, fcm) -> dict:
    # A bare count, cheap enough to ask every few milliseconds while a phase runs.
    return {"apns": len(apns.received), "fcm": len(fcm.state.received)}


def _reset(apns, fcm) -> None:
    apns.received.clear()
    apns.refused.clear()
    apns.connections.clear()
    apns.max_streams = 0
    with fcm.state.lock:
        for records in (fcm.state.received, fcm.state.rejected, fcm.state.answered):
            records.clear()
        fcm.state.connections.clear()
        fcm.state.peak_in_flight = 0


def _no_delay(httpd) -> None:
    """Answer without Nagle's delay, as Google's front ends do.

    http.server writes an answer's headers and body in two sends; with Nagle's algorithm on, the body
    waits for the client's delayed ACK of the headers (40 ms on Linux), so one request at a time would
    measure that timer instead of either side.
    """
    finish_request = httpd.finish_request

    def no_delay(request, client_address) -> None:
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        finish_request(request, client_address)

    httpd.finish_request = no_delay


def serve(directory: Path) -> None:
    """Run both stand-ins until stdin ends; see the module docstring."""
    from tests.support.apns_server import ApnsServer
    from tests.support.fcm_server import FcmServer

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so the finally below stops the servers
    apns = ApnsServer(directory).start()
    fcm = FcmServer()
    _no_delay(fcm.httpd)
    fcm.__enter__()
    try:
        # 127.0.0.1, not localhost: the certificate names both, and the bench sends nowhere else.
        settings = {**apns.settings(APNS_ENDPOINT=f"https://127.0.0.1:{apns.port}"),
                    **fcm.settings(fcm.service_account(directory))}  # fmt: skip
        print(json.dumps({k: v for k, v in settings.items() if k.startswith(("APNS_", "FCM_"))}), flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "stop":
                break
            if command == "counts":
                answer = _counts(apns, fcm)
            elif command == "received":
                answer = _received(apns, fcm)
            elif command == "reset":
                _reset(apns, fcm)
                answer = {}
            else:
                answer = {"error": f"unknown command {command!r}"}
            print(json.dumps(answer), flush=True)
    finally:
        apns.stop()
        fcm.__exit__(None, None, None)


class Standins:
    """The parent's handle on the child: its settings, and its answers."""

    def __init__(self, directory: Path, env: dict[str, str], log: Path) -> None:
        from tests.support.processes import ROOT

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.perf.mobile_standins", str(directory)],
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
            raise SystemExit("bench: the APNs/FCM stand-ins did not answer (see standins.log)")
        return json.loads(line)

    def ask(self, command: str) -> dict:
        """Send one command; return the child's answer."""
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._line(ANSWER_SECONDS)

    def close(self) -> None:
        """Stop the child (stdin closed: it stops its servers), killing its group if it lingers."""
        if self.proc.poll() is not None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(15)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
