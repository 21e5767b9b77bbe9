"""The soak's providers: every channel's stand-in (issues 28–29) in this process, and what each one took.

The web, worker and sweeper processes reach them through the settings in `env` only, as they would the real
services. Each notification's title carries a marker (`soak:<stream>-<n>`), so an arrival is counted per
provider and marker whatever shape the provider's payload has: a duplicate is a marker counted twice by one
provider.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from tests.support.apns_server import ApnsServer
from tests.support.chat_webhooks_server import ChatWebhooksServer
from tests.support.fcm_server import FcmServer
from tests.support.line_server import LineServer
from tests.support.slack_server import SlackServer
from tests.support.twilio_server import TwilioServer
from tests.support.vonage_server import VonageServer

MARKER = re.compile(r"soak:[a-z]+\d*-\d+")

# Each channel's providers, as the member's destinations are set up (tests/soak/world.py): a push goes to an
# iPhone and an Android phone, a chat message to a Slack DM, a LINE friend, a Teams flow and a Discord webhook.
PROVIDERS = {"push": ("apns", "fcm"), "sms": ("twilio", "vonage"), "chat": ("slack", "line", "msteams", "discord")}


class StandIns:
    """Start every stand-in; `env` holds the settings that send to them; `arrivals()` counts what they took."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._stack = ExitStack()
        self.env: dict[str, str] = {}

    def __enter__(self) -> StandIns:
        for name in ("apns", "fcm", "vonage", "chat"):
            (self.workdir / name).mkdir(parents=True, exist_ok=True)
        enter = self._stack.enter_context
        self.apns = enter(ApnsServer(self.workdir / "apns"))
        self.fcm = enter(FcmServer())
        self.twilio = enter(TwilioServer(callback_delay=0))
        self.vonage = enter(VonageServer(directory=self.workdir / "vonage"))
        self.slack = enter(SlackServer())
        self.line = enter(LineServer())
        self.hooks = enter(ChatWebhooksServer(directory=self.workdir / "chat"))
        settings = {
            **self.apns.settings(), **self.fcm.settings(self.fcm.service_account(self.workdir / "fcm")),
            **self.twilio.settings(), **self.vonage.settings(), **self.slack.settings(), **self.line.settings(),
            **self.hooks.settings(),
        }  # fmt: skip
        self.env = {name: str(value) for name, value in settings.items() if value is not None}
        self.env.update(
            PUSH_PROVIDER="webpush", VAPID_PRIVATE_KEY="",  # phones only: no browser push service here
            SMS_PROVIDER="twilio,vonage",  # Vonage takes over while Twilio fails
            CHAT_PROVIDER="slack,msteams,discord,line",
            CHAT_ALLOWED_HOSTS="127.0.0.1", CHAT_ALLOW_PRIVATE_ADDRESSES="true",
            CHAT_ALLOW_HTTP_ENDPOINTS="true",  # the stand-in listens on its own port, not 443
            APNS_TIMEOUT="2", FCM_TIMEOUT="2", SMS_TIMEOUT="2", CHAT_TIMEOUT="2", PUSH_TIMEOUT="2",
        )  # fmt: skip
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def webhook(self, kind: str) -> str:
        """The Teams flow or Discord webhook every member's account posts to."""
        return self.hooks.url_for(kind)

    def arrivals(self) -> dict[str, Counter]:
        """Per provider: how many times each marker arrived."""
        taken = {
            "apns": [push.payload for push in self.apns.received],
            "fcm": [r.message for r in self.fcm.received],
            "twilio": [r.body for r in self.twilio.received],
            "vonage": [r.text for r in self.vonage.received],
            "slack": [p.text or p.body for p in self.slack.received],
            "line": [p.messages for p in self.line.received],
            "msteams": [r.body for r in self.hooks.received if r.kind == "teams"],
            "discord": [r.body for r in self.hooks.received if r.kind == "discord"],
        }
        return {provider: Counter(_marker(item) for item in items) for provider, items in taken.items()}


def _marker(item: object) -> str | None:
    """The soak marker in one provider payload (None: not the soak's)."""
    found = MARKER.search(item if isinstance(item, str) else json.dumps(item, default=str, ensure_ascii=False))
    return found.group(0) if found else None
