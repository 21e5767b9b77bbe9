"""What a websocket message says: the badge (HTML partials for the inbox, JSON for feed sockets) and toasts."""

from __future__ import annotations

import json

from flask import render_template

from app.inbox import queries
from app.live.publish import TOAST_TITLE_MAX
from app.realtime.connection import JSON_FRAMES


def render_frame(counts: queries.BadgeCounts, toasts: list[dict] | tuple = ()) -> str:
    """Render one websocket message: the badge partial out-of-band (showing BADGE_COUNTS), plus any toasts."""
    html = render_template("_badge.html", badge_count=counts.shown(), badge_both=counts, oob=True)
    if toasts:
        html += render_template("_toast.html", toasts=toasts)
    return html


def render_json_frame(counts: queries.BadgeCounts, toasts: list[dict] | tuple = ()) -> str:
    """Render one feed-socket message: both counts, the shown badge and any toasts, as JSON."""
    frame = {"type": "counts", "unread": counts.unread, "unseen": counts.unseen, "badge": counts.shown()}
    if toasts:
        frame["toasts"] = [{"title": toast["title"]} for toast in toasts]  # never the tenant's id
    return json.dumps(frame)


def render_for(frame_key: str, counts: queries.BadgeCounts, toasts: list[dict] | tuple = ()) -> str:
    """Render the frame a socket with this frame key reads (JSON for feed sockets, else the HTML partials)."""
    return render_json_frame(counts, toasts) if frame_key.startswith(JSON_FRAMES) else render_frame(counts, toasts)


def parse_toast(payload: object) -> dict | None:
    """Return the toast a pub/sub message carries ({"title": str}), or None."""
    if not isinstance(payload, dict) or not isinstance(payload.get("toast"), dict):
        return None
    title, tenant = payload["toast"].get("title"), payload["toast"].get("tenant")
    if not title:
        return None
    toast = {"title": str(title)[:TOAST_TITLE_MAX]}
    if type(tenant) is int:
        toast["tenant"] = tenant
    return toast


def toasts_in_scope(toasts: list[dict] | tuple, tenant_id: int | None) -> list[dict]:
    """The toasts a socket shows: all of them, or in a tenant's scope only that tenant's (issue 32)."""
    return list(toasts) if tenant_id is None else [t for t in toasts if t.get("tenant") == tenant_id]
