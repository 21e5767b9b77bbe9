"""Workflows (issue 31): each type's delivery plan as steps, drafted, published as immutable versions."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

_tz = sa.DateTime(timezone=True)


class WorkflowVersion(db.Model):
    """One published version of a type's workflow: never changed once written (a rollback publishes a new one)."""

    __tablename__ = "workflow_versions"
    __table_args__ = (sa.UniqueConstraint("type", "version", name="workflow_versions_type_version"),)

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    type: Mapped[str] = mapped_column(sa.Text, sa.ForeignKey("notification_types.type", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(sa.Integer)
    steps: Mapped[dict] = mapped_column(JSONB)  # the canonical document (app/workflows/definition.py)
    note: Mapped[str] = mapped_column(sa.Text, server_default="")
    # The version this one republished (a rollback), if any.
    restored_from: Mapped[int | None] = mapped_column(sa.Integer)
    published_by: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    published_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class WorkflowDraft(db.Model):
    """The workflow an operator is editing for a type (at most one); publishing it makes a version."""

    __tablename__ = "workflow_drafts"

    type: Mapped[str] = mapped_column(
        sa.Text, sa.ForeignKey("notification_types.type", ondelete="CASCADE"), primary_key=True
    )
    steps: Mapped[dict] = mapped_column(JSONB)
    updated_by: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    updated_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class WorkflowStep(db.Model):
    """The engine's plan for one sending step of a version (app/workflows/compiler.py); ledger rows name it."""

    __tablename__ = "workflow_steps"
    __table_args__ = (
        sa.UniqueConstraint("version_id", "channel", name="workflow_steps_channel"),
        sa.CheckConstraint("unless IS NULL OR unless IN ('read', 'seen')", name="workflow_steps_unless"),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    version_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("workflow_versions.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(sa.SmallInteger)  # the step's place in the workflow, from 1
    channel: Mapped[str] = mapped_column(sa.Text)
    # The delays before it ({"seconds": n} | {"until": "data.x"} | {"local_time": "HH:MM"}); NULL: due at once.
    waits: Mapped[list | None] = mapped_column(JSONB(none_as_null=True))
    unless: Mapped[str | None] = mapped_column(sa.Text)  # read | seen: reading (seeing) it first cancels the step
    if_offline: Mapped[bool] = mapped_column(server_default=sa.false())
    wait_for_tab: Mapped[bool] = mapped_column(server_default=sa.false())
    condition: Mapped[str | None] = mapped_column(sa.Text)
    exits: Mapped[list[str]] = mapped_column(ARRAY(sa.Text), server_default="{}")
