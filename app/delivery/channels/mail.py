"""E-mail: the address and suppression checks, the rendered message with one-click unsubscribe, bounces."""

from __future__ import annotations

from collections.abc import Mapping

from flask_babel import lazy_pgettext

from app.delivery import rendering
from app.delivery.channels.base import Channel
from app.delivery.ledger import LEDGER
from app.delivery.queries import BatchRow, Template
from app.delivery.unsubscribe import unsubscribe_url
from app.locales import locale_chain
from app.providers import Message
from app.suppressions.service import suppress_bounce


class EmailChannel(Channel):
    """One message per row to the user's address, in their locale's template, with RFC 8058 unsubscribe.

    Every e-mail, a digest too, is put in its envelope by envelope(), so each carries List-Unsubscribe.
    """

    name = "email"
    label = lazy_pgettext("channel", "E-mail")
    order = 20
    source = LEDGER
    concurrent_sends = True
    template_parts = ("subject", "body_text", "body_html")
    born_skip = ("coalesce(c.email, '') = ''", "no_email_address")

    def skip_reason(self, row) -> str | None:
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
        # A tenant's notification (issue 32) comes from its sender name, and replies go to its reply-to.
        return self.envelope(row.id, row.email, row.display_name, rendered, unsubscribe,
                             from_name=row.tenant_sender_name, reply_to=row.tenant_reply_to)  # fmt: skip

    def envelope(self, message_id: int, address: str | None, name: str, rendered: rendering.Rendered,
                 unsubscribe: str, from_name: str | None = None, reply_to: str | None = None) -> Message:  # fmt: skip
        """The Message for a rendered e-mail to address, with RFC 8058 one-click unsubscribe at unsubscribe."""
        headers = {"List-Unsubscribe": f"<{unsubscribe}>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}
        if reply_to:
            headers["Reply-To"] = reply_to
        return Message(delivery_id=message_id, channel=self.name, to=(address or "").strip(), to_name=name,
                       subject=rendered.subject, text=rendered.text, html=rendered.html, headers=headers,
                       from_name=from_name or None)  # fmt: skip

    def record_outcome(self, conn, result) -> None:
        """A hard bounce (a 5xx for the recipient) stops e-mail to the address."""
        if result.kind == "bounce" and (result.row.email or "").strip():
            suppress_bounce(conn, result.row.email, (result.error or "")[:500])


CHANNEL = EmailChannel()
