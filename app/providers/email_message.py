"""The bytes of one e-mail: headers, text and HTML parts, Message-ID, written directly.

The stdlib's header registry and folding cost more than the rest of a send, so email_bytes writes the
common case (ASCII addresses, short lines) itself; build_email is the stdlib path, kept for everything
else and as the reference a test compares email_bytes with (tests/providers/test_email_bytes.py).
"""

from __future__ import annotations

import base64
import io
import secrets
import sys
import time
from email.generator import BytesGenerator
from email.headerregistry import Address, HeaderRegistry
from email.message import EmailMessage
from email.policy import default as default_policy
from email.utils import formatdate, parseaddr
from functools import lru_cache

from app.providers.base import Message, PermanentError


class _CachedHeaderRegistry(HeaderRegistry):
    """The stdlib registry creates a new class for every header it parses; create each one once."""

    def __init__(self) -> None:
        super().__init__()
        self._classes: dict[str, type] = {}

    def __getitem__(self, name: str) -> type:
        key = name.lower()
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = super().__getitem__(name)
        return cls


# The default policy, but lines may run to RFC 5322's 998: a long List-Unsubscribe URL must stay
# one token instead of being folded into an RFC 2047 encoded-word that mail clients can't follow.
POLICY = default_policy.clone(max_line_length=998, header_factory=_CachedHeaderRegistry())
_FORBIDDEN = str.maketrans({"\r": " ", "\n": " ", "\0": ""})


def clean_header(value: str) -> str:
    """Return value with CR, LF and NUL removed: user and operator text can never add a header."""
    return " ".join(str(value).translate(_FORBIDDEN).split())


def message_id(delivery_id: int, host: str) -> str:
    """The Message-ID of a delivery: the same on every retry, so receivers can spot a resend."""
    return f"<delivery-{int(delivery_id)}@hato.{clean_header(host) or 'localhost'}>"


@lru_cache(maxsize=8)
def _from_header(mail_from: str):
    # The sender is the same for every message: parse it once (a parsed header is stored as is).
    return POLICY.header_factory("From", clean_header(mail_from))


def build_email(message: Message, mail_from: str, host: str) -> EmailMessage:
    """Build a multipart text + HTML EmailMessage; a malformed recipient is a PermanentError."""
    msg = EmailMessage(policy=POLICY)  # the default policy refuses raw CR/LF in header values
    try:
        msg["To"] = Address(display_name=clean_header(message.to_name), addr_spec=message.to.strip())
    except (ValueError, IndexError) as exc:
        raise PermanentError(f"invalid recipient address: {exc}", kind="invalid_address") from exc
    if message.from_name:  # a tenant's sender name (issue 32): its display name, this server's address
        msg["From"] = Address(display_name=clean_header(message.from_name), addr_spec=parseaddr(mail_from)[1])
    else:
        msg["From"] = _from_header(mail_from)
    msg["Subject"] = clean_header(message.subject)
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = message_id(message.delivery_id, host)
    for name, value in message.headers.items():
        msg[clean_header(name)] = clean_header(value)
    msg.set_content(message.text)
    if message.html:
        msg.add_alternative(message.html, subtype="html")
    return msg


# RFC 2047: an encoded-word is at most 75 characters; 45 bytes of UTF-8 make 60 of base64 plus 12 of framing.
_EW_BYTES = 45
_MAX_LINE = 998  # RFC 5322: the longest line; POLICY never folds below it either
_FIXED = frozenset({"to", "from", "subject", "date", "message-id", "mime-version", "content-type"})
_date: tuple[int, str] = (0, "")


def _encoded_words(text: str) -> str:
    """text as RFC 2047 B encoded-words on folded lines (a reader joins them back without the spaces)."""
    words, chunk, size = [], [], 0
    for char in text:
        width = len(char.encode())
        if size + width > _EW_BYTES:
            words.append("".join(chunk))
            chunk, size = [], 0
        chunk.append(char)
        size += width
    words.append("".join(chunk))
    return "\r\n ".join(f"=?utf-8?b?{base64.b64encode(word.encode()).decode()}?=" for word in words)


def _plain(text: str) -> bool:
    # Printable ASCII is written as is, as the stdlib does (even text that looks like an encoded-word).
    return text.isascii() and text.isprintable()


