"""E-mail over SMTP (smtplib): one connection per sending thread and batch, kept for the next batch;
calls bounded by SMTP_TIMEOUT.

A worker sends batch after batch, and a new SMTP session (TCP, greeting, EHLO, maybe TLS and AUTH)
per batch costs more than a message when batches are small (coalesced live traffic). So at the end
of a batch its connections are parked, and the next batch to the same server takes them after a NOOP
shows them alive. A connection idle longer than SMTP_IDLE_REUSE_SECONDS is closed instead: servers
drop idle sessions after a few minutes (RFC 5321 suggests 5), and a NOOP that fails costs a
reconnect, never a message (the check happens before MAIL FROM). The engine may send one batch from
several threads at once (DELIVERY_SEND_CONCURRENCY): each thread has its own connection, and the
body and final "." of each message are its point of no return (app/providers/base.py: fenced).
The message bytes come from app/providers/email_message.py.
"""

from __future__ import annotations

import atexit
import re
import smtplib
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from email.utils import parseaddr
from urllib.parse import unquote, urlsplit

from app.providers.base import Message, PermanentError, Receipt, TransientError, point_of_no_return, register
from app.providers.email_message import build_email, clean_header, email_bytes, wire_bytes


def classify(exc: BaseException) -> TransientError | PermanentError:
    """Map an smtplib/socket failure to the contract: 5xx for the recipient/message is permanent.

    A 5xx for the recipient is a hard bounce (kind "bounce": the engine suppresses the address).
    """
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        # A non-ASCII address and a server without SMTPUTF8: no retry can change the server's answer.
        return PermanentError(f"server cannot take this address: {exc}", kind="smtputf8_unsupported")
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        code, text = next(iter(exc.recipients.values()), (0, b""))
        return _by_code(code, text, "recipient refused", permanent_kind="bounce")
    if isinstance(exc, smtplib.SMTPDataError):
        return _by_code(exc.smtp_code, exc.smtp_error, "message refused")
    if isinstance(exc, smtplib.SMTPResponseException):
        # 5xx to MAIL FROM / AUTH is our configuration, not this recipient: retry after a fix.
        return TransientError(f"SMTP {exc.smtp_code}: {_text(exc.smtp_error)}", kind=f"smtp_{exc.smtp_code}")
    # smtplib wraps a timeout while reading a reply in SMTPServerDisconnected; keep the real cause.
    if isinstance(exc, (socket.timeout, TimeoutError)) or isinstance(exc.__context__, (socket.timeout, TimeoutError)):
        return TransientError(f"timeout: {exc}", kind="timeout")
    if isinstance(exc, ConnectionRefusedError):
        return TransientError(f"connection refused: {exc}", kind="refused")
    if isinstance(exc, (smtplib.SMTPException, OSError)):
        return TransientError(f"{type(exc).__name__}: {exc}", kind="connection")
    raise TypeError(f"not an SMTP failure: {exc!r}")


def _by_code(code: int, text, what: str, permanent_kind: str = "rejected") -> TransientError | PermanentError:
    detail = f"{what}: SMTP {code} {_text(text)}"
    if 500 <= code < 600:
        return PermanentError(detail, kind=permanent_kind)
    return TransientError(detail, kind=f"smtp_{code}", retry_after=retry_hint(code, _text(text)))


# SMTP has no Retry-After header; servers that throttle say it in the 421 text ("try again in 60 seconds").
_RETRY_HINT = re.compile(r"(?:retry|try again)\D{0,20}?(\d+)\s*(s|sec|secs|seconds?|m|min|mins|minutes?)\b", re.I)


def retry_hint(code: int, text: str) -> float | None:
    """The wait a 421 reply asks for, in seconds, when its text gives one."""
    match = _RETRY_HINT.search(text) if code == 421 else None
    if not match:
        return None
    return float(match.group(1)) * (60 if match.group(2).lower().startswith("m") else 1)


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


