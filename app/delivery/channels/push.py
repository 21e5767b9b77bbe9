"""Push: every browser (Web Push) and phone (APNs, FCM) of the user, each through its own part of the provider.

One message per row goes to all of them (app/providers/pushfanout.py): the browsers get the JSON payload cut
to fit, the phones an alert in each one's language with the unread count as the iPhone's badge. Gone
subscriptions and refused device tokens are invalidated at once; the browsers and phones that took it are
stamped as the batch ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from flask_babel import lazy_pgettext

from app.actions.outbound import outbound
from app.delivery import rendering
from app.delivery.channels.base import Channel
from app.delivery.ledger import LEDGER
from app.delivery.queries import BatchRow, Template
from app.devices import queries as device_queries
from app.devices import service as device_service
from app.inbox.queries import badge_count
from app.locales import locale_chain
from app.providers import Message, Provider
from app.providers.mobile import DeviceTarget, MobileAlert, MobilePush
from app.providers.pushfanout import MOBILE_PARTS, PushFanout
from app.providers.registry import provider_names
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
    # The phones' variant (mobile_*) is optional: an empty part falls back to subject / body_text.
    template_parts = ("subject", "body_text", "mobile_title", "mobile_subtitle", "mobile_body")
    # push_reachable (migration 0025): a browser or phone that is neither off nor refused (the push_receivers view).
    born_skip = ("NOT push_reachable(i.user_id)", "no_push_subscription")

    def configured(self, config: Mapping) -> bool:
        """Web Push needs the VAPID keys; APNs and FCM are on with their credentials."""
        names = provider_names(self.name, config)
        return any(name in MOBILE_PARTS.values() for name in names) or (
            bool(config["VAPID_PRIVATE_KEY"]) and super().configured(config)
        )

    def providers(self, config: Mapping) -> list[Provider]:
        """One provider for the engine: the parts that are on, each sending to its own kind of device."""
        parts = super().providers(config)
        return [PushFanout(parts)] if parts else []

    def send_timeout(self, config: Mapping) -> float:
        """The slowest part's timeout: no row starts that could still be sending when the batch's lease ends."""
        timeouts = {"apns": "APNS_TIMEOUT", "fcm": "FCM_TIMEOUT"}
        if config["VAPID_PRIVATE_KEY"]:  # Web Push is on only with its key
            timeouts["webpush"] = "PUSH_TIMEOUT"
        names = [name for name in provider_names(self.name, config) if name in timeouts]
        return max((float(config[timeouts[name]]) for name in names), default=0.0)

    def targets(self, rows: Iterable) -> dict[int, tuple]:
        """The active browsers and phones of each row's user (two statements for the batch)."""
        rows = list(rows)
        users = {row.user_id for row in rows}
        browsers, phones = push_queries.active_targets(users), device_queries.active_targets(users)
        found = {row.id: _not_reached(row, browsers.get(row.user_id, ()) + phones.get(row.user_id, ())) for row in rows}
        return {row_id: targets for row_id, targets in found.items() if targets}

    def build_message(self, row: BatchRow, templates: dict[tuple[str, str], Template], config: Mapping,
                      targets: tuple = ()) -> Message:  # fmt: skip
        """Title and body from the template (or the notification), as the JSON payload; TTL, Urgency, Topic."""
        base_url = config["BASE_URL"]
        template = rendering.pick_template(templates, row.type, locale_chain(row.locale, config["DEFAULT_LOCALE"]))
        context = rendering.message_context(row, base_url, template)
        title, body = row.title, row.body
        if template is not None and template.subject.strip():
            title = rendering.render_string(template.subject, context)
        if template is not None and template.body_text.strip():
            body = rendering.render_string(template.body_text, context)
        title = " ".join(title.split()) or row.type_label
        tag = f"{row.type}:{row.notification_id}"  # the console preview uses the same tag
        urgency, ttl = payload.urgency(row.priority)
        link = context["notification"]["link"]
        buttons = outbound(row.actions, row.user_id, row.notification_id, row.locale, config["DEFAULT_LOCALE"],
                           base_url)  # fmt: skip
        text = payload.fit_payload(title, body, link, tag, actions=buttons)
        headers = {"TTL": str(ttl), "Urgency": urgency, "Topic": payload.topic(tag)}
        phones = [target for target in targets if isinstance(target, DeviceTarget)]
        mobile = self._mobile(row, templates, config, context, phones, (title, body), ttl, buttons) if phones else None
        return Message(delivery_id=row.id, channel=row.channel, to=f"user:{row.user_id}", subject=title, text=text,
                       headers=headers, targets=tuple(targets), mobile=mobile)  # fmt: skip

    def _mobile(self, row: BatchRow, templates, config: Mapping, context: dict, phones: list[DeviceTarget],
                default: tuple[str, str], ttl: int, buttons: list[dict]) -> MobilePush:  # fmt: skip
        """The phones' part: the alert in each language they speak (the user's for a phone that names none)."""
        alerts = {}
        for locale in sorted({phone.locale for phone in phones}):
            chain = locale_chain(locale or row.locale, config["DEFAULT_LOCALE"])
            template = rendering.pick_template(templates, row.type, chain)
            title, body, subtitle = *default, ""
            if template is not None:  # the phones' own wording first, then the template's title and body
                title_source = template.mobile_title if template.mobile_title.strip() else template.subject
                body_source = template.mobile_body if template.mobile_body.strip() else template.body_text
                if title_source.strip():
                    title = " ".join(rendering.render_string(title_source, context).split()) or row.type_label
                if body_source.strip():
                    body = rendering.render_string(body_source, context)
                if template.mobile_subtitle.strip():
                    subtitle = " ".join(rendering.render_string(template.mobile_subtitle, context).split())
            alerts[locale] = MobileAlert(title, body, subtitle)
        badge = badge_count(row.user_id) if any(phone.platform == "ios" for phone in phones) else None
        return MobilePush(alerts=alerts, notification_id=row.notification_id, link=context["notification"]["link"],
                          group_key=row.group_key, thread_id=row.type, ttl=ttl, badge=badge,
                          priority="high" if row.priority == "high" else "normal", actions=tuple(buttons))  # fmt: skip

    def record_outcome(self, conn, result) -> None:
        """Invalidate the browsers and phones whose push service says they are gone (at once: never again)."""
        tokens = {outcome.target for outcome in result.outcomes if outcome.target}
        browsers_gone = [e for e in result.invalidated if e not in tokens]
        if browsers_gone:
            push_service.record_outcome(conn, (), tuple(browsers_gone))
        gone = [(o.target, o.invalid, o.invalid_since) for o in result.outcomes if o.target and o.invalid]
        if gone:
            device_service.record_outcome(conn, result.row.user_id, (), gone)

    def stamps(self, result) -> list:
        """The browsers (endpoint) and phones ((user id, token)) that took the message, stamped as the batch ends."""
        tokens = {outcome.target for outcome in result.outcomes if outcome.target}
        return [(result.row.user_id, e) if e in tokens else e for e in result.reached]

    def write_stamps(self, conn, stamps: list) -> None:
        """last_success_at of the browsers and last_sent_at of the phones, one statement each."""
        browsers = [stamp for stamp in stamps if isinstance(stamp, str)]
        phones = [stamp for stamp in stamps if isinstance(stamp, tuple)]
        if browsers:
            push_service.record_outcome(conn, tuple(browsers), ())
        if phones:
            device_service.stamp_sent(conn, phones)


def _not_reached(row, targets: tuple) -> tuple:
    """The targets an earlier try of row did not reach (browsers by endpoint, phones by token)."""
    reached = set(getattr(row, "reached", None) or ())  # a row from elsewhere than the ledger has reached nothing
    if not reached:
        return targets
    return tuple(t for t in targets if (t.token if isinstance(t, DeviceTarget) else t.endpoint) not in reached)


CHANNEL = PushChannel()
