"""Tables for the operator console: audit log, template history, campaigns, bulk operations."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

_tz = sa.DateTime(timezone=True)

CAMPAIGN_STATUSES = ("draft", "scheduled", "running", "done", "cancelled", "failed")
AUDIENCE_KINDS = ("all", "locale", "list")
OPERATION_KINDS = ("replay", "discard")
OPERATION_STATUSES = ("queued", "running", "done", "failed")


class AuditEntry(db.Model):
    """Who did what to which object, with the state before and after."""

    __tablename__ = "audit_log"
    __table_args__ = (
        sa.Index("audit_log_list_idx", sa.text("created_at DESC"), sa.text("id DESC")),
        sa.Index("audit_log_actor_idx", "actor_id", sa.text("created_at DESC")),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    actor_id: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    actor_label: Mapped[str] = mapped_column(sa.Text)  # e-mail, or "cli" for commands
    action: Mapped[str] = mapped_column(sa.Text)
    target_type: Mapped[str] = mapped_column(sa.Text)
    target_id: Mapped[str] = mapped_column(sa.Text, server_default="")
    before: Mapped[dict | None] = mapped_column(JSONB)
    after: Mapped[dict | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class TemplateVersion(db.Model):
    """A previous version of a message template, kept on every save so it can be restored."""

    __tablename__ = "message_template_versions"
    __table_args__ = (sa.Index("message_template_versions_template_idx", "template_id", sa.text("id DESC")),)

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    template_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("message_templates.id", ondelete="CASCADE"))
    subject: Mapped[str] = mapped_column(sa.Text)
    body_text: Mapped[str] = mapped_column(sa.Text)
    body_html: Mapped[str] = mapped_column(sa.Text)
    mobile_title: Mapped[str] = mapped_column(sa.Text, server_default="")
    mobile_subtitle: Mapped[str] = mapped_column(sa.Text, server_default="")
    mobile_body: Mapped[str] = mapped_column(sa.Text, server_default="")
    # chat (0029): optional rich JSON per service, its strings templates (app/delivery/rich_json.py)
    slack_blocks: Mapped[str] = mapped_column(sa.Text, server_default="")
    teams_card: Mapped[str] = mapped_column(sa.Text, server_default="")
    line_flex: Mapped[str] = mapped_column(sa.Text, server_default="")
    updated_by: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class Campaign(db.Model):
    """A send to many users, fanned out by a background job in keyset batches."""

    __tablename__ = "campaigns"
    __table_args__ = (
        sa.CheckConstraint(f"status IN {CAMPAIGN_STATUSES!r}", name="campaigns_status"),
        sa.CheckConstraint(f"audience_kind IN {AUDIENCE_KINDS!r}", name="campaigns_audience_kind"),
        sa.Index("campaigns_list_idx", sa.text("created_at DESC"), sa.text("id DESC")),
        sa.Index("campaigns_due_idx", "scheduled_at", postgresql_where=sa.text("status = 'scheduled'")),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    name: Mapped[str] = mapped_column(sa.Text)
    type: Mapped[str] = mapped_column(sa.Text, sa.ForeignKey("notification_types.type"))
    title: Mapped[str] = mapped_column(sa.Text)
    body: Mapped[str] = mapped_column(sa.Text)
    link_path: Mapped[str | None] = mapped_column(sa.Text)
    data: Mapped[dict] = mapped_column(JSONB, server_default=sa.text("'{}'::jsonb"))
    audience_kind: Mapped[str] = mapped_column(sa.Text, server_default="all")
    audience_locale: Mapped[str | None] = mapped_column(sa.Text)
    audience_report: Mapped[dict | None] = mapped_column(JSONB)  # an uploaded list's counts, unknown ids, bad lines
    status: Mapped[str] = mapped_column(sa.Text, server_default="draft")
    scheduled_at: Mapped[datetime | None] = mapped_column(_tz)
    total: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    done: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    cursor_user_id: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")  # fanout keyset position
    error: Mapped[str | None] = mapped_column(sa.Text)
    created_by: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    started_at: Mapped[datetime | None] = mapped_column(_tz)
    finished_at: Mapped[datetime | None] = mapped_column(_tz)


class CampaignRecipient(db.Model):
    """A user named by a campaign's uploaded list (audience_kind = 'list')."""

    __tablename__ = "campaign_recipients"

    campaign_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)


class BulkOperation(db.Model):
    """A long operator action (DLQ replay/discard of many rows) run by a job, with progress."""

    __tablename__ = "bulk_operations"
    __table_args__ = (
        sa.CheckConstraint(f"kind IN {OPERATION_KINDS!r}", name="bulk_operations_kind"),
        sa.CheckConstraint(f"status IN {OPERATION_STATUSES!r}", name="bulk_operations_status"),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.Text)
    filters: Mapped[dict] = mapped_column(JSONB, server_default=sa.text("'{}'::jsonb"))
    reason: Mapped[str] = mapped_column(sa.Text, server_default="")
    status: Mapped[str] = mapped_column(sa.Text, server_default="queued")
    total: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    done: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    cursor_id: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")
    created_by: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    finished_at: Mapped[datetime | None] = mapped_column(_tz)