SMTP_IDLE_REUSE_SECONDS = 30.0
PARKED_PER_SERVER = 16  # more idle sessions than any DELIVERY_SEND_CONCURRENCY needs are closed
_parked: dict[tuple, list[tuple[smtplib.SMTP, float]]] = {}  # server key -> idle connections, parked at
_parked_lock = threading.Lock()


def _park(key: tuple, conn: smtplib.SMTP) -> None:
    """Keep conn for the next batch to the same server (closing it when enough are parked)."""
    with _parked_lock:
        idle = _parked.setdefault(key, [])
        if len(idle) < PARKED_PER_SERVER:
            idle.append((conn, time.monotonic()))
            return
    _quit(conn)


@atexit.register
def _quit_parked() -> None:
    with _parked_lock:
        conns = [conn for idle in _parked.values() for conn, _ in idle]
        _parked.clear()
    for conn in conns:
        _quit(conn)


def _unpark(key: tuple) -> smtplib.SMTP | None:
    """A parked connection to the server of key that is fresh and answers NOOP, else None."""
    while True:
        with _parked_lock:
            idle = _parked.get(key)
            if not idle:
                return None
            conn, parked_at = idle.pop()
        if time.monotonic() - parked_at > SMTP_IDLE_REUSE_SECONDS:
            _quit(conn)
            continue
        try:
            if conn.noop()[0] == 250:
                return conn
        except (smtplib.SMTPException, OSError):
            pass
        conn.close()


def _quit(conn: smtplib.SMTP) -> None:
    try:
        conn.quit()
    except (smtplib.SMTPException, OSError):
        conn.close()


def _transact(conn: smtplib.SMTP, sender: str, recipient: str, data: bytes, mail_options: tuple = ()) -> None:
    """smtplib's sendmail() for one recipient, point_of_no_return() right before the body and its "." go out."""
    conn.ehlo_or_helo_if_needed()
    options = list(mail_options)
    if conn.does_esmtp and conn.has_extn("size"):
        options.insert(0, f"size={len(data)}")
    code, reply = conn.mail(sender, options)
    if code != 250:
        _abort(conn, code)
        raise smtplib.SMTPSenderRefused(code, reply, sender)
    code, reply = conn.rcpt(recipient)
    if code not in (250, 251):
        _abort(conn, code)
        raise smtplib.SMTPRecipientsRefused({recipient: (code, reply)})
    conn.putcmd("data")
    code, reply = conn.getreply()
    if code != 354:
        _abort(conn, code)
        raise smtplib.SMTPDataError(code, reply)
    body = smtplib._quote_periods(data)
    # The "." ends the message; without it the server drops what it got if we die. One write for body and
    # "." (two small writes would wait on the server's delayed ACK under Nagle's algorithm: ~40 ms each).
    point_of_no_return()
    conn.send((body if body.endswith(b"\r\n") else body + b"\r\n") + b".\r\n")
    code, reply = conn.getreply()
    if code != 250:
        _abort(conn, code)
        raise smtplib.SMTPDataError(code, reply)


def _abort(conn: smtplib.SMTP, code: int) -> None:
    # As smtplib does: 421 means the server closed the session, any other refusal resets the transaction.
    if code == 421:
        conn.close()
    else:
        conn._rset()


