"""What the preferences page says about a member's chat accounts: the service's name and where messages land."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask_babel import gettext, lazy_pgettext

from app.users.chat_accounts import ChatAccountRow

# The services' own names (brands, the same in both languages, but through the catalogs like every label).
SERVICE_NAMES = {
    "slack": lazy_pgettext("chat service", "Slack"),
    "msteams": lazy_pgettext("chat service", "Microsoft Teams"),
    "discord": lazy_pgettext("chat service", "Discord"),
    "line": lazy_pgettext("chat service", "LINE"),
}


def place(account: ChatAccountRow) -> str:
    """Where this account's messages land, without the secret parts (a webhook URL's path is its key)."""
    data = account.data or {}
    if data.get("webhook_url"):
        host = urlsplit(str(data["webhook_url"])).hostname or ""
        return gettext("a webhook on %(host)s", host=host)
    if account.provider == "slack":
        channel = str(data.get("channel", ""))
        # Slack's ids: U…/W… a person (a DM from the app), D… a DM, C…/G… a channel.
        if channel[:1] in ("U", "W", "D"):
            return gettext("direct messages from the app")
        return gettext("the channel %(channel)s", channel=channel)
    if account.provider == "line":
        return gettext("messages from the official account")
    return ""
