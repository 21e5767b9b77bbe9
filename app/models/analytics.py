"""Tables for delivery analytics (issue 33): the change queue the ledger's triggers fill, and the rollups.

The triggers and their functions are in migrations/versions/0041_delivery_rollups.py; app/analytics reads
and folds these tables.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

_tz = sa.DateTime(timezone=True)
ROLLUP_GRAINS = ("hour", "day")


class DeliveryRollupChange(db.Model):
    """One change of a ledger row's contribution (old side taken away, new side added), not yet in the rollups."""

    __tablename__ = "delivery_rollup_changes"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)  # the ledger row's, for its shard
    delivery_id: Mapped[int] = mapped_column(sa.BigInteger)
    notification_id: Mapped[int] = mapped_column(sa.BigInteger)
    born: Mapped[datetime] = mapped_column(_tz)  # the ledger row's created_at: its hour and day
    channel: Mapped[str] = mapped_column(sa.Text)
    o_provider: Mapped[str] = mapped_column(sa.Text, server_default="")
    o_skip: Mapped[str] = mapped_column(sa.Text, server_default="")
    o_facts: Mapped[int] = mapped_column(sa.Integer, server_default="0")  # 0: no old side (a new row, an open)
    o_sent_ms: Mapped[int | None] = mapped_column(sa.Integer)
    o_deliv_ms: Mapped[int | None] = mapped_column(sa.Integer)
    n_provider: Mapped[str] = mapped_column(sa.Text, server_default="")
    n_skip: Mapped[str] = mapped_column(sa.Text, server_default="")
    n_facts: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    n_sent_ms: Mapped[int | None] = mapped_column(sa.Integer)
    n_deliv_ms: Mapped[int | None] = mapped_column(sa.Integer)
    recorded_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class DeliveryRollup(db.Model):
    """The figures of the ledger rows created in one hour or day, per type, channel, provider, tenant, skip reason."""

    __tablename__ = "delivery_rollups"
    __table_args__ = (sa.CheckConstraint("grain IN ('hour', 'day')", name="delivery_rollups_grain"),)

    grain: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    bucket: Mapped[datetime] = mapped_column(_tz, primary_key=True)
    type: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    channel: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    provider: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    skip_reason: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    accepted: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")
    sent: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")
    delivered: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")
    bounced: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")
    complained: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")
    opened: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")
    clicked: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")
    failed: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")
    skipped: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")
    sent_hist: Mapped[list[int]] = mapped_column(ARRAY(sa.Integer), server_default=sa.text("array_fill(0, ARRAY[40])"))
    delivered_hist: Mapped[list[int]] = mapped_column(
        ARRAY(sa.Integer), server_default=sa.text("array_fill(0, ARRAY[40])")
    )
