"""The soak's cluster: 4 gunicorn web processes, 2 workers and 2 sweepers.

Each process can be killed with -9 (its whole process group) and started again in the same place (a web
process on the same port), which is all the soak's killer needs. The last process of each kind is a witness:
never killed, so that its memory over the whole run shows whether anything leaks.
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
    """Every process of the soak, by name (web1 … web4, worker1, worker2, sweeper1, sweeper2)."""

    env: dict[str, str]
    logs: Path
    sizes: dict[str, int] = field(default_factory=lambda: {"web": 4, "worker": 2, "sweeper": 2})
    webs: dict[str, Gunicorn] = field(default_factory=dict)
    others: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [*self.webs, *self.others]

    @property
    def base_urls(self) -> list[str]:
        return [web.base_url for web in self.webs.values()]

    @property
    def witnesses(self) -> list[str]:
        """The processes never killed: the last of each kind."""
        return [f"{kind}{n}" for kind, n in self.sizes.items()]

    @property
    def killable(self) -> list[str]:
        return [name for name in self.names if name not in self.witnesses]

    def start(self) -> Cluster:
        for n in range(1, self.sizes["web"] + 1):
            self._start_web(f"web{n}", free_port())
        for n in range(1, self.sizes["worker"] + 1):
            self._start_cli(f"worker{n}", "worker")
        for n in range(1, self.sizes["sweeper"] + 1):
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

    def rss_kib(self, name: str) -> int:
        """Resident memory of the named process and its children (a gunicorn master and its worker), in KiB."""
        web = self.webs.get(name)
        proc = web.proc if web is not None else self.others[name]
        return sum(_rss_kib(pid) for pid in _tree(proc.pid))

    def dead(self) -> list[str]:
        """Names of processes that exited by themselves."""
        gone = [name for name, web in self.webs.items() if web.proc is None or web.proc.poll() is not None]
        return gone + [name for name, proc in self.others.items() if proc.poll() is not None]

    def stop(self) -> None:
        for web in self.webs.values():
            web.stop()
        for proc in self.others.values():
            processes.stop(proc)


def _tree(pid: int) -> list[int]:
    """pid and its descendants, from /proc."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo += [int(child) for child in task.read_text().split()]
            except OSError:
                continue  # the thread ended meanwhile
    return found


def _rss_kib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0  # it exited meanwhile
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
