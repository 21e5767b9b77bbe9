"""Discord: an embed to the member's channel webhook (execute webhook, `?wait=true`).

`POST <webhook_url>?wait=true` with `{"embeds": [{"title", "description", "url"}], "allowed_mentions":
{"parse": []}}`: the title links to the notification, the body is the description, and no text of a
notification can ping @everyone or a role. With wait=true Discord answers 200 with the created message, whose
id is the message id. It goes over the guarded transport (app/providers/chatfanout.py); each webhook is paced at
Discord's 5 posts per 2 seconds, and a 429's Retry-After (or its JSON retry_after) pauses it.

Answers: 200/204 sent; 404 {"code": 10015, "Unknown Webhook"} and 401 (50027, the token is no longer valid):
the account is gone (account_invalid); 429 and 5xx transient; any other 4xx (50035 Invalid Form Body…)
permanent; a refused address permanent, timeouts and transport errors transient.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from app.providers.base import Message, PermanentError, TransientError, register
from app.providers.chat_content import ChatContent, ChatTarget, digest
from app.providers.chatfanout import ACCOUNT_INVALID, WebhookPart, reply_json, webhook_failure

TITLE_MAX, DESCRIPTION_MAX = 256, 4096
UNKNOWN_WEBHOOK = 10015


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def body(content: ChatContent) -> dict:
    """The execute-webhook body: one embed, mentions off."""
    embed = {"title": _cut(content.title or "…", TITLE_MAX)}
    if content.body.strip():
        embed["description"] = _cut(content.body, DESCRIPTION_MAX)
    if content.link:
        embed["url"] = content.link
    return {"embeds": [embed], "allowed_mentions": {"parse": []}}


def waiting_url(url: str) -> str:
    """The webhook URL with wait=true (Discord then answers with the created message)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "wait"] + [("wait", "true")]
    return urlunsplit(parts._replace(query=urlencode(query)))


class DiscordProvider(WebhookPart):
    """Executes each member's Discord webhook with an embed; see the module docstring."""

    name = "discord"
    scope_limit = (2.5, 5)  # 5 requests per 2 seconds per webhook (what Discord's rate-limit headers show)

    def post(self, target: ChatTarget, message: Message) -> str:
        """Execute the target's webhook with the embed."""
        content = message.chat or ChatContent(message.subject, message.text, text=message.text)
        url = target.webhook_url
        who = f"Discord webhook {digest(url)}"
        reply = self.webhooks.post(who, waiting_url(url), body(content))
        answer = reply_json(reply)
        if 200 <= reply.status_code < 300:
            return str(answer.get("id") or "")
        detail = f"{answer.get('code', '')} {answer.get('message', '')}".strip()
        if reply.status_code == 429 and not reply.headers.get("Retry-After"):
            wait = answer.get("retry_after")
            if isinstance(wait, int | float) and wait >= 0:
                raise TransientError(f"{who} 429: {detail}", kind="rate_limited", retry_after=min(float(wait),
                                     self.retry_cap), response_code=429)  # fmt: skip
        if answer.get("code") == UNKNOWN_WEBHOOK:
            raise PermanentError(f"{who} {reply.status_code}: {detail}", kind=ACCOUNT_INVALID,
                                 response_code=reply.status_code)  # fmt: skip
        raise webhook_failure(who, reply, self.retry_cap, detail)


register("discord")(DiscordProvider.from_config)
