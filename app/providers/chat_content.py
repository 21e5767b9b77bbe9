"""What a chat message carries, provider-neutral: the member's account it goes to and what it says.

The chat channel (app/delivery/channels/chat.py) builds one ChatContent per message and one ChatTarget per
usable chat account of the member; Slack, Teams, Discord and LINE (app/providers/slack.py, msteams.py,
discord.py, line.py) each turn the content into their own payload. A webhook URL is a secret (whoever has it
can post): a target's key and scope name it by a digest only, and no log line quotes it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class ChatTarget:
    """One chat account of a member: its provider and the channel data the product set for it."""

    provider: str  # slack | msteams | discord | line
    data_json: str  # the channel data as canonical JSON (hashable; json.loads gives the dict back)

    @classmethod
    def of(cls, provider: str, data: dict) -> ChatTarget:
        """The target of one chat account (data as stored)."""
        return cls(provider, json.dumps(data, sort_keys=True, separators=(",", ":")))

    @property
    def data(self) -> dict:
        """The channel data."""
        return json.loads(self.data_json)

    @property
    def webhook_url(self) -> str:
        """The account's webhook URL ('' when it has none)."""
        return str(self.data.get("webhook_url") or "")

    @property
    def key(self) -> str:
        """What the ledger notes once the account got the message (a retry leaves it out): no secret in it."""
        data = self.data
        if data.get("webhook_url"):
            return f"{self.provider}:hook:{digest(data['webhook_url'])}"
        return f"{self.provider}:{data.get('channel') or data.get('user_id') or ''}"


def digest(secret: str) -> str:
    """A short stable name for a secret (a webhook URL), for keys, scopes and logs."""
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


def webhook_host(url: str) -> str:
    """The host of a webhook URL (what a log may show of it)."""
    return (urlsplit(url).hostname or "?").lower()


@dataclass(frozen=True)
class ChatContent:
    """One notification as chat: the plain text every provider gets, and the operator's rich parts if any.

    The rich parts are the template's JSON with every string already rendered (None: the provider's own
    default layout from title, body and link).
    """

    title: str
    body: str
    link: str = ""
    text: str = ""  # the plain text: the fallback (Slack's text, LINE's altText) and what the ledger keeps
    slack_blocks: list | None = None
    teams_card: dict | None = None
    line_flex: dict | None = None
