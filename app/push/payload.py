"""The Web Push payload: compact JSON {title, body, url, tag[, actions]}, shared by the sender and the console preview.

actions (issue 33) are the notification's buttons as app/actions/outbound.py gives them; the service worker shows
them as the Notification's `actions` and handles notificationclick's event.action (static/js/sw.js).
"""

from __future__ import annotations

import json
import re

# RFC 8291: a 4096-byte push body leaves 3993 bytes of plaintext for the JSON payload.
PUSH_LIMIT = 3993
ELLIPSIS = "…"

# Priority → (Urgency header, TTL seconds): an urgent message that arrives late is noise, so it
# expires soon; a low one may wait for the device to come back.
URGENCY = {"high": ("high", 15 * 60), "default": ("normal", 24 * 3600), "low": ("low", 3 * 24 * 3600)}


def push_payload(title: str, body: str, url: str | None, tag: str, actions: list | None = None) -> str:
    """The JSON a push message carries ({title, body, url, tag}, and actions when there are some), compact."""
    message = {"title": title, "body": body, "url": url, "tag": tag} | ({"actions": actions} if actions else {})
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def _size(title: str, body: str, url: str | None, tag: str, actions: list | None = None) -> int:
    return len(push_payload(title, body, url, tag, actions).encode("utf-8"))


def _cut(text: str, chars: int) -> str:
    # Cutting by characters (never bytes) cannot split a UTF-8 sequence.
    return text if len(text) <= chars else text[: max(chars - 1, 0)].rstrip() + ELLIPSIS


def fit_payload(title: str, body: str, url: str | None, tag: str, limit: int = PUSH_LIMIT,
                actions: list | None = None) -> str:  # fmt: skip
    """push_payload cut to at most limit bytes: the body shrinks first, then the title; url, tag and actions stay
    (two buttons of at most 40 characters and a signed link each: well under a quarter of the limit)."""
    if _size(title, body, url, tag, actions) <= limit:
        return push_payload(title, body, url, tag, actions)
    if actions and _size("", "", None, tag, actions) > limit // 4:
        actions = None  # absurd buttons must not push out the message itself
    if url and _size("", "", url, tag) > limit // 2:
        url = None  # an absurd link must not push out the message itself
    title = _cut(title, 200) if _size(title, "", url, tag, actions) > limit // 2 else title
    low, high = 0, len(body)  # the longest body prefix that fits (JSON escaping makes size non-linear)
    while low < high:
        mid = (low + high + 1) // 2
        if _size(title, _cut(body, mid), url, tag, actions) <= limit:
            low = mid
        else:
            high = mid - 1
    return push_payload(title, _cut(body, low), url, tag, actions)


def topic(tag: str) -> str:
    """The Topic header for tag: at most 32 characters of the URL-safe base64 alphabet (RFC 8030)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", tag)[:32]


def urgency(priority: str) -> tuple[str, int]:
    """(Urgency, TTL seconds) for a notification type's priority."""
    return URGENCY.get(priority, URGENCY["default"])
