"""The rules of a tenant's key, name and branding, shared by the API and the console (one check, one message).

The logo URL is fetched by the recipients' mail clients and browsers, never by Hato, but it still must not point
into a network: https only, no user name or password, a host name that is not local (localhost, *.local,
*.internal…) and no IP address that is not public (app/providers/endpoints.py address_refusal), and its path must
pass the same rule as every link (app/links.py same_site_path: no control characters, backslashes or tricks that
appear after percent-decoding).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from flask_babel import lazy_gettext

from app.limits import EMAIL_MAX, EMAIL_PATTERN, LINK_MAX, NAME_MAX, SENDER_NAME_MAX, TENANT_KEY_MAX
from app.links import same_site_path
from app.providers.endpoints import address_refusal, normal_host

# The product's id for its customer: also a path segment, so letters, digits and . _ : - only.
KEY_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._:-]{{0,{TENANT_KEY_MAX - 1}}}$"
COLOR_PATTERN = r"^#[0-9A-Fa-f]{6}$"
# The sender name becomes the display name of a From header: no control character (CR/LF would start a header).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa", ".lan", ".intranet")
_LOCAL_NAMES = ("localhost", "localhost.localdomain")

KEY_MESSAGE = lazy_gettext("must be 1-100 letters, digits, '.', '_', ':' or '-', starting with a letter or digit")
LOGO_MESSAGE = lazy_gettext("must be an https URL on a public host, such as https://cdn.example.com/logo.png")
COLOR_MESSAGE = lazy_gettext("must be a colour such as #1a73e8")
SENDER_MESSAGE = lazy_gettext("must be at most %(max)s characters, without line breaks", max=SENDER_NAME_MAX)
REPLY_TO_MESSAGE = lazy_gettext("must be an e-mail address such as ann@example.com")
NAME_MESSAGE = lazy_gettext("must be 1-%(max)s characters, without line breaks", max=NAME_MAX)


def logo_url_ok(url: str) -> bool:
    """Whether url may be a tenant's logo (the module docstring's rules)."""
    # Quotes and angle brackets too: every place that writes the URL escapes it, but a CSS url() or an e-mail
    # client's own parsing is not a place to count on that.
    if not isinstance(url, str) or len(url) > LINK_MAX or _CONTROL.search(url) or re.search(r"[\s\\\"'<>`]", url):
        return False
    parts = urlsplit(url)
    if parts.scheme != "https" or "@" in parts.netloc or not parts.hostname:
        return False
    try:
        parts.port  # noqa: B018 - raises on an invalid port
    except ValueError:
        return False
    host = normal_host(parts.hostname)
    refusal = address_refusal(host)
    if refusal is None:
        pass  # a public IP address
    elif refusal != "unparsable" or re.fullmatch(r"[0-9a-fx.]+", host) and not re.search(r"[g-wyz]", host):
        return False  # a loopback, private… address, or a numeric form some resolvers read as one (127.1, 0x7f.1)
    elif host in _LOCAL_NAMES or host.endswith(_LOCAL_SUFFIXES) or "." not in host:
        return False
    path = parts.path or "/"
    return same_site_path(path + (f"?{parts.query}" if parts.query else "")) is not None


def problems(fields: dict) -> list[tuple[str, object]]:
    """(field, message) for each field of a tenant's settings that breaks its rule; empty when all are fine.

    Only the fields present are checked; None (clearing an optional field) always passes.
    """
    found = []
    name = fields.get("name")
    if "name" in fields and (not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX
                             or _CONTROL.search(name)):  # fmt: skip
        found.append(("name", NAME_MESSAGE))
    if fields.get("logo_url") is not None and not logo_url_ok(fields["logo_url"]):
        found.append(("logo_url", LOGO_MESSAGE))
    if fields.get("primary_color") is not None and not re.fullmatch(COLOR_PATTERN, fields["primary_color"]):
        found.append(("primary_color", COLOR_MESSAGE))
    sender = fields.get("email_sender_name")
    if sender is not None and (len(sender) > SENDER_NAME_MAX or _CONTROL.search(sender)):
        found.append(("email_sender_name", SENDER_MESSAGE))
    reply_to = fields.get("reply_to")
    if reply_to is not None and (len(reply_to) > EMAIL_MAX or not re.fullmatch(EMAIL_PATTERN, reply_to)):
        found.append(("reply_to", REPLY_TO_MESSAGE))
    return found


def key_ok(key: str) -> bool:
    """Whether key can name a tenant."""
    return isinstance(key, str) and re.fullmatch(KEY_PATTERN, key) is not None
