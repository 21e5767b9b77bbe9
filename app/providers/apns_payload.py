"""What one APNs request carries: the JSON body cut to APNs' 4 KB, the collapse id, the apns-* headers."""

from __future__ import annotations

import json
from dataclasses import replace

from app.providers.mobile import MobileAlert, MobilePush

# The category an app registers for n action buttons (issue 33; app/actions/outbound.py builds the buttons).
APNS_CATEGORY = "HATO_ACTIONS_{}"
PAYLOAD_LIMIT = 4096  # bytes of JSON APNs takes for any push type but VoIP
COLLAPSE_ID_LIMIT = 64  # bytes of apns-collapse-id
ELLIPSIS = "…"


def _cut(text: str, chars: int) -> str:
    # Cutting by characters (never bytes) cannot split a UTF-8 sequence.
    return text if len(text) <= chars else text[: max(chars - 1, 0)].rstrip() + ELLIPSIS


def _dumps(payload: dict) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _alert_payload(push: MobilePush, alert: MobileAlert, body: str, link: str) -> bytes:
    shown = {"title": alert.title, "body": body}
    if alert.subtitle:
        shown["subtitle"] = alert.subtitle
    aps: dict = {"alert": shown}
    if push.badge is not None:
        aps["badge"] = push.badge
    if push.thread_id:
        aps["thread-id"] = push.thread_id
    aps["sound"] = "default"
    if push.actions:  # the app registered the category: its buttons, in order, are `actions` below
        aps["category"] = APNS_CATEGORY.format(len(push.actions))
    payload: dict = {"aps": aps}
    if push.actions:
        payload["actions"] = list(push.actions)
    if push.notification_id is not None:
        payload["notification_id"] = push.notification_id
    if link:
        payload["link"] = link
    return _dumps(payload)


def apns_payload(push: MobilePush, alert: MobileAlert | None, limit: int = PAYLOAD_LIMIT) -> bytes:
    """The JSON body for one device, at most limit bytes: the alert's body shrinks first, then the rest."""
    if push.background or alert is None:
        aps: dict = {"content-available": 1}
        if push.badge is not None:
            aps["badge"] = push.badge
        return _dumps({"aps": aps})
    link = push.link
    if len(_alert_payload(push, alert, alert.body, link)) <= limit:
        return _alert_payload(push, alert, alert.body, link)
    if len(link.encode()) > limit // 4:
        link = ""  # an absurd link must not push out the message itself
    push = replace(push, thread_id=_cut(push.thread_id, 64))
    alert = MobileAlert(_cut(alert.title, 200), alert.body, _cut(alert.subtitle, 200))
    low, high = 0, len(alert.body)  # the longest body prefix that fits (JSON escaping makes size non-linear)
    while low < high:
        mid = (low + high + 1) // 2
        if len(_alert_payload(push, alert, _cut(alert.body, mid), link)) <= limit:
            low = mid
        else:
            high = mid - 1
    return _alert_payload(push, alert, _cut(alert.body, low), link)


def collapse_id(group_key: str) -> bytes:
    """group_key as apns-collapse-id: its first 64 bytes of UTF-8, never half a character."""
    return group_key.encode("utf-8")[:COLLAPSE_ID_LIMIT].decode("utf-8", "ignore").encode("utf-8")


def request_headers(push: MobilePush, topic: str, now: float) -> dict[str, str | bytes]:
    """The apns-* headers of one notification request (without authorization)."""
    background = push.background
    headers: dict[str, str | bytes] = {
        "apns-topic": topic.encode("utf-8"),
        "apns-push-type": "background" if background else "alert",
        # Apple: a background push must go with priority 5; 10 wakes the phone at once, for what is urgent.
        "apns-priority": "10" if push.priority == "high" and not background else "5",
        # 0: deliver now or never; otherwise APNs keeps it for an offline phone until then.
        "apns-expiration": str(int(now) + push.ttl) if push.ttl > 0 else "0",
    }
    if push.group_key:
        headers["apns-collapse-id"] = collapse_id(push.group_key)
    return headers
