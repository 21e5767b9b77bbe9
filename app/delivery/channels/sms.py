"""SMS: one text message per row to the member's verified number, when they consent, through SMS_PROVIDER.

The text is the type's plain-text template in the member's language (or the notification's title, body and
link), with absolute links. Its encoding decides its length (app/sms_text.py: GSM-7 160 characters, 153 per
part once split; UCS-2, which Japanese always is, 70 and 67): a rendering over the type's sms_max_segments
fails for good instead of going out as a wall of parts. A number the provider refuses for good is marked
invalid, and a recipient who unsubscribed at the carrier (Twilio 21610) withdraws their consent. A number that
replied STOP (app/hooks/sms_events.py) gets nothing, whatever its members' consent says, until it replies START.

One exception to "the member's verified number": a row of the built-in phone_verification type carries a code
to a number the member is verifying (app/users/phone_verification.py). It goes to the number of the live
verification that names that very row, and nowhere else; with none (replaced by a newer code, used, expired)
it is skipped. The ledger keeps its text with the code masked.
"""

from __future__ import annotations

from collections.abc import Mapping

from flask_babel import force_locale, lazy_pgettext

from app import sms_text
from app.delivery import rendering
from app.delivery.channels.base import Channel
from app.delivery.ledger import LEDGER
from app.delivery.queries import BatchRow, Template
from app.i18n import language_or_default
from app.locales import locale_chain
from app.notification_types.builtin import PHONE_VERIFICATION, verification_wording
from app.providers import Message
from app.users import phone_verification
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
    # Only verification rows have a target of their own (targets()); the others go to the member's number.
    no_target_reason = "sms_verification_ended"

    def skip_reason(self, row: BatchRow) -> str | None:
        """No number, one that replied STOP, one not verified or refused, or no consent (each may have changed)."""
        if row.type == PHONE_VERIFICATION:
            return None  # its number is the verification's (targets), which has no consent or verification yet
        if not row.phone:
            return "no_sms_number"
        if row.sms_suppressed:  # replied STOP: only START from that number lifts it, not a consent set anew
            return "sms_number_stopped"
        if not row.phone_usable:
            return "sms_number_unverified"
        if not row.sms_opt_in:
            return "no_sms_consent"
        return None

    def targets(self, rows) -> dict[int, tuple]:
        """Each row's number: a verification row's from its live verification (one read), the others' their own."""
        rows = list(rows)
        pending = phone_verification.targets(rows)
        found = {row.id: (pending[row.id],) for row in rows if row.id in pending}
        found.update({row.id: (row.phone,) for row in rows if row.type != PHONE_VERIFICATION})
        return found

    def build_message(self, row: BatchRow, templates: dict[tuple[str, str], Template], config: Mapping,
                      targets: tuple = ()) -> Message:  # fmt: skip
        """The template's text (or title, body and link), refused when it needs more parts than the type allows."""
        if row.type == PHONE_VERIFICATION:
            return self._verification_message(row, templates, config, targets)
        text = self._text(row, templates, config)
        self._check_length(row, text)
        return Message(delivery_id=row.id, channel=self.name, to=row.phone or "", subject="", text=text)

    def _text(self, row: BatchRow, templates: Mapping, config: Mapping, **extra) -> str:
        base_url = config["BASE_URL"]
        template = rendering.pick_template(templates, row.type, locale_chain(row.locale, config["DEFAULT_LOCALE"]))
        context = rendering.message_context(row, base_url, template)
        context.update(extra)
        if template is not None and template.body_text.strip():
            return rendering.render_string(template.body_text, context).strip()
        link = context["notification"]["link"]
        return "\n".join(part for part in (row.title.strip(), row.body.strip(), link) if part)

    def _verification_message(self, row: BatchRow, templates: Mapping, config: Mapping, targets: tuple) -> Message:
        """The code to the number being verified; the ledger keeps the text with the code masked."""
        target = next(t for t in targets if isinstance(t, phone_verification.Target))
        code = phone_verification.code_for(config["SECRET_KEY"], target.seed)
        if not any(key[0] == row.type for key in templates):  # the operator removed every wording: the built-in one
            with force_locale(language_or_default(row.locale, config["DEFAULT_LOCALE"])):
                templates = {(row.type, row.locale): Template("", verification_wording(), "")}
        masked = phone_verification.MASKED_CODE
        text, logged = (self._text(row, templates, config, code=shown) for shown in (code, masked))
        if code not in text:  # a wording that leaves the code out still sends it
            text, logged = f"{text} {code}".strip(), f"{logged} {masked}".strip()
        self._check_length(row, text)
        return Message(
            delivery_id=row.id, channel=self.name, to=target.phone, subject="", text=text, logged_text=logged
        )

    def _check_length(self, row: BatchRow, text: str) -> None:
        measured = sms_text.measure(text)
        if measured.segments > row.sms_max_segments:
            raise rendering.RenderError(
                f"the SMS needs {measured.segments} parts ({measured.encoding}, {measured.units} units) and the "
                f"type allows {row.sms_max_segments}"
            )

    def record_outcome(self, conn, result) -> None:
        """A number refused for good is marked invalid; an unsubscribed recipient's consent is withdrawn."""
        if result.row.type == PHONE_VERIFICATION:
            return  # the number refused is one being verified, not the member's: the code simply does not arrive
        if result.kind == "invalid_number":
            sms_users.mark_invalid(conn, result.row.user_id, result.row.phone, (result.error or "")[:200])
        elif result.kind == "unsubscribed":
            sms_users.withdraw(conn, result.row.user_id, "keyword", f"{result.provider}: {result.error or ''}"[:200])


CHANNEL = SmsChannel()
