"""Signals and supervised child processes."""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from app.devstack.settings import (
    BASE_URL,
    HOST,
    ROOT,
    STOP_GRACE_SECONDS,
    VAR,
    _out_lock,
    say,
)

# --- signals --------------------------------------------------------------------------------------


class Interrupted(Exception):
    """Ctrl-C or SIGTERM arrived."""


class ChildDied(Exception):
    """A supervised process exited on its own."""


class Signals:
    """SIGINT/SIGTERM raise Interrupted, except inside `with signals.deferred():` (then afterwards)."""

    def __init__(self) -> None:
        self.depth = 0
        self.pending: int | None = None
        self.stopping = False

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._handler)
        signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum, frame) -> None:
        if self.stopping:
            say("already stopping, please wait…")
            return
        if self.depth:
            self.pending = signum
            return
        raise Interrupted(signum)

    def deferred(self) -> "Signals":
        return self

    def __enter__(self) -> None:
        self.depth += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        self.depth -= 1
        if not self.depth and self.pending is not None and exc_type is None:
            signum, self.pending = self.pending, None
            raise Interrupted(signum)


# --- child processes ------------------------------------------------------------------------------


class Child:
    """A supervised process in its own session; its output is prefixed with its name."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pump = threading.Thread(target=self._pump, name=f"pump-{name}", daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with _out_lock:
                print(f"{self.name:>7} | {line}", flush=True)

    def running(self) -> bool:
        """Whether the process or anything left in its process group is alive."""
        if self.proc.poll() is None:
            return True
        try:
            os.killpg(self.proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def stop_children(children: list[Child]) -> None:
    """SIGTERM every child's process group, SIGKILL what is left after STOP_GRACE_SECONDS."""
    live = [c for c in children if c.running()]
    if not live:
        return
    say("stopping " + ", ".join(c.name for c in live))
    for child in live:
        child.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while time.monotonic() < deadline and any(c.running() for c in live):
        time.sleep(0.1)
    for child in live:
        if child.running():
            say(f"{child.name} did not stop within {STOP_GRACE_SECONDS:.0f} s; killing it")
            child.signal_group(signal.SIGKILL)
    for child in children:
        try:
            child.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        child.pump.join(timeout=2)


def check_children(children: list[Child]) -> None:
    for child in children:
        code = child.proc.poll()
        if code is not None:
            raise ChildDied(f"{child.name} exited unexpectedly (exit code {code})")


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def wait_for_web(children: list[Child], seconds: float = 60) -> str:
    """Wait until /healthz answers; return its status line."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        check_children(children)
        try:
            # BASE_URL is this module's own http://127.0.0.1 constant, never user input.
            with urllib.request.urlopen(f"{BASE_URL}/healthz", timeout=2) as response:  # noqa: S310
                return f"{response.status} {json.loads(response.read()).get('status')}"
        except urllib.error.HTTPError as exc:
            return f"{exc.code} (see {BASE_URL}/healthz)"
        except (urllib.error.URLError, OSError, ValueError):
            time.sleep(0.3)
    raise ChildDied(f"the web server did not answer on {BASE_URL} within {seconds:.0f} s")


def wait_for_standin(child: Child, settings_file: Path, port: int, seconds: float = 30) -> dict[str, str]:
    """Wait until a stand-in wrote settings_file (it does once it listens) and answers on port; return the file."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        check_children([child])
        if settings_file.exists() and port_in_use(port):
            return {name: str(value) for name, value in json.loads(settings_file.read_text()).items()}
        time.sleep(0.1)
    raise ChildDied(f"{child.name} did not answer on port {port} within {seconds:.0f} s")


def flask_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "flask", "--app", "wsgi", *args]


def dev_secret_key() -> str:
    """A random SECRET_KEY kept in var/secret_key so sessions survive restarts."""
    path = VAR / "secret_key"
    if path.exists() and path.read_text().strip():
        return path.read_text().strip()
    VAR.mkdir(exist_ok=True)
    key = secrets.token_urlsafe(48)
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


def run_foreground(argv: list[str], env: dict[str, str]) -> int:
    """Run argv in our process group (the terminal's Ctrl-C reaches it directly); forward SIGTERM."""
    proc = subprocess.Popen(argv, cwd=ROOT, env=env)

    def on_signal(signum, frame):
        if signum == signal.SIGTERM and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 - code if code < 0 else code
