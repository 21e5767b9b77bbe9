"""E-mail digests: a user's per-type frequency deviations and one run per (user, kind, period)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

_tz = sa.DateTime(timezone=True)

FREQUENCIES = ("immediate", "hourly", "daily")
DIGEST_KINDS = ("hourly", "daily")
DIGEST_STATUSES = ("pending", "sending", "sent", "empty", "skipped", "failed")


class DigestPreference(db.Model):
    """A user's e-mail frequency for one type, stored only when it differs from the type's default."""

    __tablename__ = "digest_preferences"
    __table_args__ = (sa.CheckConstraint(f"frequency IN {FREQUENCIES!r}", name="digest_preferences_frequency"),)

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    type: Mapped[str] = mapped_column(
        sa.Text, sa.ForeignKey("notification_types.type", ondelete="CASCADE"), primary_key=True
    )
    frequency: Mapped[str] = mapped_column(sa.Text)


class DigestRun(db.Model):
    """One digest e-mail of one user for one period: the unique key makes it exactly once."""

    __tablename__ = "digest_runs"
    __table_args__ = (
        sa.UniqueConstraint("user_id", "kind", "period_start", name="digest_runs_once"),
        sa.CheckConstraint(f"kind IN {DIGEST_KINDS!r}", name="digest_runs_kind"),
        sa.CheckConstraint(f"status IN {DIGEST_STATUSES!r}", name="digest_runs_status"),
        sa.Index(
            "digest_runs_open_idx",
            "next_attempt_at",
            "id",
            postgresql_where=sa.text("status IN ('pending', 'sending')"),
        ),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.Text)
    period_start: Mapped[datetime] = mapped_column(_tz)
    status: Mapped[str] = mapped_column(sa.Text, server_default="pending")
    attempts: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    locked_until: Mapped[datetime | None] = mapped_column(_tz)
    next_attempt_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    # Drawn from the ledger's id sequence: the e-mail's Message-ID, the same on a resend.
    ledger_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    item_count: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    error: Mapped[str | None] = mapped_column(sa.Text)
    # Since when the run waits without a try (a paused channel, an open breaker): DELIVERY_MAX_AGE counts from it.
    held_since: Mapped[datetime | None] = mapped_column(_tz)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    sent_at: Mapped[datetime | None] = mapped_column(_tz)


class DigestTemplate(db.Model):
    """The operator's wording of the digest e-mail for one locale (empty parts use the built-in wording)."""

    __tablename__ = "digest_templates"

    locale: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    subject: Mapped[str] = mapped_column(sa.Text, server_default="")
    body_text: Mapped[str] = mapped_column(sa.Text, server_default="")
    body_html: Mapped[str] = mapped_column(sa.Text, server_default="")
    updated_by: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    updated_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
