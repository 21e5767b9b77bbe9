"""The device registry: each member's phones, with their push token and the language and zone they show alerts in."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db
from app.limits import APP_ID_MAX, APP_VERSION_MAX, DEVICE_TOKEN_MAX, LOCALE_MAX

_tz = sa.DateTime(timezone=True)

DEVICE_PLATFORMS = ("ios", "android")


class Device(db.Model):
    """One phone of one member: APNs (ios) or FCM (android) token, app, language, zone, and its state.

    Keyed (id, user_id) like every per-user table (0016, docs/scaling.md). A token is one phone's: when
    another member registers it, it moves (app/devices/service.py), so it is unique per user here and
    kept unique across users by the registration's lock.
    """

    __tablename__ = "devices"
    __table_args__ = (
        sa.CheckConstraint(f"platform IN {DEVICE_PLATFORMS!r}", name="devices_platform"),
        sa.CheckConstraint(f"char_length(token) BETWEEN 1 AND {DEVICE_TOKEN_MAX}", name="devices_token_length"),
        sa.UniqueConstraint("user_id", "platform", "token", name="devices_user_token"),
        sa.Index("devices_token_idx", "token"),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    platform: Mapped[str] = mapped_column(sa.Text)
    token: Mapped[str] = mapped_column(sa.Text)
    app_id: Mapped[str | None] = mapped_column(sa.String(APP_ID_MAX))
    app_version: Mapped[str | None] = mapped_column(sa.String(APP_VERSION_MAX))
    locale: Mapped[str | None] = mapped_column(sa.String(LOCALE_MAX))
    timezone: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    # The latest registration (the app registers at each start): an APNs 410 older than it is ignored.
    last_seen_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    last_sent_at: Mapped[datetime | None] = mapped_column(_tz)
    disabled_at: Mapped[datetime | None] = mapped_column(_tz)  # the member turned its pushes off
    invalidated_at: Mapped[datetime | None] = mapped_column(_tz)  # the push service said the token is gone
    invalid_reason: Mapped[str | None] = mapped_column(sa.Text)
