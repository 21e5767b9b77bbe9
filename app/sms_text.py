"""How an SMS body is encoded and split into parts, as carriers count it (3GPP TS 23.038 / GSM 03.38).

A body made only of the GSM 7-bit default alphabet travels as GSM-7 septets: 160 fit in one message, and a
concatenated message spends 7 of each part's 160 on its header, leaving 153. The extension table's characters
take two septets (ESC + the character), and a carrier never splits that pair between two parts. Any other
character sends the whole body as UCS-2 (UTF-16 code units in practice): 70 fit in one message, 67 per part,
and a surrogate pair (an emoji outside the BMP) is never split either. National language shift tables are
not used: carriers and SMS APIs send the default alphabet or UCS-2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

GSM7 = "GSM-7"
UCS2 = "UCS-2"

# The default alphabet, in code order 0x00-0x7F (0x1B, the escape to the extension table, left out).
# 0x09 is the capital Ç, as 3GPP TS 23.038 draws it (Unicode's mapping file reads it as the small ç).
GSM7_BASIC = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅå"
    "Δ_ΦΓΛΩΠΨΣΘΞÆæßÉ"
    " !\"#¤%&'()*+,-./"
    "0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNO"
    "PQRSTUVWXYZÄÖÑÜ§"
    "¿abcdefghijklmno"
    "pqrstuvwxyzäöñüà"
)
# The extension table: each costs two septets (ESC 0x1B, then 0x0A FF, 0x14 ^, 0x28 {, 0x29 }, 0x2F \,
# 0x3C [, 0x3D ~, 0x3E ], 0x40 |, 0x65 €).
GSM7_EXTENSION = frozenset("\f^{}\\[~]|€")

GSM7_SINGLE = 160  # septets in one message (140 octets)
GSM7_PART = 153  # septets per part of a concatenated message (the 6-octet header takes 7 septets)
UCS2_SINGLE = 70  # UTF-16 code units in one message
UCS2_PART = 67  # per part of a concatenated message

Encoding = Literal["GSM-7", "UCS-2"]


@dataclass(frozen=True)
class SmsText:
    """What a body costs: its encoding, how many parts it is sent as, and why it is UCS-2 if it is."""

    encoding: Encoding
    segments: int  # 0 for an empty body
    units: int  # septets (GSM-7) or UTF-16 code units (UCS-2) in the whole body
    per_segment: int  # what one part carries as the body is split: 160/153 (GSM-7) or 70/67 (UCS-2)
    forcing: tuple[str, ...]  # the distinct characters that made it UCS-2, in order of first appearance


def is_gsm7(char: str) -> bool:
    """Whether one character can be sent in GSM-7 (the default alphabet or its extension table)."""
    return char in GSM7_BASIC or char in GSM7_EXTENSION


def forcing_characters(text: str) -> tuple[str, ...]:
    """The distinct characters of text outside GSM-7, in order of first appearance."""
    return tuple(dict.fromkeys(char for char in text if not is_gsm7(char)))


def _gsm7_cost(char: str) -> int:
    """Septets of one GSM-7 character."""
    return 2 if char in GSM7_EXTENSION else 1


def _ucs2_cost(char: str) -> int:
    """UTF-16 code units of one character."""
    return 2 if ord(char) > 0xFFFF else 1  # outside the BMP: a surrogate pair


def _parts(text: str, cost: Callable[[str], int], single: int, part: int) -> list[str]:
    """Split text as a carrier does: whole if it fits one message, else in parts of at most `part` units."""
    # Code points are never cut, so an escape pair or a surrogate pair that would straddle a part's end
    # starts the next part instead, and that part ends one unit short.
    if sum(cost(char) for char in text) <= single:
        return [text] if text else []
    parts: list[str] = []
    start, used = 0, 0
    for index, char in enumerate(text):
        units = cost(char)
        if used + units > part:
            parts.append(text[start:index])
            start, used = index, 0
        used += units
    parts.append(text[start:])
    return parts


def _rules(forcing: tuple[str, ...]) -> tuple[Callable[[str], int], int, int]:
    """The cost of a character, and the units of one message and of one part, for the text's encoding."""
    if forcing:
        return _ucs2_cost, UCS2_SINGLE, UCS2_PART
    return _gsm7_cost, GSM7_SINGLE, GSM7_PART


def split(text: str) -> tuple[str, ...]:
    """The parts a carrier sends text as, in order (none for an empty text)."""
    cost, single, part = _rules(forcing_characters(text))
    return tuple(_parts(text, cost, single, part))


def measure(text: str) -> SmsText:
    """How text is encoded and how many parts it takes."""
    forcing = forcing_characters(text)
    cost, single, part = _rules(forcing)
    segments = len(_parts(text, cost, single, part))
    return SmsText(
        encoding=UCS2 if forcing else GSM7,
        segments=segments,
        units=sum(cost(char) for char in text),
        per_segment=part if segments > 1 else single,
        forcing=forcing,
    )


def fits(text: str, max_segments: int) -> bool:
    """Whether text is sent in at most max_segments parts."""
    return measure(text).segments <= max_segments
