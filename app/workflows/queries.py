"""Workflow reads: the version in force (one type's, or every type's), the draft, the history, one version."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.models import NotificationType, WorkflowDraft, WorkflowVersion

HISTORY_LIMIT = 200


def published(type_: str) -> WorkflowVersion | None:
    """The version the type's new notifications run, if it has one."""
    return db.session.execute(
        sa.select(WorkflowVersion)
        .join(NotificationType, NotificationType.workflow_version_id == WorkflowVersion.id)
        .where(NotificationType.type == type_)
    ).scalar_one_or_none()


def published_by_type() -> dict[str, WorkflowVersion | None]:
    """Every type's key (in order) with the version its new notifications run (None: it has none yet)."""
    rows = db.session.execute(
        sa.select(NotificationType.type, WorkflowVersion)
        .outerjoin(WorkflowVersion, NotificationType.workflow_version_id == WorkflowVersion.id)
        .order_by(NotificationType.type)
    )
    return {type_: version for type_, version in rows}


def draft(type_: str) -> WorkflowDraft | None:
    """The type's draft, if an operator is editing one."""
    return db.session.get(WorkflowDraft, type_)


def version(type_: str, number: int) -> WorkflowVersion | None:
    """Version `number` of the type's workflow."""
    return db.session.execute(
        sa.select(WorkflowVersion).where(WorkflowVersion.type == type_, WorkflowVersion.version == number)
    ).scalar_one_or_none()


def version_by_id(version_id: int) -> WorkflowVersion | None:
    """The version with this id (what a notification ran)."""
    return db.session.get(WorkflowVersion, version_id)


def history(type_: str) -> list[WorkflowVersion]:
    """The type's versions, newest first (at most HISTORY_LIMIT)."""
    return list(
        db.session.execute(
            sa.select(WorkflowVersion)
            .where(WorkflowVersion.type == type_)
            .order_by(WorkflowVersion.version.desc())
            .limit(HISTORY_LIMIT)
        ).scalars()
    )


def next_version(type_: str) -> int:
    """The number the type's next published version takes (the caller holds the type's row lock)."""
    return db.session.execute(
        sa.text("SELECT coalesce(max(version), 0) + 1 FROM workflow_versions WHERE type = :type"), {"type": type_}
    ).scalar_one()
