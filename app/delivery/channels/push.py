"""Web Push: every active subscription of the user, a JSON payload cut to fit, gone subscriptions invalidated."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from flask_babel import lazy_pgettext

from app.delivery import rendering
from app.delivery.channels.base import Channel
from app.delivery.ledger import LEDGER
from app.delivery.queries import BatchRow, Template
from app.delivery.unsubscribe import unsubscribe_url
from app.locales import locale_chain
from app.providers import Message
from app.push import payload
from app.push import queries as push_queries
from app.push import service as push_service


class PushChannel(Channel):
    """One message per row to all of the user's browsers; a user with none is skipped (no_subscription)."""

    name = "push"
    label = lazy_pgettext("channel", "Push")
    order = 30
    source = LEDGER
    no_target_reason = "no_subscription"
    born_skip = (
        "NOT EXISTS (SELECT 1 FROM push_subscriptions ps WHERE ps.user_id = i.user_id AND ps.invalidated_at IS NULL)",
        "no_push_subscription",
    )

    def configured(self, config: Mapping) -> bool:
        """Web Push needs the VAPID keys."""
        return bool(config["VAPID_PRIVATE_KEY"]) and super().configured(config)

    def targets(self, rows: Iterable) -> dict[int, tuple]:
        """The active subscriptions of each row's user (one statement for the batch)."""
        rows = list(rows)
        by_user = push_queries.active_targets({row.user_id for row in rows})
        return {row.id: by_user[row.user_id] for row in rows if by_user.get(row.user_id)}

    def build_message(self, row: BatchRow, templates: dict[tuple[str, str], Template], config: Mapping,
                      targets: tuple = ()) -> Message:  # fmt: skip
        """Title and body from the template (or the notification), as the JSON payload; TTL, Urgency, Topic."""
        base_url = config["BASE_URL"]
        context = rendering.template_context(row, base_url, unsubscribe_url(base_url, row.user_id, row.type))
        template = rendering.pick_template(templates, row.type, locale_chain(row.locale, config["DEFAULT_LOCALE"]))
        title, body = row.title, row.body
        if template is not None and template.subject.strip():
            title = rendering.render_string(template.subject, context)
        if template is not None and template.body_text.strip():
            body = rendering.render_string(template.body_text, context)
        title = " ".join(title.split()) or row.type_label
        tag = f"{row.type}:{row.notification_id}"  # the console preview uses the same tag
        urgency, ttl = payload.urgency(row.priority)
        text = payload.fit_payload(title, body, context["notification"]["link"], tag)
        headers = {"TTL": str(ttl), "Urgency": urgency, "Topic": payload.topic(tag)}
        return Message(delivery_id=row.id, channel=row.channel, to=f"user:{row.user_id}", subject=title, text=text,
                       headers=headers, targets=tuple(targets))  # fmt: skip

    def record_outcome(self, conn, result) -> None:
        """Stamp the subscriptions that took the message; invalidate the ones the push service says are gone."""
        if result.reached or result.invalidated:
            push_service.record_outcome(conn, result.reached, result.invalidated)


CHANNEL = PushChannel()
