"""The raw events an aggregated notification collapsed (one row per accepted API event)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

_tz = sa.DateTime(timezone=True)


class NotificationEvent(db.Model):
    """One event of an aggregated notification: its own dedupe key (unique per user), actor and data."""

    __tablename__ = "notification_events"
    __table_args__ = (
        sa.UniqueConstraint("user_id", "dedupe_key", name="notification_events_dedupe"),
        sa.Index("notification_events_notification_idx", "notification_id", "actor_id"),
        sa.ForeignKeyConstraint(
            ["notification_id", "user_id"], ["notifications.id", "notifications.user_id"], ondelete="CASCADE"
        ),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    notification_id: Mapped[int] = mapped_column(sa.BigInteger)
    dedupe_key: Mapped[str] = mapped_column(sa.Text)
    actor_id: Mapped[str | None] = mapped_column(sa.Text)
    actor_name: Mapped[str | None] = mapped_column(sa.Text)
    data: Mapped[dict] = mapped_column(JSONB, server_default=sa.text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