def _unstructured(name: str, value: str) -> str | None:
    value = clean_header(value)
    if _plain(value):
        return f"{name}: {value}" if len(name) + 2 + len(value) <= _MAX_LINE else None
    return f"{name}: {_encoded_words(value)}"


def _body(text: str) -> tuple[str, bytes] | None:
    lines = text.encode().splitlines()
    if max((len(line) for line in lines), default=0) > _MAX_LINE:
        return None  # the stdlib picks quoted-printable or base64 for such lines
    return ("7bit" if all(line.isascii() for line in lines) else "8bit"), b"\r\n".join(lines) + b"\r\n"


def _part(subtype: str, body: tuple[str, bytes], *extra: str) -> bytes:
    head = [f'Content-Type: text/{subtype}; charset="utf-8"', f"Content-Transfer-Encoding: {body[0]}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body[1]


@lru_cache(maxsize=8)
def _from_line(mail_from: str) -> str:
    return POLICY.clone(linesep="\r\n").fold("From", _from_header(mail_from)).rstrip("\r\n")


def _now() -> str:
    global _date
    second = int(time.time())
    if _date[0] != second:
        _date = (second, formatdate(second, localtime=False))
    return _date[1]


def email_bytes(message: Message, mail_from: str, host: str) -> tuple[bytes, str] | None:
    """The wire bytes of build_email(...) and their Message-ID, built directly (no header registry or folding).

    What a reader parses out of them equals what it parses out of build_email's (tests/providers/test_email_bytes.py).
    None for what this does not cover (the stdlib path then): a non-ASCII address, a body line over 998
    bytes, an ASCII header over one line, an extra header that would replace a fixed one, or a sender name of
    its own (a tenant's).
    """
    to = message.to.strip()
    name = clean_header(message.to_name)
    if not to.isascii() or message.from_name or any(key.lower() in _FIXED for key in message.headers):
        return None
    try:
        address = Address(display_name=name if _plain(name) else "", addr_spec=to)
    except (ValueError, IndexError) as exc:
        raise PermanentError(f"invalid recipient address: {exc}", kind="invalid_address") from exc
    # A name in one encoded-word, as the stdlib writes it: readers (the stdlib's own among them) put a space
    # between adjacent encoded-words of a phrase, so splitting it would change the name they show.
    recipient = (
        str(address)
        if _plain(name)
        else f"=?utf-8?b?{base64.b64encode(name.encode()).decode()}?= <{address.addr_spec}>"
    )
    ident = message_id(message.delivery_id, host)
    lines = [f"To: {recipient}", _from_line(mail_from), _unstructured("Subject", message.subject),
             f"Date: {_now()}", f"Message-ID: {ident}"]  # fmt: skip
    lines += [_unstructured(clean_header(key), value) for key, value in message.headers.items()]
    try:
        text = _body(message.text)
        html = _body(message.html) if message.html else None
    except UnicodeEncodeError:
        return None
    if None in lines or text is None or (message.html and html is None) or len(lines[0]) > _MAX_LINE:
        return None
    if html is None:
        head = "\r\n".join(lines) + "\r\n"
        return head.encode() + _part("plain", text, "MIME-Version: 1.0"), ident
    boundary = f"==============={secrets.randbelow(sys.maxsize):019d}=="
    while boundary.encode() in text[1] or boundary.encode() in html[1]:
        boundary = f"==============={secrets.randbelow(sys.maxsize):019d}=="
    lines += ["MIME-Version: 1.0", f'Content-Type: multipart/alternative; boundary="{boundary}"']
    head = ("\r\n".join(lines) + f"\r\n\r\n--{boundary}\r\n").encode()
    middle = f"\r\n--{boundary}\r\n".encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    return head + _part("plain", text) + middle + _part("html", html, "MIME-Version: 1.0") + tail, ident


def wire_bytes(email: EmailMessage, international: bool) -> bytes:
    """The bytes smtplib's send_message() writes for email (UTF-8 headers when the addresses need SMTPUTF8)."""
    out = io.BytesIO()
    BytesGenerator(out, policy=email.policy.clone(utf8=True) if international else None).flatten(email, linesep="\r\n")
    return out.getvalue()
