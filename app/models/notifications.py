"""The seed article's tables: types, personal notifications, announcements, preferences, deliveries."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

CHANNELS = ("in_app", "email", "push")
DELIVERY_CHANNELS = ("email", "push")
DELIVERY_STATUSES = ("pending", "sending", "sent", "skipped", "failed")
PRIORITIES = ("high", "default", "low")

_tz = sa.DateTime(timezone=True)


class NotificationType(db.Model):
    """A kind of notification with its per-channel defaults; mandatory types cannot be turned off."""

    __tablename__ = "notification_types"
    __table_args__ = (sa.CheckConstraint(f"priority IN {PRIORITIES!r}", name="notification_types_priority"),)

    type: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    label: Mapped[str] = mapped_column(sa.Text)
    default_in_app: Mapped[bool] = mapped_column(server_default=sa.true())
    default_email: Mapped[bool] = mapped_column(server_default=sa.false())
    default_push: Mapped[bool] = mapped_column(server_default=sa.false())
    mandatory: Mapped[bool] = mapped_column(server_default=sa.false())
    priority: Mapped[str] = mapped_column(sa.Text, server_default="default")
    description: Mapped[str] = mapped_column(sa.Text, server_default="")


class Notification(db.Model):
    """One personal notification for one recipient; read_at NULL means unread."""

    __tablename__ = "notifications"
    __table_args__ = (
        sa.UniqueConstraint("user_id", "dedupe_key", name="notifications_dedupe"),
        sa.Index("notifications_list_idx", "user_id", sa.text("created_at DESC"), sa.text("id DESC")),
        sa.Index("notifications_unread_idx", "user_id", postgresql_where=sa.text("read_at IS NULL")),
        sa.Index("notifications_campaign_idx", "campaign_id", postgresql_where=sa.text("campaign_id IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(sa.Text, sa.ForeignKey("notification_types.type"))
    title: Mapped[str] = mapped_column(sa.Text)
    body: Mapped[str] = mapped_column(sa.Text)
    link_path: Mapped[str | None] = mapped_column(sa.Text)
    dedupe_key: Mapped[str] = mapped_column(sa.Text)
    read_at: Mapped[datetime | None] = mapped_column(_tz)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    data: Mapped[dict] = mapped_column(JSONB, server_default=sa.text("'{}'::jsonb"))
    campaign_id: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("campaigns.id", ondelete="SET NULL"))
    # The API key that created the row: only that key may read it back (GET /v1/notifications/<id>).
    api_key_id: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("api_keys.id", ondelete="SET NULL"))
    archived_at: Mapped[datetime | None] = mapped_column(_tz)
    # False when the user turned in-app off for the type: the row anchors e-mail/push deliveries but is
    # born read (so it never enters the unread index) and is hidden from every inbox list.
    in_app: Mapped[bool] = mapped_column(server_default=sa.true())


class Announcement(db.Model):
    """A broadcast to everyone: one row, never copied per user."""

    __tablename__ = "announcements"
    __table_args__ = (
        sa.Index("announcements_published_idx", sa.text("published_at DESC")),
        sa.CheckConstraint("body_format IN ('plain', 'markdown')", name="announcements_body_format"),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    title: Mapped[str] = mapped_column(sa.Text)
    body: Mapped[str] = mapped_column(sa.Text)
    published_at: Mapped[datetime] = mapped_column(_tz)
    expires_at: Mapped[datetime | None] = mapped_column(_tz)
    body_format: Mapped[str] = mapped_column(sa.Text, server_default="plain")  # plain | markdown
    created_by: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class AnnouncementRead(db.Model):
    """The fact that one user read one announcement (only readers get a row)."""

    __tablename__ = "announcement_reads"

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    announcement_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("announcements.id", ondelete="CASCADE"), primary_key=True
    )
    read_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class NotificationPreference(db.Model):
    """A user's deviation from a type's default for one channel (defaults are not stored)."""

    __tablename__ = "notification_preferences"
    __table_args__ = (sa.CheckConstraint(f"channel IN {CHANNELS!r}", name="notification_preferences_channel"),)

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    type: Mapped[str] = mapped_column(sa.Text, sa.ForeignKey("notification_types.type"), primary_key=True)
    channel: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    enabled: Mapped[bool] = mapped_column()


class NotificationDelivery(db.Model):
    """The ledger row for sending one notification over one channel (at most one per pair)."""

    __tablename__ = "notification_deliveries"
    __table_args__ = (
        sa.UniqueConstraint("notification_id", "channel", name="notification_deliveries_once"),
        sa.CheckConstraint(f"channel IN {DELIVERY_CHANNELS!r}", name="notification_deliveries_channel"),
        sa.CheckConstraint(f"status IN {DELIVERY_STATUSES!r}", name="notification_deliveries_status"),
        sa.Index("notification_deliveries_due_idx", "next_attempt_at", postgresql_where=sa.text("status = 'pending'")),
        sa.Index("notification_deliveries_lease_idx", "locked_until", postgresql_where=sa.text("status = 'sending'")),
        sa.Index("notification_deliveries_created_idx", "created_at"),  # dashboard windows (0006)
        sa.Index("notification_deliveries_failed_idx", "id", postgresql_where=sa.text("status = 'failed'")),  # the DLQ
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    notification_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("notifications.id", ondelete="CASCADE"))
    channel: Mapped[str] = mapped_column(sa.Text)
    status: Mapped[str] = mapped_column(sa.Text, server_default="pending")
    sent_at: Mapped[datetime | None] = mapped_column(_tz)
    attempts: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    next_attempt_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    locked_until: Mapped[datetime | None] = mapped_column(_tz)
    provider: Mapped[str | None] = mapped_column(sa.Text)
    provider_message_id: Mapped[str | None] = mapped_column(sa.Text)
    last_error: Mapped[str | None] = mapped_column(sa.Text)
    error_kind: Mapped[str | None] = mapped_column(sa.Text)
    skip_reason: Mapped[str | None] = mapped_column(sa.Text)
    rendered_subject: Mapped[str | None] = mapped_column(sa.Text)
    rendered_body: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
