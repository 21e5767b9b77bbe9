"""Tables for delivery: attempts, provider events, frequency-cap slots, templates, suppressions, push subscriptions."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

_tz = sa.DateTime(timezone=True)

ATTEMPT_OUTCOMES = ("sent", "transient", "permanent", "deferred", "expired")
# E-mail: delivered … clicked; SMS (issue 29): queued … canceled, from Twilio's and Vonage's status callbacks.
PROVIDER_EVENTS = ("delivered", "bounced", "soft_bounced", "complained", "opened", "clicked",
                   "queued", "sent", "read", "undelivered", "failed", "canceled")  # fmt: skip
# In rising strength: a later event never weakens it. An SMS rises sent < delivered < read; canceled, undelivered
# and failed are final (a late "sent" or "delivered" changes nothing); e-mail's delivered < bounced < complained.
PROVIDER_STATUSES = ("sent", "delivered", "read", "canceled", "undelivered", "failed", "bounced", "complained")
SUPPRESSION_REASONS = ("bounce", "complaint", "unsubscribe", "manual")


class DeliveryAttempt(db.Model):
    """One try at sending one delivery: which provider, how long, what happened."""

    __tablename__ = "delivery_attempts"
    __table_args__ = (
        sa.CheckConstraint(f"outcome IN {ATTEMPT_OUTCOMES!r}", name="delivery_attempts_outcome"),
        sa.Index("delivery_attempts_delivery_idx", "delivery_id", "started_at"),
        sa.Index("delivery_attempts_started_idx", "started_at"),
        sa.ForeignKeyConstraint(
            ["delivery_id", "user_id"],
            ["notification_deliveries.id", "notification_deliveries.user_id"],
            ondelete="CASCADE",
        ),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)  # the delivery's, for its shard (0016)
    delivery_id: Mapped[int] = mapped_column(sa.BigInteger)
    provider: Mapped[str] = mapped_column(sa.Text)
    started_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    duration_ms: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    outcome: Mapped[str] = mapped_column(sa.Text)
    error: Mapped[str | None] = mapped_column(sa.Text)


class ProviderEvent(db.Model):
    """What an e-mail provider's webhook reported about a sent message (app/hooks); delivery_id NULL: unknown id."""

    __tablename__ = "provider_events"
    __table_args__ = (
        # user_id too, for the shard; a resent event matches the same delivery, so it is still stored once.
        sa.UniqueConstraint("provider", "provider_event_id", "user_id", name="provider_events_once"),
        sa.ForeignKeyConstraint(
            ["delivery_id", "user_id"],
            ["notification_deliveries.id", "notification_deliveries.user_id"],
            ondelete="CASCADE",
        ),
        sa.CheckConstraint(f"event IN {PROVIDER_EVENTS!r}", name="provider_events_event"),
        sa.Index(
            "provider_events_delivery_idx",
            "delivery_id",
            "occurred_at",
            postgresql_where=sa.text("delivery_id IS NOT NULL"),
        ),
        # Events no delivery matched, pruned by age (app/retention, 0014).
        sa.Index("provider_events_unmatched_idx", "received_at", "id", postgresql_where=sa.text("delivery_id IS NULL")),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    # The matched delivery's user; 0 (no user has it) while no delivery matched (0016, docs/scaling.md).
    user_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    delivery_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    provider: Mapped[str] = mapped_column(sa.Text)
    provider_event_id: Mapped[str] = mapped_column(sa.Text)
    event: Mapped[str] = mapped_column(sa.Text)
    message_id: Mapped[str] = mapped_column(sa.Text, server_default="")
    detail: Mapped[dict] = mapped_column(JSONB, server_default=sa.text("'{}'::jsonb"))
    occurred_at: Mapped[datetime] = mapped_column(_tz)
    received_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class DeliveryCapUse(db.Model):
    """A frequency-cap slot: one admitted e-mail/push of a capped type, counted per (user, type, channel)."""

    __tablename__ = "delivery_cap_uses"
    __table_args__ = (
        sa.Index("delivery_cap_uses_window_idx", "user_id", "type", "channel", "used_at"),
        sa.ForeignKeyConstraint(
            ["delivery_id", "user_id"],
            ["notification_deliveries.id", "notification_deliveries.user_id"],
            ondelete="CASCADE",
        ),
    )

    delivery_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    type: Mapped[str] = mapped_column(sa.Text)
    channel: Mapped[str] = mapped_column(sa.Text)
    used_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class MessageTemplate(db.Model):
    """Operator-edited wording for one (type, channel, locale)."""

    __tablename__ = "message_templates"
    __table_args__ = (sa.UniqueConstraint("type", "channel", "locale", name="message_templates_once"),)

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    type: Mapped[str] = mapped_column(sa.Text, sa.ForeignKey("notification_types.type", ondelete="CASCADE"))
    channel: Mapped[str] = mapped_column(sa.Text)
    locale: Mapped[str] = mapped_column(sa.Text)
    subject: Mapped[str] = mapped_column(sa.Text, server_default="")
    body_text: Mapped[str] = mapped_column(sa.Text, server_default="")
    body_html: Mapped[str] = mapped_column(sa.Text, server_default="")
    # Push only: what phones show instead of subject / body_text, and iOS's subtitle ('' falls back).
    mobile_title: Mapped[str] = mapped_column(sa.Text, server_default="")
    mobile_subtitle: Mapped[str] = mapped_column(sa.Text, server_default="")
    mobile_body: Mapped[str] = mapped_column(sa.Text, server_default="")
    # chat (0029): optional rich JSON per service, its strings templates (app/delivery/rich_json.py)
    slack_blocks: Mapped[str] = mapped_column(sa.Text, server_default="")
    teams_card: Mapped[str] = mapped_column(sa.Text, server_default="")
    line_flex: Mapped[str] = mapped_column(sa.Text, server_default="")
    updated_by: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    updated_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class EmailSuppression(db.Model):
    """An address that must not receive e-mail, and why."""

    __tablename__ = "email_suppressions"
    __table_args__ = (sa.CheckConstraint(f"reason IN {SUPPRESSION_REASONS!r}", name="email_suppressions_reason"),)

    address: Mapped[str] = mapped_column(sa.Text, primary_key=True)  # stored lower-cased
    reason: Mapped[str] = mapped_column(sa.Text)
    detail: Mapped[str] = mapped_column(sa.Text, server_default="")
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class SmsSuppression(db.Model):
    """A phone number that replied STOP (or its like): no SMS goes to it, whoever has it, until it replies START."""

    __tablename__ = "sms_suppressions"
    __table_args__ = (sa.CheckConstraint(r"phone ~ '^\+[1-9][0-9]{6,14}$'", name="sms_suppressions_phone_e164"),)

    phone: Mapped[str] = mapped_column(sa.Text, primary_key=True)  # E.164
    provider: Mapped[str] = mapped_column(sa.Text)  # whose inbound hook heard it (twilio, vonage)
    detail: Mapped[str] = mapped_column(sa.Text, server_default="")  # the keyword and the provider's message id
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class PushSubscription(db.Model):
    """A browser's Web Push subscription for one user."""

    __tablename__ = "push_subscriptions"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), index=True)
    endpoint: Mapped[str] = mapped_column(sa.Text, unique=True)
    p256dh: Mapped[str] = mapped_column(sa.Text)
    auth: Mapped[str] = mapped_column(sa.Text)
    user_agent: Mapped[str] = mapped_column(sa.Text, server_default="")
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    last_success_at: Mapped[datetime | None] = mapped_column(_tz)
    invalidated_at: Mapped[datetime | None] = mapped_column(_tz)
    disabled_at: Mapped[datetime | None] = mapped_column(_tz)  # the member turned this browser's pushes off


class ChannelSwitch(db.Model):
    """A kill switch an operator threw: a paused channel (provider '') or one paused provider of a channel.

    While a row exists its deliveries wait without a try (app/delivery/switches.py); the audit log keeps
    every pause and resume.
    """

    __tablename__ = "channel_switches"

    channel: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    provider: Mapped[str] = mapped_column(sa.Text, primary_key=True, server_default="")
    reason: Mapped[str] = mapped_column(sa.Text)
    paused_by: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    paused_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
