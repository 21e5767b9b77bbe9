"""Topics (issue 32): what members follow, and the fanouts of a notification to a topic's followers."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

_tz = sa.DateTime(timezone=True)

FANOUT_STATUSES = ("running", "done", "failed")


class Topic(db.Model):
    """Something members follow, named by the product's key (project:42)."""

    __tablename__ = "topics"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    key: Mapped[str] = mapped_column(sa.Text, unique=True)
    name: Mapped[str] = mapped_column(sa.Text)
    description: Mapped[str] = mapped_column(sa.Text, server_default="")
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class TopicSubscription(db.Model):
    """A member follows a topic: keyed user_id first (distribution key), walked by (topic_id, user_id)."""

    __tablename__ = "topic_subscriptions"
    __table_args__ = (sa.Index("topic_subscriptions_topic_idx", "topic_id", "user_id", unique=True),)

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    topic_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("topics.id", ondelete="CASCADE"), primary_key=True
    )
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class TopicFanout(db.Model):
    """One notification to a topic's followers, written by a job in keyset batches (cursor and progress)."""

    __tablename__ = "topic_fanouts"
    __table_args__ = (
        sa.CheckConstraint(f"status IN {FANOUT_STATUSES!r}", name="topic_fanouts_status"),
        sa.Index("topic_fanouts_list_idx", sa.text("created_at DESC"), sa.text("id DESC")),
        sa.Index("topic_fanouts_running_idx", "id", postgresql_where=sa.text("status = 'running'")),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    topic_id: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("topics.id", ondelete="SET NULL"))
    topic_key: Mapped[str] = mapped_column(sa.Text)
    api_key_id: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("api_keys.id", ondelete="SET NULL"))
    type: Mapped[str] = mapped_column(sa.Text, sa.ForeignKey("notification_types.type"))
    title: Mapped[str] = mapped_column(sa.Text)
    body: Mapped[str] = mapped_column(sa.Text)
    link_path: Mapped[str | None] = mapped_column(sa.Text)
    data: Mapped[dict] = mapped_column(JSONB, server_default=sa.text("'{}'::jsonb"))
    dedupe_key: Mapped[str] = mapped_column(sa.Text)
    group_key: Mapped[str | None] = mapped_column(sa.Text)
    cancellation_key: Mapped[str | None] = mapped_column(sa.Text)
    route: Mapped[list[str] | None] = mapped_column(sa.ARRAY(sa.Text))
    channel_mode: Mapped[str | None] = mapped_column(sa.Text)
    excluded_user_ids: Mapped[list[int]] = mapped_column(sa.ARRAY(sa.BigInteger), server_default="{}")
    tenant_id: Mapped[int | None] = mapped_column(sa.BigInteger)  # its followers who are the tenant's members only
    status: Mapped[str] = mapped_column(sa.Text, server_default="running")
    total: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    done: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    created: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    cursor_user_id: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")  # fanout keyset position
    error: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    finished_at: Mapped[datetime | None] = mapped_column(_tz)
