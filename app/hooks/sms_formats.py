"""What an SMS reply says, in Hato's words: who sent it, and whether it is STOP, START or HELP.

Pure. A keyword is the whole message, trimmed and compared without case after NFKC (so the full-width
"ＳＴＯＰ" a Japanese keyboard types is STOP); any other text is no keyword, and changes nothing.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

STOP_WORDS = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "停止"})
START_WORDS = frozenset({"START", "UNSTOP"})
HELP_WORDS = frozenset({"HELP"})
E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")
TEXT_MAX = 1600  # what Hato keeps of a reply's text, for a log line at most


@dataclass(frozen=True)
class InboundSms:
    """One SMS a member sent to the installation's number."""

    provider: str
    message_id: str
    phone: str  # the sender in E.164, or '' when it is not a phone number (a short code, a sender id)
    to: str
    text: str


def e164(number: str) -> str:
    """A provider's phone number as E.164 (Vonage writes it without "+"), or '' when it is none."""
    digits = (number or "").strip().replace(" ", "")
    if digits and not digits.startswith("+"):
        digits = "+" + digits
    return digits if E164.match(digits) else ""


def keyword(text: str) -> str | None:
    """stop, start or help when the whole message is one of their words; None for any other text."""
    word = unicodedata.normalize("NFKC", text or "").strip().upper()
    if word in STOP_WORDS:
        return "stop"
    if word in START_WORDS:
        return "start"
    if word in HELP_WORDS:
        return "help"
    return None
