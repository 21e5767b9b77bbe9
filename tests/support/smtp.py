"""A recording SMTP sink (aiosmtpd) for tests, chaos tests and the benchmark.

In-process: the `smtp_sink` fixture, or `SmtpSink(port)`, starts a Controller thread on a free 127.0.0.1
port and keeps every message.
As a process: `python -m tests.support.smtp --port P --log FILE` appends one Message-ID per line to
FILE (flushed per message), so a test or benchmark can count arrivals and duplicates from outside.
With `--stamp` each line starts with the time.time() of receipt and a space (`stamped_arrivals` reads
them), so a benchmark can time a message from the API's 202 to its arrival.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage

import pytest
from aiosmtpd.controller import Controller

from tests.support.waiting import free_port


@dataclass
class Received:
    """One message as the sink got it."""

    mail_from: str
    rcpt_tos: list[str]
    raw: bytes
    peer: tuple = ()  # the client's (address, port): which SMTP connection brought it

    @property
    def message(self) -> EmailMessage:
        return message_from_bytes(self.raw, policy=policy.default)


@dataclass
class RecordingHandler:
    """aiosmtpd handler: records messages; `reject[address] = "550 …"` refuses a recipient."""

    messages: list[Received] = field(default_factory=list)
    reject: dict[str, str] = field(default_factory=dict)
    log_path: str | None = None
    stamp: bool = False  # log lines start with the receipt time (time.time())
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        answer = self.reject.get(address.lower())
        if answer:
            return answer
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        raw = envelope.original_content or envelope.content
        if self.log_path:
            received = time.time()
            message_id = _message_id(raw)
            with open(self.log_path, "a", encoding="utf-8") as log:
                log.write(f"{received:.6f} {message_id}\n" if self.stamp else message_id + "\n")
        else:
            with self.lock:
                self.messages.append(Received(envelope.mail_from, list(envelope.rcpt_tos), raw, tuple(session.peer)))
        return "250 Message accepted for delivery"


def _message_id(raw: bytes) -> str:
    # Only the header block: parsing a whole MIME body per message would make the sink the bottleneck.
    head = raw.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
    for line in head.splitlines():
        if line[:11].lower() == b"message-id:":
            return line[11:].strip().decode("ascii", "replace")
    return "<none>"


def stamped_arrivals(log_path) -> list[tuple[float, str]]:
    """Every (receipt time, Message-ID) a `--stamp` sink logged, in arrival order (with duplicates)."""
    try:
        with open(log_path, encoding="utf-8") as log:
            text = log.read()
    except FileNotFoundError:
        return []
    lines = text.split("\n")[:-1]  # the last piece is empty, or a line still being written
    return [(float(stamp), message_id) for stamp, _, message_id in (line.partition(" ") for line in lines)]


class SmtpSink:
    """An aiosmtpd server on 127.0.0.1 in a background thread."""

    def __init__(self, port: int, handler: RecordingHandler | None = None) -> None:
        self.handler = handler or RecordingHandler()
        self.port = port
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=port)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    @property
    def messages(self) -> list[Received]:
        return self.handler.messages

    def start(self) -> SmtpSink:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()


@pytest.fixture
def smtp_sink(app, monkeypatch):
    """An aiosmtpd server on a free port; the app's SMTP_URL points at it for this test."""
    sink = SmtpSink(free_port()).start()
    monkeypatch.setitem(app.config, "SMTP_URL", sink.url)
    monkeypatch.setitem(app.config, "EMAIL_PROVIDER", "smtp")
    yield sink
    sink.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--stamp", action="store_true", help="start each line with the receipt time")
    args = parser.parse_args()
    sink = SmtpSink(args.port, RecordingHandler(log_path=args.log, stamp=args.stamp)).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"sink listening on 127.0.0.1:{args.port}", flush=True)
    while not stop.wait(0.5):
        pass
    sink.stop()
    time.sleep(0.1)


if __name__ == "__main__":
    main()
