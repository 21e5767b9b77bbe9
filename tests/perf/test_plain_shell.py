"""Benchmarks start from a plain shell: `python -m tests.perf.<name>` with no dev mode and no secret set.

Their workers and web processes run wsgi.py's production start-up check, which refuses the published
"bench-secret" the benchmarks once set (so bench_delivery timed out waiting for its workers). The shared
set-up (tests/support/databases.py bench_environment) gives each run a secret of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.processes import ROOT

# What a benchmark does before it starts its workers (bench_delivery, bench_digest, bench_webhooks …), then
# one worker started as they start theirs (tests/support/processes.py), told to stop once the queues are empty.
BENCH_START = """
import os, subprocess, sys
from tests.support import processes
from tests.support.databases import bench_environment
bench_environment(os.environ["DATABASE_URL"], os.environ["REDIS_URL"])
print(len(os.environ["SECRET_KEY"]), flush=True)
argv = [sys.executable, *processes.flask_args("worker", "--burst")]
sys.exit(subprocess.run(argv, env=dict(os.environ), cwd=processes.ROOT).returncode)
"""


def _plain_shell(**env: str) -> dict:
    """This environment as a plain shell has it: the services' URLs, no dev or test mode, no secret."""
    shell = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "HATO_DEV", "HATO_TEST")}
    return {**shell, **env}


def _start(env: dict) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", BENCH_START]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_a_benchmarks_worker_starts_from_a_plain_shell():
    started = _start(_plain_shell())
    assert started.returncode == 0, started.stderr[-2000:]
    assert "refusing" not in started.stderr
    assert int(started.stdout.split()[0]) == 64  # 48 random bytes, URL-safe base64


def test_a_published_secret_left_in_the_shell_is_replaced_not_refused():
    started = _start(_plain_shell(SECRET_KEY="bench-secret"))  # what `make bench` used to set
    assert started.returncode == 0, started.stderr[-2000:]
