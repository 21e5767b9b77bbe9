"""Chat: one message per row to every chat account the member linked (Slack, Microsoft Teams, Discord, LINE).

The product sets each member's channel data (PUT /v1/users/<id>/channel-data/<provider>); the accounts of the
providers CHAT_PROVIDER turns on are the row's targets, and all of them get the message at once through one
provider (app/providers/chatfanout.py), as push does with a member's browsers and phones. The accounts that took
it are noted on the row (reached): a retry, for the ones that failed for now, leaves them out, so nobody reads it
twice. A provider's refusal that means the account is gone (a Slack channel_not_found, a deleted webhook's 404,
a LINE user id that is not the channel's friend) invalidates that account with the reason at once.

The text is the type's plain-text template (or the title, body and link). The operator's optional rich parts
(slack_blocks, teams_card, line_flex on the template, JSON) are parsed, every string in them rendered like a
template, and sent instead of each provider's default layout, with the text as the fallback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from flask import current_app
from flask_babel import lazy_pgettext

from app.delivery import rendering, rich_json
from app.delivery.channels.base import Channel
from app.delivery.ledger import LEDGER
from app.delivery.queries import BatchRow, Template
from app.locales import locale_chain
from app.providers import Message, Provider
from app.providers.chat_content import ChatContent, ChatTarget
from app.providers.chatfanout import ChatFanout
from app.providers.registry import provider_names
from app.users import chat_accounts


def enabled(config: Mapping) -> list[str]:
    """The chat providers this installation sends through (CHAT_PROVIDER; LINE only with its token)."""
    names = provider_names("chat", config)
    return [name for name in names if name != "line" or config.get("LINE_CHANNEL_ACCESS_TOKEN")]


def can_send(target: ChatTarget, config: Mapping) -> bool:
    """Whether this installation can reach the account: its provider on (a Slack channel needs the bot token)."""
    if target.provider not in enabled(config):
        return False
    return not (target.provider == "slack" and "channel" in target.data and not config.get("SLACK_BOT_TOKEN"))


class ChatChannel(Channel):
    """One message per row to all of the member's chat accounts; a member with none is skipped (no_chat_account)."""

    name = "chat"
    label = lazy_pgettext("channel", "Chat")
    order = 50
    source = LEDGER
    # The text, then the optional rich parts per service (JSON whose strings are templates: app/delivery/rich_json.py).
    template_parts = ("body_text", *rich_json.RICH_PARTS)
    no_target_reason = "no_chat_account"
    # No born skip: a branch like sms's (sms_reachable, 0025) would take the ingest's statement past psycopg's 4 KB
    # parse cache (tests/notify/test_statement_size.py); the engine skips a member without an account instead.
    born_skip = None
    concurrent_sends = True  # a send is mostly waiting on Slack, LINE or a webhook

    def configured(self, config: Mapping) -> bool:
        """On when CHAT_PROVIDER names a provider that can send (LINE with its token)."""
        return bool(enabled(config))

    def providers(self, config: Mapping) -> list[Provider]:
        """One provider for the engine: the chat providers that are on, each sending to its own accounts."""
        parts = [part for part in super().providers(config) if part.name in enabled(config)]
        return [ChatFanout(parts)] if parts else []

    def send_timeout(self, config: Mapping) -> float:
        """One request's time, plus the longest sleep for an account's rate-limit token."""
        return float(config["CHAT_TIMEOUT"]) + float(config["RATE_LIMIT_MAX_WAIT_SECONDS"])

    def targets(self, rows: Iterable) -> dict[int, tuple]:
        """The usable chat accounts of each row's member that an earlier try did not reach (one read per batch)."""
        rows = list(rows)
        config = current_app.config
        accounts = chat_accounts.usable_accounts({row.user_id for row in rows})
        found = {}
        for row in rows:
            reached = set(getattr(row, "reached", None) or ())
            mine = (ChatTarget.of(provider, data) for provider, data in accounts.get(row.user_id, ()))
            targets = tuple(t for t in mine if can_send(t, config) and t.key not in reached)
            if targets:
                found[row.id] = targets
        return found

    def build_message(self, row: BatchRow, templates: dict[tuple[str, str], Template], config: Mapping,
                      targets: tuple = ()) -> Message:  # fmt: skip
        """The text (template or title, body and link) and the template's rich parts, rendered."""
        base_url = config["BASE_URL"]
        template = rendering.pick_template(templates, row.type, locale_chain(row.locale, config["DEFAULT_LOCALE"]))
        context = rendering.message_context(row, base_url, template)
        link = context["notification"]["link"] or ""
        title = " ".join(row.title.split()) or str(row.type_label)
        body = row.body.strip()
        if template is not None and template.body_text.strip():
            body = rendering.render_string(template.body_text, context).strip()
            text = body
        else:
            text = "\n".join(part for part in (title, body, link) if part)
        rich = {name: self._rich(template, name, context) for name in rich_json.RICH_PARTS}
        content = ChatContent(title=title, body=body, link=link, text=text, **rich)
        return Message(delivery_id=row.id, channel=self.name, to=f"user:{row.user_id}", subject=title, text=text,
                       targets=tuple(targets), chat=content)  # fmt: skip

    @staticmethod
    def _rich(template: Template | None, name: str, context: dict):
        """The template's rich part called name, checked for its service's shape and rendered; None when empty."""
        source = getattr(template, name) if template is not None else ""
        return rich_json.render(name, source, context) if source.strip() else None

    def record_outcome(self, conn, result) -> None:
        """Invalidate the accounts whose provider says they are gone (at once: no message goes there again)."""
        for outcome in result.outcomes:
            if outcome.invalid and outcome.target:
                provider = outcome.target.split(":", 1)[0]
                chat_accounts.invalidate_matching(
                    conn, result.row.user_id, provider,
                    lambda data, key=outcome.target, p=provider: ChatTarget.of(p, data).key == key,
                    outcome.invalid,
                )  # fmt: skip


CHANNEL = ChatChannel()
