"""The soak's cluster: 2 gunicorn web processes, 2 workers and 2 sweepers on one PostgreSQL and one Redis.

Each process can be killed with -9 (its whole process group) and started again in the same place
(a web process on the same port), which is all the soak's killer needs.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.realtime.helpers import Gunicorn
from tests.support import processes
from tests.support.waiting import free_port


@dataclass
class Cluster:
    """Every process of the soak, by name (web1, web2, worker1, worker2, sweeper1, sweeper2)."""

    env: dict[str, str]
    logs: Path
    webs: dict[str, Gunicorn] = field(default_factory=dict)
    others: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [*self.webs, *self.others]

    @property
    def base_urls(self) -> list[str]:
        return [web.base_url for web in self.webs.values()]

    def start(self) -> Cluster:
        for n in (1, 2):
            self._start_web(f"web{n}", free_port())
        for n in (1, 2):
            self._start_cli(f"worker{n}", "worker")
            self._start_cli(f"sweeper{n}", "sweep")
        return self

    def _start_web(self, name: str, port: int) -> None:
        # The production configuration (app/realtime/gunicorn_conf), one gthread worker per process.
        self.webs[name] = Gunicorn(port, env=self.env, log_path=self.logs / f"{name}.log").start(timeout=60)

    def _start_cli(self, name: str, command: str) -> None:
        self.others[name] = processes.spawn(processes.flask_args(command), self.env, self.logs / f"{name}.log")

    def kill_and_restart(self, name: str) -> None:
        """kill -9 the named process (with its children) and start it again in its place."""
        if name in self.webs:
            web = self.webs[name]
            web.kill()
            self._start_web(name, web.port)
            return
        proc = self.others[name]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        self._start_cli(name, "worker" if name.startswith("worker") else "sweep")

    def dead(self) -> list[str]:
        """Names of processes that exited by themselves."""
        gone = [name for name, web in self.webs.items() if web.proc is None or web.proc.poll() is not None]
        return gone + [name for name, proc in self.others.items() if proc.poll() is not None]

    def stop(self) -> None:
        for web in self.webs.values():
            web.stop()
        for proc in self.others.values():
            processes.stop(proc)
