"""In-app: the notification row itself, shown in the inbox, the badge and the feed; nothing to send.

A channel members choose (its preference decides whether the row is visible or born read and hidden)
and operators write templates for (the toast's title and text), but it has no ledger rows: the engine
never sees it.
"""

from __future__ import annotations

from flask_babel import lazy_pgettext

from app.delivery.channels.base import Channel


class InAppChannel(Channel):
    """The inbox."""

    name = "in_app"
    label = lazy_pgettext("channel", "In-app")
    order = 10
    delivers = False


CHANNEL = InAppChannel()
