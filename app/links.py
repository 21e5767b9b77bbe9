"""The same-site link rule: the one check for every user- or API-supplied path that becomes a link or a Location.

A link is accepted only as a path on this site: "/" followed by anything but a second slash or a
backslash, with no whitespace, backslash or control character. Browsers follow the WHATWG URL
standard, which drops tabs and newlines anywhere and reads "\\" as "/", so "/\\tevil", "/\\evil" and
"\\/evil" would all leave the site; so would "//evil" and any scheme ("https:evil", "javascript:…").
The same shape must hold after percent-decoding, round after round (so "/%252F%252Fevil" is judged
like "//evil" and "/%09/evil" like "/\\t/evil"), for any code on the way that decodes once too often;
the decoded bytes must be valid UTF-8 (overlong forms such as "%C0%AF" for "/" are invalid) without
control characters. Nor may the path turn into one that leaves after Unicode compatibility folding
(NFKC, which some proxies and frameworks apply): "/\\uff0f\\uff0fevil" (fullwidth solidi) is refused
too. An encoded space later in the path ("/search?q=a%20b") is an ordinary link and
stays accepted. tests/test_links.py checks the rule against a WHATWG parser with generated inputs and
a list of known bypasses.

It also holds the one origin normaliser (origin_of): the websocket's Origin check and the feed's CORS
compare origins in the form browsers send them.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote, urlsplit

from app.limits import LINK_MAX

# As sent: whitespace, C0 and C1 controls, DEL, and the backslash browsers read as a slash.
_RAW_FORBIDDEN_CHARS = r"\s\x00-\x1f\x7f-\x9f\\"
_RAW_FORBIDDEN = re.compile(f"[{_RAW_FORBIDDEN_CHARS}]")
# Solidi that NFKC folds to "/" or "\\": fullwidth solidus, fullwidth reverse solidus, small reverse solidus.
_FOLDING_SLASHES = "\uff0f\uff3c\ufe68"
# The rule's shape as a JSON Schema pattern, for the API's spec: what same_site_path checks before decoding.
SHAPE_PATTERN = f"^/([^/{_FOLDING_SLASHES}{_RAW_FORBIDDEN_CHARS}][^{_RAW_FORBIDDEN_CHARS}]*)?$"
# After decoding: controls, which URL parsers drop or mangle on the way to a browser.
_DECODED_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_DECODE_ROUNDS = 3


def _stays_on_site(path: str, forbidden: re.Pattern) -> bool:
    if not path.startswith("/") or path[1:2] in ("/", "\\") or forbidden.search(path):
        return False
    parts = urlsplit(path)
    if parts.scheme or parts.netloc:
        return False
    # Some proxies and frameworks fold Unicode (NFKC): "/\uff0f\uff0fevil" would become "///evil".
    return unicodedata.normalize("NFKC", path)[1:2] not in ("/", "\\")


def same_site_path(target: object) -> str | None:
    """Return target unchanged if it is a path on this site that stays on it however it is read; else None."""
    if not isinstance(target, str) or not target or len(target) > LINK_MAX:
        return None
    if not _stays_on_site(target, _RAW_FORBIDDEN):
        return None
    decoded = target
    for _ in range(_DECODE_ROUNDS):
        try:
            once_more = unquote(decoded, errors="strict")
        except UnicodeDecodeError:  # invalid or overlong UTF-8 behind the percent signs
            return None
        if once_more == decoded:
            return target
        if not _stays_on_site(once_more, _DECODED_FORBIDDEN):
            return None
        decoded = once_more
    return None  # still changing after several rounds of decoding: nobody needs that in a link


DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str:
    """Return scheme://host[:port] of an http(s) URL, lower-cased, without a default port ("" if it is not one)."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in DEFAULT_PORTS or not host:
        return ""
    try:
        port = parts.port
    except ValueError:
        return ""
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" if port in (None, DEFAULT_PORTS[scheme]) else f"{scheme}://{host}:{port}"
