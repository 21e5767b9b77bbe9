"""Microsoft Teams: an Adaptive Card to the member's incoming webhook or Workflows trigger URL.

The body is the message envelope Teams' webhooks and the Workflows "When a Teams webhook request is received"
trigger take: `{"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive",
"content": <card>}]}`, the card being the operator's Adaptive Card or a default one (the title, which opens the
notification when it has a link, and the body), version 1.4 (Workflows refuses newer cards). It goes over the
guarded transport (app/providers/chatfanout.py), each webhook paced at a few posts a second.

Answers: 2xx (200, or Workflows' 202) sent; 401, 404, 410 (a deleted flow or webhook, a signature no longer
valid): the account is gone (account_invalid); 408, 409, 425, 429 and 5xx transient with Retry-After; any other
4xx permanent; a refused address permanent, timeouts and transport errors transient.
"""

from __future__ import annotations

from app.providers.base import Message, register
from app.providers.chat_content import ChatContent, ChatTarget, digest
from app.providers.chatfanout import WebhookPart, webhook_failure

ADAPTIVE = "application/vnd.microsoft.card.adaptive"
CARD_VERSION = "1.4"


def default_card(content: ChatContent) -> dict:
    """The title in bold and the body, in a container that opens the notification's link when it has one."""
    items = [{"type": "TextBlock", "text": content.title, "weight": "Bolder", "size": "Medium", "wrap": True}]
    if content.body.strip():
        items.append({"type": "TextBlock", "text": content.body, "wrap": True})
    container: dict = {"type": "Container", "items": items}
    if content.link:
        container["selectAction"] = {"type": "Action.OpenUrl", "url": content.link}
    return {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard",
            "version": CARD_VERSION, "body": [container]}  # fmt: skip


def envelope(content: ChatContent) -> dict:
    """The webhook's JSON: one message with the card attached."""
    card = content.teams_card or default_card(content)
    return {"type": "message", "attachments": [{"contentType": ADAPTIVE, "contentUrl": None, "content": card}]}


class TeamsProvider(WebhookPart):
    """Posts an Adaptive Card to each member's Teams webhook; see the module docstring."""

    name = "msteams"
    scope_limit = (4.0, 4)  # Teams throttles a webhook beyond a few posts a second

    def post(self, target: ChatTarget, message: Message) -> str:
        """POST the card to the target's webhook."""
        content = message.chat or ChatContent(message.subject, message.text, text=message.text)
        url = target.webhook_url
        who = f"Teams webhook {digest(url)}"
        reply = self.webhooks.post(who, url, envelope(content))
        if 200 <= reply.status_code < 300:
            return reply.headers.get("x-ms-workflow-run-id") or ""
        raise webhook_failure(who, reply, self.retry_cap)


register("msteams")(TeamsProvider.from_config)