class SmtpProvider:
    """Sends over one connection per thread and `with` block (parked after it); a broken one fails the rest fast."""

    name = "smtp"
    fences = True  # calls point_of_no_return() itself (see _transact)

    def __init__(self, url: str, mail_from: str, timeout: float, host: str, name: str = "smtp") -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ValueError(f"SMTP_URL must look like smtp://host:port, got {url!r}")
        self.scheme = parts.scheme
        self.hostname = parts.hostname
        self.port = parts.port or (465 if parts.scheme == "smtps" else 25)
        self.username = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password else None
        self.starttls = "starttls=true" in parts.query.lower()
        self.timeout = timeout
        self.mail_from = clean_header(mail_from)
        self.envelope_from = parseaddr(self.mail_from)[1]
        self.host = host
        self.name = name  # "smtp" or "smtp_fallback": breakers, buckets and the ledger tell them apart
        self._conns: dict[int, smtplib.SMTP] = {}  # sending thread -> its connection in this batch
        self._broken: TransientError | None = None

    @classmethod
    def from_config(cls, config: Mapping, setting: str = "SMTP_URL", name: str = "smtp") -> SmtpProvider | None:
        """Build from SMTP_URL (or setting) / MAIL_FROM / SMTP_TIMEOUT / BASE_URL; None when the URL is empty."""
        if not config.get(setting):
            return None
        host = urlsplit(config["BASE_URL"]).hostname or "localhost"
        return cls(config[setting], config["MAIL_FROM"], float(config["SMTP_TIMEOUT"]), host, name)

    def __enter__(self) -> SmtpProvider:
        self._broken = None
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def _server_key(self) -> tuple:
        return (self.scheme, self.hostname, self.port, self.username, self.password, self.starttls, self.timeout)

    def _connect(self) -> smtplib.SMTP:
        parked = _unpark(self._server_key)
        if parked is not None:
            return parked
        if self.scheme == "smtps":
            conn = smtplib.SMTP_SSL(
                self.hostname, self.port, timeout=self.timeout, context=ssl.create_default_context()
            )
        else:
            conn = smtplib.SMTP(self.hostname, self.port, timeout=self.timeout)
            if self.starttls:
                conn.starttls(context=ssl.create_default_context())
        if self.username:
            conn.login(self.username, self.password or "")
        return conn

    def send(self, message: Message) -> Receipt:
        """Send one message on this thread's connection of the batch (opened on first use)."""
        built = email_bytes(message, self.mail_from, self.host) if self.envelope_from.isascii() else None
        if built is None:  # what the direct builder does not cover goes the stdlib's way
            email = build_email(message, self.mail_from, self.host)
            built = (None, str(email["Message-ID"]))
        if self._broken is not None:
            # A connection died earlier in this batch: don't spend a timeout per remaining row.
            raise TransientError(
                f"not tried, connection failed earlier in this batch ({self._broken})", kind=self._broken.kind
            )
        thread = threading.get_ident()
        recipient = message.to.strip()
        try:
            conn = self._conns.get(thread)
            if conn is None:
                conn = self._conns[thread] = self._connect()
            conn.ehlo_or_helo_if_needed()
            international = not (self.envelope_from + recipient).isascii()
            if international and not conn.has_extn("smtputf8"):
                raise smtplib.SMTPNotSupportedError("the addresses need SMTPUTF8, which the server does not offer")
            options = ("SMTPUTF8", "BODY=8BITMIME") if international else ()
            data = built[0] if built[0] is not None else wire_bytes(email, international)
            _transact(conn, self.envelope_from, recipient, data, options)
        except (smtplib.SMTPException, OSError) as exc:
            error = classify(exc)
            if error.kind == "smtp_421":
                self._drop(thread)  # 421 closes the session; the next message opens a new one
            elif not isinstance(
                exc, (smtplib.SMTPRecipientsRefused, smtplib.SMTPDataError, smtplib.SMTPNotSupportedError)
            ):
                self._broken = error if isinstance(error, TransientError) else None
                self._drop(thread)
            raise error from exc
        except BaseException:
            self._drop(thread)  # stopped mid-transaction (FenceBroken before the final "."): the session is spent
            raise
        return Receipt(provider=self.name, message_id=built[1])

    def _drop(self, thread: int) -> None:
        conn = self._conns.pop(thread, None)
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass

    def close(self) -> None:
        """End the batch: park its healthy connections for the next batch (see the module docstring)."""
        while self._conns:
            _, conn = self._conns.popitem()
            _park(self._server_key, conn)


register("smtp", fallback="smtp_fallback")(SmtpProvider.from_config)


@register("smtp_fallback")
def fallback_from_config(config: Mapping) -> SmtpProvider | None:
    """The second SMTP server (SMTP_FALLBACK_URL), used while the first one's breaker is open."""
    return SmtpProvider.from_config(config, "SMTP_FALLBACK_URL", "smtp_fallback")
