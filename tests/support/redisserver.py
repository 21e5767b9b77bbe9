"""A private redis-server for chaos tests: started, stopped and started again EMPTY on the same port.

Never the machine's shared server: each RedisServer is a child `redis-server` in its own process
group on a free 127.0.0.1 port, with no persistence (`--save ""`, no AOF), so a restart really starts
with nothing, as a crashed or replaced Redis does (not only FLUSHDB: every connection is cut too).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis as redis_lib

from tests.support.waiting import free_port, wait_for

START_SECONDS = 10.0


class RedisServer:
    """One redis-server child process on 127.0.0.1:port; stop() and start() keep the port."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        """The REDIS_URL of database 0 on this (private) server."""
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis_lib.Redis:
        """A fresh client (no pooled connection survives a restart in the test's own checks)."""
        return redis_lib.Redis(host="127.0.0.1", port=self.port, socket_timeout=2, socket_connect_timeout=1)

    def start(self) -> RedisServer:
        """Start redis-server empty and wait until it answers PING."""
        if self.running:
            raise RuntimeError(f"redis-server on port {self.port} is already running")
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        log = open(self.workdir / "redis.log", "ab")
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--daemonize", "no", "--dir", str(self.workdir), "--protected-mode", "yes"]
        self.proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.close()
        self.starts += 1
        wait_for(self._answers, START_SECONDS, f"redis-server to answer on port {self.port}")
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"redis-server exited with {self.proc.returncode}; see {self.workdir / 'redis.log'}")
        try:
            return bool(self.client().ping())
        except redis_lib.RedisError:
            return False

    def stop(self, timeout: float = 5.0) -> None:
        """SHUTDOWN NOSAVE (SIGTERM, then SIGKILL if it lingers); return once the port is closed."""
        if not self.running:
            return
        try:
            self.client().shutdown(nosave=True)
        except redis_lib.RedisError:
            pass  # the server closes the connection as it goes (or never answered): the wait below decides
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(timeout)
        wait_for(lambda: not self._port_open(), timeout, f"port {self.port} to close")

    def restart_empty(self, down_seconds: float) -> None:
        """Stop, stay down for down_seconds, start again on the same port with no data."""
        self.stop()
        time.sleep(down_seconds)
        self.start()

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self.proc.pid, signum)
        except ProcessLookupError:
            pass

    def _port_open(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
