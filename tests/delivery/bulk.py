"""Set-based test data for load: users, notifications and pending e-mail deliveries in a few statements."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

from app.extensions import db

ROOT = Path(__file__).resolve().parents[2]

BULK_SQL = [
    """INSERT INTO notification_types (type, label, default_email, priority)
       VALUES (:type, 'Load test', true, 'default') ON CONFLICT (type) DO NOTHING""",
    """INSERT INTO users (email, display_name, external_id)
       SELECT :prefix || '-' || g || '@example.com', 'User ' || g, :prefix || '-' || g
       FROM generate_series(1, :users) g""",
    """INSERT INTO notifications (user_id, type, title, body, dedupe_key, link_path)
       SELECT u.id, :type, 'Hello ' || g, 'A short body for message ' || g, :prefix || ':' || u.id || ':' || g, '/inbox'
       FROM users u CROSS JOIN generate_series(1, :per_user) g
       WHERE u.external_id LIKE :prefix || '-%'""",
]
DELIVERIES_SQL = """INSERT INTO notification_deliveries (notification_id, channel)
    SELECT n.id, 'email' FROM notifications n WHERE n.dedupe_key LIKE :prefix || ':%' ORDER BY n.id
    RETURNING id"""


def create_email_deliveries(count: int, prefix: str = "load", per_user: int = 10, type_: str = "load") -> list[int]:
    """Insert count pending e-mail deliveries (count/per_user users) and commit; return their ids."""
    users = max(count // per_user, 1)
    params = {"type": type_, "prefix": prefix, "users": users, "per_user": per_user}
    for statement in BULK_SQL:
        db.session.execute(sa.text(statement), params)
    ids = sorted(db.session.execute(sa.text(DELIVERIES_SQL), params).scalars())
    db.session.commit()
    return ids


def status_counts() -> dict[str, int]:
    """Rows per status, read fresh."""
    db.session.rollback()
    rows = db.session.execute(sa.text("SELECT status, count(*) FROM notification_deliveries GROUP BY status"))
    return dict(rows.all())


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start `python args…` from the repo root in its own session (so its group can be killed)."""
    handle = open(log, "ab")
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def flask_args(*command: str) -> list[str]:
    """`python -m flask --app wsgi COMMAND…`."""
    return ["-m", "flask", "--app", "wsgi", *command]


def start_sink(port: int, log: Path, out: Path) -> subprocess.Popen:
    """Start the recording SMTP sink in its own process and wait until it accepts connections."""
    import socket

    proc = spawn(["-m", "tests.delivery.sink", "--port", str(port), "--log", str(log)], dict(os.environ), out)
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


def stop(proc: subprocess.Popen | None, timeout: float = 10) -> None:
    """SIGTERM the process group, SIGKILL it if it lingers."""
    import signal

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
