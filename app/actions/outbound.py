"""Action buttons as e-mails and pushes carry them: absolute links, named actions behind signed confirm links.

Each button becomes {"action", "title", "url"} (plus "post": true for a named action): a link button's url is
the product's page on BASE_URL; a named action's is its signed confirm page (app/actions/signing.py), to
which this site's service worker posts (url + "/push") with the member's session. Labels are in the
member's locale.
"""

from __future__ import annotations

from app.actions.queries import label_for
from app.actions.signing import action_url

LINK_ID = "link-{}"  # a link button's id in a push (a named action's id is its name)


def outbound(actions: list | None, user_id: int, notification_id: int, locale: str | None, default: str,
             base_url: str) -> list[dict]:  # fmt: skip
    """The notification's buttons for one member, with absolute URLs (none: [])."""
    base = base_url.rstrip("/")
    out = []
    for position, button in enumerate(actions or (), start=1):
        title = label_for(button, locale, default)
        name = button.get("action")
        if name is None:
            out.append({"action": LINK_ID.format(position), "title": title, "url": base + button["url"]})
        else:
            url = action_url(base, user_id, notification_id, name)
            out.append({"action": name, "title": title, "url": url, "post": True})
    return out
