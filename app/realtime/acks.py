"""Client acks: every frame a socket sends carries a sequence number, the client acks it, the unacked is resent once.

The wire: an HTML frame (the inbox's htmx partials) starts with the comment `<!--hato:seq=N-->` (htmx
swaps elements only, so the comment changes nothing on the page); a JSON frame (feed sockets, the bell)
has "seq": N. The client answers {"type": "ack", "seq": N}. Acks are cumulative: frames go in order on one
TCP stream, so an ack of N covers every frame up to N.

A frame not acked within REALTIME_ACK_TIMEOUT_SECONDS is resent once on the same socket: only the newest
unacked one, since every frame carries the full count (resending an older one would show a stale badge
for a moment). One not acked after that is given up (counted); the next (re)connect's greeting makes the
badge right anyway. A ping frame (no change on the page) asks a socket that has been quiet for a while to
ack, so that "online" means "a tab that answers" (a frozen tab does not).
Only the socket's own handler thread uses an Outbox, so it needs no lock.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field

from app import telemetry

SEQ_COMMENT = "<!--hato:seq={seq}-->"
ACK_MAX_CHARS = 64
_ACK_RE = re.compile(r'^\{\s*"type"\s*:\s*"ack"\s*,\s*"seq"\s*:\s*(\d{1,15})\s*\}$')


@dataclass(frozen=True)
class FrameMeta:
    """What a frame shows, for its ack: the notifications in it, when the API accepted them, their trace."""

    notifications: tuple[int, ...] = ()
    accepted_at: float | None = None  # epoch seconds of the 202 (None: not a new notification, e.g. a read)
    trace: str | None = None  # W3C traceparent the frame continues
    ping: bool = False


PING = FrameMeta(ping=True)
PLAIN = FrameMeta()  # a frame with nothing new to record (a read, a broadcast, the feed's auth reply)


@dataclass
class Sent:
    """A frame on its way: its wire text, when it went (monotonic), whether it was resent, what it shows.

    span: the frame's trace span (when the event came with a trace), ended by the client's ack.
    """

    wire: str
    sent_at: float
    meta: FrameMeta
    resent: bool = False
    span: object = telemetry.NO_SPAN

    def close_span(self, problem: str | None = None) -> None:
        """End the frame's span: acked, or not (problem says why)."""
        if problem:
            telemetry.failed(self.span, problem)
        self.span.end()


def stamp(body: str, seq: int, is_json: bool) -> str:
    """Return the wire text of a frame body with its sequence number."""
    if is_json:
        frame = json.loads(body) if body else {"type": "ping"}
        frame["seq"] = seq
        return json.dumps(frame, separators=(",", ":"))
    return SEQ_COMMENT.format(seq=seq) + body


def parse_ack(message: object) -> int | None:
    """Return the sequence number an ack message acks, or None if message is not an ack."""
    if isinstance(message, bytes):
        return None
    if not isinstance(message, str) or len(message) > ACK_MAX_CHARS:
        return None
    match = _ACK_RE.match(message.strip())
    return int(match.group(1)) if match else None


@dataclass
class Outbox:
    """One socket's sequence numbers and frames awaiting their ack."""

    timeout: float
    next_seq: int = 1
    unacked: dict[int, Sent] = field(default_factory=dict)
    last_ack: float | None = None  # monotonic time of the last ack (None: never acked)
    ping_every: float = 20.0  # a tab quiet this long is asked to answer (a ping)
    ping_at: float = float("inf")  # monotonic time of the next ping, unless an ack moves it

    def send(self, body: str, meta: FrameMeta, is_json: bool, now: float | None = None) -> str:
        """Number a frame, remember it until acked, and return its wire text."""
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        wire = stamp(body, seq, is_json)
        sent = self.unacked[seq] = Sent(wire, time.monotonic() if now is None else now, meta)
        if meta.trace:
            sent.span = telemetry.start_span(
                "hato.realtime.frame", meta.trace, kind="producer", **{"hato.frame.seq": seq}
            )
        return wire

    def forget(self) -> None:
        """The socket closed: end the spans of the frames still waiting for their ack."""
        for sent in self.unacked.values():
            sent.close_span("the socket closed before the ack")
        self.unacked.clear()

    def ack(self, seq: int, now: float | None = None) -> list[Sent]:
        """Take the frames up to seq off the list (cumulative); return them (none for a stale or bogus seq)."""
        if seq >= self.next_seq:
            return []  # a number never sent: a confused or hostile client acks nothing
        done = [self.unacked.pop(n) for n in sorted(self.unacked) if n <= seq]
        self.last_ack = time.monotonic() if now is None else now
        self.ping_at = self.last_ack + self.ping_every
        return done

    def due(self, now: float | None = None) -> tuple[str | None, list[Sent]]:
        """Return (the wire text to resend or None, the frames given up): only the newest unacked is resent."""
        now = time.monotonic() if now is None else now
        late = [seq for seq, sent in self.unacked.items() if now - sent.sent_at >= self.timeout]
        if not late:
            return None, []
        given_up = [self.unacked.pop(seq) for seq in late if self.unacked[seq].resent]
        resend = None
        fresh = [seq for seq in late if seq in self.unacked]
        if fresh:
            newest = max(self.unacked)
            for seq in self.unacked:
                self.unacked[seq].resent = True  # the newest's resend stands for every older one
                self.unacked[seq].sent_at = now
            resend = self.unacked[newest].wire
        return resend, given_up

    def next_deadline(self) -> float | None:
        """Return the monotonic time the oldest unacked frame falls due (None when nothing waits)."""
        if not self.unacked:
            return None
        return min(sent.sent_at for sent in self.unacked.values()) + self.timeout
