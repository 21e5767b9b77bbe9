"""Slack: chat.postMessage with the installation's bot token, or a member's incoming webhook.

Channel data `{"channel": "U…|C…|D…|G…"}` posts through slack_sdk's WebClient (token SLACK_BOT_TOKEN, base URL
SLACK_API_BASE) with Block Kit blocks and the plain text as the fallback Slack shows in notifications; a user
id opens the bot's DM with that member. `{"webhook_url"}` posts the same JSON to the webhook over the guarded
transport (app/providers/chatfanout.py). Slack allows about one message a second per channel: each channel or
webhook is paced at that rate and a 429's Retry-After pauses it.

Answers (docs.slack.dev/reference/methods/chat.postMessage; the incoming-webhook error list):

- ok: sent; the message's ts is the provider message id.
- channel_not_found, not_in_channel, is_archived; a webhook's 404 no_service, 410 channel_is_archived, 403
  invalid_token: the account is gone (account_invalid: the channel invalidates it).
- invalid_auth, not_authed, token_revoked, account_inactive, missing_scope, team_access_not_granted: the
  installation's token is wrong (misconfigured, on the dashboard until a post works again). Issue 29 lists
  account_inactive among a member's errors, but Slack documents it as "the token is for a deleted user or
  workspace": the bot's own token, so treating it per member would invalidate every member's account at once.
- ratelimited (HTTP 429), internal_error, fatal_error, service_unavailable, request_timeout, 5xx, timeouts and
  connection errors: transient, with Retry-After.
- anything else (msg_too_long, invalid_blocks…): permanent.
"""

from __future__ import annotations

import logging
import urllib.error
from collections.abc import Mapping

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackRequestError

from app.providers import problems
from app.providers.base import Message, PermanentError, TransientError, register
from app.providers.chat_content import ChatContent, ChatTarget, digest
from app.providers.chatfanout import ACCOUNT_INVALID, ChatPart, WebhookPoster, webhook_failure
from app.providers.webpush import retry_after

log = logging.getLogger(__name__)

GONE = frozenset({"channel_not_found", "not_in_channel", "is_archived"})
MISCONFIGURED = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "account_inactive", "missing_scope", "team_access_not_granted"}
)
TRANSIENT = frozenset({"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"})
WEBHOOK_GONE = frozenset({"no_service", "no_team", "channel_not_found", "channel_is_archived", "invalid_token"})
SECTION_MAX = 3000  # a section block's text
TEXT_MAX = 40_000  # chat.postMessage's text

_noted = problems.Noted("slack")


def escape(text: str) -> str:
    """Text as Slack's mrkdwn shows it literally (&, < and > are its control characters)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def default_blocks(content: ChatContent) -> list[dict]:
    """One section: the title in bold (a link to the notification when it has one), then the body."""
    title = escape(content.title)
    if content.link and "|" not in content.link and ">" not in content.link:
        title = f"<{content.link}|{title}>"
    text = f"*{title}*\n{escape(content.body)}".strip()
    if len(text) > SECTION_MAX:
        text = text[: SECTION_MAX - 1] + "…"
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]


def payload(content: ChatContent) -> tuple[str, list]:
    """(the fallback text, the blocks) of a message: the operator's Block Kit, or the default section."""
    return escape(content.text)[:TEXT_MAX], content.slack_blocks or default_blocks(content)


class SlackProvider(ChatPart):
    """chat.postMessage to a channel or DM, or an incoming webhook's POST; see the module docstring."""

    name = "slack"
    scope_limit = (1.0, 1)  # about one message a second per channel (and per webhook)

    def __init__(self, config: Mapping) -> None:
        super().__init__(config)
        token = config["SLACK_BOT_TOKEN"]
        # No retry handlers: the engine retries (a connection error retried here could post twice).
        self.client = (
            WebClient(token=token, base_url=config["SLACK_API_BASE"], timeout=self.timeout, retry_handlers=[])
            if token
            else None
        )
        self.webhooks = WebhookPoster(config)

    @classmethod
    def from_config(cls, config: Mapping) -> SlackProvider:
        """Slack is on with CHAT_PROVIDER naming it: webhooks need no token, channels SLACK_BOT_TOKEN."""
        return cls(config)

    def __exit__(self, *exc_info) -> None:
        self.webhooks.close()

    def post(self, target: ChatTarget, message: Message) -> str:
        """Post to the target's channel (Web API) or webhook."""
        content = message.chat or ChatContent(message.subject, message.text, text=message.text)
        text, blocks = payload(content)
        data = target.data
        if data.get("webhook_url"):
            return self._webhook(data["webhook_url"], {"text": text, "blocks": blocks})
        return self._post_message(str(data.get("channel") or ""), text, blocks)

    def _post_message(self, channel: str, text: str, blocks: list) -> str:
        if self.client is None:
            _noted.note("a Slack channel is set but SLACK_BOT_TOKEN is empty")
            raise PermanentError("Slack: SLACK_BOT_TOKEN is not set", kind="misconfigured")
        try:
            response = self.client.chat_postMessage(channel=channel, text=text, blocks=blocks, unfurl_links=False)
        except SlackApiError as exc:
            raise self._failure(channel, exc) from None
        except TimeoutError as exc:
            raise TransientError(f"Slack did not answer in time ({type(exc).__name__})", kind="timeout") from None
        except (urllib.error.URLError, ConnectionError, SlackRequestError, OSError) as exc:
            raise TransientError(f"Slack connection: {type(exc).__name__}: {exc}"[:300], kind="connection") from None
        _noted.solved()
        return str(response.get("ts") or "")

    def _failure(self, channel: str, exc: SlackApiError):
        response = exc.response
        error = str(response.get("error") or "unknown_error")
        status = response.status_code
        text = f"Slack {error} (channel {channel})"
        if status == 429 or error in TRANSIENT or status >= 500:
            wait = retry_after(_header(response, "retry-after"), self.retry_cap)
            kind = "rate_limited" if status == 429 or error == "ratelimited" else error
            return TransientError(text, kind=kind, retry_after=wait, response_code=status)
        if error in GONE:
            return PermanentError(text, kind=ACCOUNT_INVALID, response_code=status)
        if error in MISCONFIGURED:
            log.warning("Slack refuses Hato's bot token: %s", error)
            _noted.note(f"Slack refuses SLACK_BOT_TOKEN: {error}")
            return PermanentError(text, kind="misconfigured", response_code=status)
        return PermanentError(text, kind=error, response_code=status)

    def _webhook(self, url: str, body: dict) -> str:
        who = f"Slack webhook {digest(url)}"
        reply = self.webhooks.post(who, url, body)
        if 200 <= reply.status_code < 300:
            return ""
        error = reply.text.split()[0] if reply.text else ""
        if error in WEBHOOK_GONE:
            raise PermanentError(f"{who} {reply.status_code}: {error}", kind=ACCOUNT_INVALID,
                                 response_code=reply.status_code)  # fmt: skip
        raise webhook_failure(who, reply, self.retry_cap, error)


def _header(response, name: str) -> str | None:
    """A header of a slack_sdk response, whatever the case its server wrote it in."""
    headers = response.headers or {}
    return next((value for key, value in headers.items() if key.lower() == name), None)


register("slack")(SlackProvider.from_config)
