"""Webhooks out (issue 18): endpoints, the outbox of events to them, and every try (migration 0015)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

_tz = sa.DateTime(timezone=True)
WEBHOOK_STATUSES = ("pending", "sending", "sent", "failed")
WEBHOOK_OUTCOMES = ("sent", "transient", "permanent", "held")


class WebhookEndpoint(db.Model):
    """An operator's endpoint: URL, event types, switch, and its signing secret sealed (app/webhooks/signing.py)."""

    __tablename__ = "webhook_endpoints"
    __table_args__ = (sa.CheckConstraint("length(url) <= 2000", name="webhook_endpoints_url_length"),)

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    url: Mapped[str] = mapped_column(sa.Text)
    description: Mapped[str] = mapped_column(sa.Text, server_default="")
    event_types: Mapped[list[str]] = mapped_column(ARRAY(sa.Text))
    enabled: Mapped[bool] = mapped_column(sa.Boolean, server_default=sa.true())
    secret_sealed: Mapped[str] = mapped_column(sa.Text)
    secret_hint: Mapped[str] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class WebhookDelivery(db.Model):
    """One event to one endpoint (the outbox row): its payload fixed at event time, its webhook-id for every try."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        sa.UniqueConstraint("endpoint_id", "webhook_id", name="webhook_deliveries_once"),
        sa.CheckConstraint(f"status IN {WEBHOOK_STATUSES!r}", name="webhook_deliveries_status"),
        sa.Index(
            "webhook_deliveries_due_idx",
            "next_attempt_at",
            postgresql_where=sa.text("status IN ('pending', 'sending')"),
        ),  # fmt: skip
        sa.Index("webhook_deliveries_endpoint_idx", "endpoint_id", sa.text("id DESC")),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    endpoint_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"))
    webhook_id: Mapped[str] = mapped_column(sa.Text)
    event_type: Mapped[str] = mapped_column(sa.Text)
    payload: Mapped[str] = mapped_column(sa.Text)
    occurred_at: Mapped[datetime] = mapped_column(_tz)
    status: Mapped[str] = mapped_column(sa.Text, server_default="pending")
    attempts: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    next_attempt_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    locked_until: Mapped[datetime | None] = mapped_column(_tz)
    held_since: Mapped[datetime | None] = mapped_column(_tz)
    last_error: Mapped[str | None] = mapped_column(sa.Text)
    error_kind: Mapped[str | None] = mapped_column(sa.Text)
    response_code: Mapped[int | None] = mapped_column(sa.Integer)
    sent_at: Mapped[datetime | None] = mapped_column(_tz)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class WebhookAttempt(db.Model):
    """One try of a webhook delivery: outcome, latency, the endpoint's response code."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (
        sa.CheckConstraint(f"outcome IN {WEBHOOK_OUTCOMES!r}", name="webhook_attempts_outcome"),
        sa.Index("webhook_attempts_endpoint_idx", "endpoint_id", sa.text("id DESC")),
        sa.Index("webhook_attempts_delivery_idx", "delivery_id"),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    delivery_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("webhook_deliveries.id", ondelete="CASCADE"))
    endpoint_id: Mapped[int] = mapped_column(sa.BigInteger)
    started_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    duration_ms: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    outcome: Mapped[str] = mapped_column(sa.Text)
    response_code: Mapped[int | None] = mapped_column(sa.Integer)
    error: Mapped[str | None] = mapped_column(sa.Text)
