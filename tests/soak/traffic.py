"""The soak's mixed traffic, one thread each: API ingest, topic fanouts, inbox reads, campaigns, websocket clients.

Every client outlives the processes it talks to: a request that fails because its web process was killed (or
PostgreSQL is failing over) goes again to the next one (with the same Idempotency-Key, so it is accepted once),
and a socket whose process died connects again until the process is back. Sockets ack every frame, as the
inbox page does. The times the clients see (an ingest's answer, a badge frame after it) are kept for the
report's windows.
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
from tests.realtime.helpers import COUNT_RE, ack, close_quietly, connect, frame_seq

RETRY_SECONDS = 60  # how long one ingest keeps trying while web processes are killed and restarted


@dataclass
class Tally:
    """What the clients saw, shared by the threads (Counter updates hold the lock)."""

    accepted: set[int] = field(default_factory=set)  # notification ids from 202 answers
    accepted_at: dict[int, float] = field(default_factory=dict)  # notification id → time.time() of its 202
    fanouts: list[str] = field(default_factory=list)  # the titles of the topic posts answered 202
    answers: Counter = field(default_factory=Counter)  # ("ingest" | "fanout" | "inbox", status or error class)
    ingest_seconds: list[tuple[float, float]] = field(default_factory=list)  # (time of the 202, its round trip)
    badge_seconds: list[tuple[float, float]] = field(default_factory=list)  # (time of the 202, until a frame)
    unseen: dict[str, list[float]] = field(default_factory=dict)  # recipient → 202 times no frame followed yet
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, what: str, outcome: object) -> None:
        with self.lock:
            self.answers[(what, str(outcome))] += 1

    def took(self, recipient: str, answer: dict, began: float) -> None:
        """An ingest's 202: its notifications, when, and how long the answer took."""
        now, ids = time.time(), [r["notification_id"] for r in answer["results"]]
        with self.lock:
            self.accepted.update(ids)
            self.accepted_at.update(dict.fromkeys(ids, now))
            self.ingest_seconds.append((now, now - began))
            if recipient in self.unseen:
                self.unseen[recipient].append(now)

    def framed(self, recipient: str) -> None:
        """A badge frame reached recipient's socket: it shows every notification accepted before it."""
        now = time.time()
        with self.lock:
            waiting, self.unseen[recipient] = self.unseen.get(recipient, []), []
            self.badge_seconds += [(at, now - at) for at in waiting]


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


def _post_until_accepted(
    urls: list[str], key: str, idempotency_key: str, body: dict, what: str, tally: Tally, first: int
) -> dict | None:
    """POST body to the web processes in turn until one answers 202 (its answer) or RETRY_SECONDS pass (None)."""
    deadline, attempt = time.monotonic() + RETRY_SECONDS, first
    while time.monotonic() < deadline:
        try:
            status, answer = _post(urls[attempt % len(urls)], key, idempotency_key, body)
        except (OSError, ValueError) as exc:  # refused, reset, or a half-sent answer: the process died
            status, answer = type(exc).__name__, {}
        tally.note(what, status)
        if status == 202:
            return answer
        attempt += 1
        time.sleep(0.2)
    return None


def ingest(urls: list[str], key: str, recipients: list[str], rps: float, stop: threading.Event, tally: Tally, n: int):
    """POST one notification every 1/rps seconds until stop: two on every channel for one through the workflow."""
    sent = 0
    while not stop.wait(1 / rps):
        sent += 1
        recipient = random.choice(recipients)
        type_ = "soak-flow" if sent % 3 == 0 else "soak-all"
        body = {"type": type_, "recipient": recipient, "title": f"soak:i{n}-{sent}", "body": "A soak notification"}
        began = time.time()
        answer = _post_until_accepted(urls, key, f"soak-{n}-{sent}", body, "ingest", tally, sent)
        if answer is not None:
            tally.took(recipient, answer, began)


def fan_out(urls: list[str], key: str, topic: str, every: float, stop: threading.Event, tally: Tally) -> None:
    """Post to the topic (every follower gets one) every `every` seconds until stop."""
    posted = 0
    while not stop.wait(every):
        posted += 1
        title = f"soak:topic-{posted}"
        body = {"type": "soak-topic", "topic": topic, "title": title, "body": "To everyone following"}
        if _post_until_accepted(urls, key, title, body, "fanout", tally, posted) is not None:
            with tally.lock:
                tally.fanouts.append(title)


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
            campaign = create_campaign(None, name=f"Soak {len(started) + 1}", type_="soak-topic",
                                       title="Campaign", body="Body")  # fmt: skip
            send_campaign(None, campaign.id)
            started.append(campaign.id)
            commit().wait()


@dataclass
class SocketClient:
    """One signed-in websocket on one web process, reconnecting after a kill, acking every frame; keeps the last
    badge count and tells the tally when a frame came."""

    user_id: int
    recipient: str  # the member's external id, as the ingest names them
    cookie: str
    base_url: str
    tally: Tally
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
                    if frame and frame_seq(frame) is not None:
                        ack(ws, frame)  # a ping too: an unanswered socket counts as offline
                    if frame and (match := COUNT_RE.search(frame)):
                        self.last, self.frames = int(match.group(1)), self.frames + 1
                        self.tally.framed(self.recipient)
            except (ConnectionClosed, OSError):
                continue
            finally:
                close_quietly(ws)
