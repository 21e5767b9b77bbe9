"""Tenants (issue 32): the product's customer organisations, their members and their default preferences."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

_tz = sa.DateTime(timezone=True)


class Tenant(db.Model):
    """A customer organisation of the product: its key (the API's name for it), name and e-mail branding."""

    __tablename__ = "tenants"
    __table_args__ = (
        sa.CheckConstraint("rate_per_second > 0 AND rate_per_second <= 1000000", name="tenants_rate"),
        sa.CheckConstraint("rate_burst BETWEEN 1 AND 1000000", name="tenants_burst"),
        sa.CheckConstraint("daily_quota BETWEEN 0 AND 1000000000000", name="tenants_daily"),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    key: Mapped[str] = mapped_column(sa.Text, unique=True)
    name: Mapped[str] = mapped_column(sa.Text)
    logo_url: Mapped[str | None] = mapped_column(sa.Text)  # https only (app/tenants/branding.py)
    primary_color: Mapped[str | None] = mapped_column(sa.Text)  # #rrggbb
    email_sender_name: Mapped[str | None] = mapped_column(sa.Text)
    reply_to: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    # Its quotas (app/quotas), as an API key's: requests per second with a burst, notifications a day; NULL: none.
    rate_per_second: Mapped[float | None] = mapped_column(sa.Float)
    rate_burst: Mapped[int | None] = mapped_column(sa.Integer)
    daily_quota: Mapped[int | None] = mapped_column(sa.BigInteger)


class TenantMember(db.Model):
    """A member belongs to a tenant; user_id first, the distribution key (issue 20, migration 0016)."""

    __tablename__ = "tenant_members"
    __table_args__ = (sa.Index("tenant_members_tenant_idx", "tenant_id", "user_id"),)

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class TenantPreference(db.Model):
    """A tenant's default for one type and channel, between the type's default and the member's own choice."""

    __tablename__ = "tenant_preferences"

    tenant_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    type: Mapped[str] = mapped_column(
        sa.Text, sa.ForeignKey("notification_types.type", ondelete="CASCADE", onupdate="CASCADE"), primary_key=True
    )
    channel: Mapped[str] = mapped_column(sa.Text, primary_key=True)  # checked against the registry (0037)
    enabled: Mapped[bool] = mapped_column()
