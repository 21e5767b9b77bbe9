"""E-mail: the address and suppression checks, the rendered message with one-click unsubscribe, bounces."""

from __future__ import annotations

from collections.abc import Mapping

from app.delivery import rendering
from app.delivery.channels.base import Channel
from app.delivery.queries import BatchRow, Template
from app.delivery.unsubscribe import unsubscribe_url
from app.locales import locale_chain
from app.providers import Message
from app.suppressions.service import suppress_bounce


class EmailChannel(Channel):
    """One message per row to the user's address, in their locale's template, with RFC 8058 unsubscribe."""

    name = "email"
    concurrent_sends = True

    def skip_reason(self, row: BatchRow) -> str | None:
        """No address, or an address on the suppression list (that holds for mandatory types too)."""
        if not (row.email or "").strip():
            return "no_address"
        if row.suppressed:
            return "suppressed"
        return None

    def build_message(self, row: BatchRow, templates: dict[tuple[str, str], Template], config: Mapping,
                      targets: tuple = ()) -> Message:  # fmt: skip
        """Subject, text and HTML from the template (or the notification's own words), plus List-Unsubscribe."""
        base_url = config["BASE_URL"]
        unsubscribe = unsubscribe_url(base_url, row.user_id, row.type)
        template = rendering.pick_template(templates, row.type, locale_chain(row.locale, config["DEFAULT_LOCALE"]))
        rendered = rendering.render_email(row, template, base_url, unsubscribe)
        headers = {"List-Unsubscribe": f"<{unsubscribe}>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}
        return Message(delivery_id=row.id, channel=row.channel, to=(row.email or "").strip(), to_name=row.display_name,
                       subject=rendered.subject, text=rendered.text, html=rendered.html, headers=headers)  # fmt: skip

    def record_outcome(self, conn, result) -> None:
        """A hard bounce (a 5xx for the recipient) stops e-mail to the address."""
        if result.kind == "bounce" and (result.row.email or "").strip():
            suppress_bounce(conn, result.row.email, (result.error or "")[:500])
