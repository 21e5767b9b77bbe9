"""SMS: one text message per row to the member's verified number, when they consent, through SMS_PROVIDER.

The text is the type's plain-text template in the member's language (or the notification's title, body and
link), with absolute links. Its encoding decides its length (app/sms_text.py: GSM-7 160 characters, 153 per
part once split; UCS-2, which Japanese always is, 70 and 67): a rendering over the type's sms_max_segments
fails for good instead of going out as a wall of parts. A number the provider refuses for good is marked
invalid, and a recipient who unsubscribed at the carrier (Twilio 21610) withdraws their consent. A number that
replied STOP (app/hooks/sms_events.py) gets nothing, whatever its members' consent says, until it replies START.
"""

from __future__ import annotations

from collections.abc import Mapping

from flask_babel import lazy_pgettext

from app import sms_text
from app.delivery import rendering
from app.delivery.channels.base import Channel
from app.delivery.ledger import LEDGER
from app.delivery.queries import BatchRow, Template
from app.delivery.unsubscribe import unsubscribe_url
from app.locales import locale_chain
from app.providers import Message
from app.users import sms as sms_users


class SmsChannel(Channel):
    """One SMS per row to the member's number; rows of members without a usable number or consent are skipped."""

    name = "sms"
    label = lazy_pgettext("channel", "SMS")
    order = 40
    source = LEDGER
    template_parts = ("body_text",)
    # sms_reachable (migration 0025): a verified, unrefused number and consent in force (the sms_receivers view).
    born_skip = ("NOT sms_reachable(i.user_id)", "no_sms_number")

    def skip_reason(self, row: BatchRow) -> str | None:
        """No number, one that replied STOP, one not verified or refused, or no consent (each may have changed)."""
        if not row.phone:
            return "no_sms_number"
        if row.sms_suppressed:  # replied STOP: only START from that number lifts it, not a consent set anew
            return "sms_number_stopped"
        if not row.phone_usable:
            return "sms_number_unverified"
        if not row.sms_opt_in:
            return "no_sms_consent"
        return None

    def build_message(self, row: BatchRow, templates: dict[tuple[str, str], Template], config: Mapping,
                      targets: tuple = ()) -> Message:  # fmt: skip
        """The template's text (or title, body and link), refused when it needs more parts than the type allows."""
        base_url = config["BASE_URL"]
        context = rendering.template_context(row, base_url, unsubscribe_url(base_url, row.user_id, row.type))
        template = rendering.pick_template(templates, row.type, locale_chain(row.locale, config["DEFAULT_LOCALE"]))
        if template is not None and template.body_text.strip():
            text = rendering.render_string(template.body_text, context).strip()
        else:
            link = context["notification"]["link"]
            text = "\n".join(part for part in (row.title.strip(), row.body.strip(), link) if part)
        measured = sms_text.measure(text)
        if measured.segments > row.sms_max_segments:
            raise rendering.RenderError(
                f"the SMS needs {measured.segments} parts ({measured.encoding}, {measured.units} units) and the "
                f"type allows {row.sms_max_segments}"
            )
        return Message(delivery_id=row.id, channel=self.name, to=row.phone or "", subject="", text=text)

    def record_outcome(self, conn, result) -> None:
        """A number refused for good is marked invalid; an unsubscribed recipient's consent is withdrawn."""
        if result.kind == "invalid_number":
            sms_users.mark_invalid(conn, result.row.user_id, result.row.phone, (result.error or "")[:200])
        elif result.kind == "unsubscribed":
            sms_users.withdraw(conn, result.row.user_id, "keyword", f"{result.provider}: {result.error or ''}"[:200])


CHANNEL = SmsChannel()
