"""Tables for the product-facing API: keys, idempotency records, one-time sign-in links."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

_tz = sa.DateTime(timezone=True)


class ApiKey(db.Model):
    """A bearer key for a product service; only its SHA-256 hash and a short prefix are stored."""

    __tablename__ = "api_keys"
    __table_args__ = (
        sa.CheckConstraint("rate_per_second > 0 AND rate_per_second <= 1000000", name="api_keys_rate"),
        sa.CheckConstraint("rate_burst BETWEEN 1 AND 1000000", name="api_keys_burst"),
        sa.CheckConstraint("daily_quota BETWEEN 0 AND 1000000000000", name="api_keys_daily"),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    name: Mapped[str] = mapped_column(sa.Text)
    prefix: Mapped[str] = mapped_column(sa.Text, unique=True)
    key_hash: Mapped[str] = mapped_column(sa.Text, unique=True)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    last_used_at: Mapped[datetime | None] = mapped_column(_tz)
    revoked_at: Mapped[datetime | None] = mapped_column(_tz)
    created_by: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    # What the key may do (app/api_keys/scopes.py); new keys get notifications:write only.
    scopes: Mapped[list[str]] = mapped_column(ARRAY(sa.Text), server_default=sa.text("'{notifications:write}'::text[]"))
    # Its quotas (app/quotas): requests per second with a burst, notifications per UTC day; NULL is no limit.
    rate_per_second: Mapped[float | None] = mapped_column(sa.Float)
    rate_burst: Mapped[int | None] = mapped_column(sa.Integer)
    daily_quota: Mapped[int | None] = mapped_column(sa.BigInteger)


class IdempotencyKey(db.Model):
    """The first response to (api key, Idempotency-Key), replayed for 24 h."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (
        sa.UniqueConstraint("api_key_id", "key", name="idempotency_keys_once"),
        sa.Index("idempotency_keys_created_idx", "created_at"),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    api_key_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("api_keys.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(sa.Text)
    method: Mapped[str] = mapped_column(sa.Text)
    path: Mapped[str] = mapped_column(sa.Text)
    request_hash: Mapped[str] = mapped_column(sa.Text)
    response_status: Mapped[int | None] = mapped_column(sa.Integer)
    response_body: Mapped[dict | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    completed_at: Mapped[datetime | None] = mapped_column(_tz)


class LoginLink(db.Model):
    """A single-use, short-lived sign-in link the product hands to its signed-in user."""

    __tablename__ = "login_links"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(sa.Text, unique=True)
    expires_at: Mapped[datetime] = mapped_column(_tz)
    used_at: Mapped[datetime | None] = mapped_column(_tz)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
