"""Phone verification: the code in flight for a member's new number (the preferences page, issue 29)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db


class PhoneVerification(db.Model):
    """One member's pending verification: the number, the code's seed (never the code), tries left, expiry.

    Keyed by user_id like every per-user table (0016): one code in flight per member; a new one replaces it.
    delivery_id is the SMS ledger row that carries the code: the SMS channel sends that row to this number only.
    """

    __tablename__ = "phone_verifications"
    __table_args__ = (
        sa.CheckConstraint(r"phone ~ '^\+[1-9][0-9]{6,14}$'", name="phone_verifications_e164"),
        sa.CheckConstraint("tries_left >= 0", name="phone_verifications_tries"),
    )

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    phone: Mapped[str] = mapped_column(sa.Text)
    seed: Mapped[bytes] = mapped_column(sa.LargeBinary)
    tries_left: Mapped[int] = mapped_column(sa.SmallInteger)
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))
    delivery_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), server_default=sa.func.now())
