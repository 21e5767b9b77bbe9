"""The soak's mixed traffic, one thread each: API ingest, inbox reads, campaigns, and websocket clients.

Every client outlives the processes it talks to: a request that fails because its web process was
killed goes again to the other one (ingest with the same Idempotency-Key, so it is accepted once),
and a socket whose process died connects again until the process is back.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

from simple_websocket import ConnectionClosed

from app.campaigns.service import create_campaign, send_campaign
from app.unitofwork import commit
from tests.realtime.helpers import COUNT_RE, close_quietly, connect

RETRY_SECONDS = 60  # how long one ingest keeps trying while web processes are killed and restarted


@dataclass
class Tally:
    """What the clients saw, shared by the threads (Counter updates hold the lock)."""

    accepted: set[int] = field(default_factory=set)  # notification ids from 202 answers
    answers: Counter = field(default_factory=Counter)  # ("ingest" | "inbox", status or error class)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, what: str, outcome: object) -> None:
        with self.lock:
            self.answers[(what, str(outcome))] += 1


def _post(url: str, key: str, idempotency_key: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url + "/v1/notifications",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                 "Idempotency-Key": idempotency_key},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def ingest(urls: list[str], key: str, recipients: list[str], rps: float, stop: threading.Event, tally: Tally, n: int):
    """POST one notification every 1/rps seconds to alternating web processes until stop; retry across them."""
    sent = 0
    while not stop.wait(1 / rps):
        sent += 1
        idempotency_key = f"soak-{n}-{sent}"
        body = {"type": "comment", "recipient": random.choice(recipients), "title": f"Soak {n}.{sent}"}
        deadline = time.monotonic() + RETRY_SECONDS
        attempt = sent
        while time.monotonic() < deadline:
            try:
                status, answer = _post(urls[attempt % len(urls)], key, idempotency_key, body)
            except (OSError, ValueError) as exc:  # refused, reset, or a half-sent answer: the process died
                status, answer = type(exc).__name__, {}
            tally.note("ingest", status)
            if status == 202:
                with tally.lock:
                    tally.accepted.update(r["notification_id"] for r in answer["results"])
                break
            attempt += 1
            time.sleep(0.2)


def read_inboxes(urls: list[str], cookies: list[str], stop: threading.Event, tally: Tally) -> None:
    """GET /inbox as a signed-in user, twice a second, on alternating web processes."""
    n = 0
    while not stop.wait(0.5):
        n += 1
        request = urllib.request.Request(urls[n % len(urls)] + "/inbox",
                                         headers={"Cookie": f"session={random.choice(cookies)}"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                tally.note("inbox", response.status)
        except urllib.error.HTTPError as exc:
            tally.note("inbox", exc.code)
        except OSError as exc:
            tally.note("inbox", type(exc).__name__)


def run_campaigns(app, every: float, stop: threading.Event, started: list[int]) -> None:
    """Send a campaign to every user now and then, as an operator's "Send now" does (its job follows the commit)."""
    while not stop.wait(every):
        with app.app_context():
            campaign = create_campaign(None, name=f"Soak {len(started) + 1}", type_="comment",
                                       title="Campaign", body="Body")  # fmt: skip
            send_campaign(None, campaign.id)
            started.append(campaign.id)
            commit().wait()


@dataclass
class SocketClient:
    """One signed-in websocket on one web process, reconnecting after a kill; keeps the last badge count."""

    user_id: int
    cookie: str
    base_url: str
    last: int | None = None
    frames: int = 0
    connects: int = 0

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                ws = connect(self.base_url, self.cookie)
            except Exception:  # noqa: BLE001  # the process is down (being restarted): try again shortly
                stop.wait(0.5)
                continue
            self.connects += 1
            try:
                while not stop.is_set():
                    frame = ws.receive(timeout=0.5)
                    if frame and (match := COUNT_RE.search(frame)):
                        self.last, self.frames = int(match.group(1)), self.frames + 1
            except (ConnectionClosed, OSError):
                continue
            finally:
                close_quietly(ws)
