"""Helpers for websocket tests and the realtime benchmark: session cookies, clients, servers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from simple_websocket import Client, ConnectionClosed
from werkzeug.serving import make_server

from app import create_app
from app.auth import sessions
from app.extensions import db, redis
from app.live import registry

ROOT = Path(__file__).resolve().parents[2]
COUNT_RE = re.compile(r'data-count="(\d+)"')


def session_data(user_id: int, version: int = 0, **extra) -> dict:
    """Return what a sign-in leaves in the session (Flask-Login's keys and app/auth/sessions.py's stamp)."""
    return {"_user_id": str(user_id), "_fresh": True, **sessions.stamp(user_id, version), **extra}


def session_cookie(app, user_id: int | None, version: int = 0, **extra) -> str:
    """Return a signed session cookie value as a sign-in would leave it (None: signed but signed out).

    version is the user's session_version at sign-in (0 for a user nobody bumped); extra overrides fields.
    """
    data = session_data(user_id, version, **extra) if user_id is not None else {"csrf_token": "x" * 40}
    return app.session_interface.get_signing_serializer(app).dumps(data)


def ws_url(base_url: str) -> str:
    """Return the /ws URL for an http(s) base URL."""
    return base_url.replace("http://", "ws://").replace("https://", "wss://") + "/ws"


def connect(base_url: str, cookie: str | None, origin: str | None = "same") -> Client:
    """Open a websocket to base_url's /ws with a session cookie and an Origin (default: base_url)."""
    headers = {}
    if origin:
        headers["Origin"] = base_url if origin == "same" else origin
    if cookie:
        headers["Cookie"] = f"session={cookie}"
    return Client.connect(ws_url(base_url), headers=headers)


def frame_count(frame: str) -> int:
    """Return the badge count in a websocket frame."""
    match = COUNT_RE.search(frame)
    assert match, f"no badge in frame: {frame!r}"
    return int(match.group(1))


SEQ_RE = re.compile(r'^<!--hato:seq=(\d+)-->|"seq":(\d+)')


def frame_seq(frame: str) -> int | None:
    """Return the sequence number a frame carries (HTML comment or JSON field)."""
    match = SEQ_RE.search(frame)
    return int(match.group(1) or match.group(2)) if match else None


def is_ping(frame: str) -> bool:
    """Whether a frame only asks for an ack (changes nothing on the page)."""
    return bool(re.fullmatch(r"<!--hato:seq=\d+-->", frame)) or '"type":"ping"' in frame


def ack(ws: Client, frame: str) -> None:
    """Ack a frame as realtime.js and the bell do."""
    ws.send(json.dumps({"type": "ack", "seq": frame_seq(frame)}))


def wait_for_frame(ws: Client, predicate, timeout: float = 3.0, acking: bool = False) -> str:
    """Return the first frame (within timeout, pings skipped) for which predicate(frame) is true.

    acking: ack every frame read, as a browser tab does.
    """
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        frame = ws.receive(timeout=max(0.01, deadline - time.monotonic()))
        if frame is None:
            break
        if acking:
            ack(ws, frame)
        if is_ping(frame):
            continue
        if predicate(frame):
            return frame
        seen.append(frame)
    raise AssertionError(f"no matching frame within {timeout}s; got {seen!r}")


def wait_for_count(ws: Client, expected: int, timeout: float = 10.0, acking: bool = False) -> str:
    """Return the first frame whose badge count is expected."""
    return wait_for_frame(ws, lambda frame: frame_count(frame) == expected, timeout, acking)


def wait_until_listening(app, user_id: int, seconds: float = 10.0) -> None:
    """Wait until each process holding user_id's sockets listens on its node channel.

    A process subscribes in the background once started; an event published before that is lost by design, and
    the resync on subscribing shows the count without the event's toast.
    """
    from tests.support.waiting import wait_for

    with app.app_context():
        client = redis.realtime()

        def listening() -> bool:
            nodes = registry.nodes_of(client, [user_id])
            return bool(nodes) and all(client.pubsub_numsub(registry.node_channel(n))[0][1] for n in nodes)

        wait_for(listening, seconds, f"the process holding user {user_id}'s socket to listen")


def close_quietly(ws: Client) -> None:
    """Close a client socket that may already be closed."""
    try:
        ws.close()
    except (ConnectionClosed, OSError):
        pass


def insert_notification(user_id: int, title: str = "Hello", key: str | None = None) -> int:
    """Insert and commit one unread notification as ingest does (current app context); return its id."""
    db.session.execute(
        sa.text("INSERT INTO notification_types (type, label) VALUES ('comment', 'Comment') ON CONFLICT DO NOTHING")
    )
    new_id = db.session.execute(
        sa.text(
            "INSERT INTO notifications (user_id, type, title, body, dedupe_key) "
            "VALUES (:user_id, 'comment', :title, 'Body', :key) RETURNING id"
        ),
        {"user_id": user_id, "title": title, "key": key or f"rt:{time.monotonic_ns()}"},
    ).scalar_one()
    db.session.commit()
    return new_id


def create_api_key(app) -> str:
    """Create and commit an API key in app's database; return the key."""
    from app.api_keys.service import create_api_key as create

    with app.app_context():
        key = create(None, "realtime tests")
        db.session.commit()
        db.session.remove()
    return key


def api_notify(base_url: str, key: str, external_id: str, title: str, **fields) -> dict:
    """POST /v1/notifications for one recipient as a product service does; return the 202 body."""
    body = json.dumps({"type": "comment", "recipient": external_id, "title": title, **fields}).encode()
    request = urllib.request.Request(
        base_url + "/v1/notifications",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 202, response.status
        return json.loads(response.read())


class ServerThread:
    """A threaded Werkzeug server with its own app instance; stop() closes its sockets with 1001."""

    def __init__(self, port: int, **config) -> None:
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        self.app = create_app({"TESTING": False, "SERVER_NAME": None, "BASE_URL": self.base_url, **config})
        self._server = make_server("127.0.0.1", port, self.app, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> ServerThread:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the websockets (1001), stop serving and free the port."""
        from app.realtime.hub import hub_for

        hub_for(self.app).shutdown()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        with self.app.app_context():
            db.engine.dispose()


@contextmanager
def server_thread(port: int, **config):
    """Run a ServerThread for the duration of the block."""
    server = ServerThread(port, **config).start()
    try:
        yield server
    finally:
        server.stop()


class Gunicorn:
    """A real `gunicorn -c python:app.realtime.gunicorn_conf wsgi:app` process on 127.0.0.1:port."""

    def __init__(
        self,
        port: int,
        *,
        worker_class: str = "gthread",
        sockets: int = 64,
        env: dict | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        self.worker_class = worker_class
        self.sockets = sockets
        self.env = {
            **os.environ,
            "BASE_URL": self.base_url,
            "WEB_MAX_SOCKETS": str(sockets),
            "WEB_WORKER_CLASS": worker_class,
            "WEB_WORKERS": "1",
            **(env or {}),
        }
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 20.0) -> Gunicorn:
        """Start the process and wait until /healthz answers."""
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:app.realtime.gunicorn_conf",
                "wsgi:app",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--graceful-timeout",
                "5",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(self.base_url + "/healthz", timeout=1) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        self.kill()
        raise RuntimeError("gunicorn did not become healthy")

    def worker_pids(self) -> list[int]:
        """Return the pids of the worker processes."""
        import psutil

        return [child.pid for child in psutil.Process(self.proc.pid).children()]

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (graceful) and wait; SIGKILL if it does not exit in time. Return the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """SIGKILL the whole process group."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
