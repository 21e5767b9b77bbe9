"""Workflow writes: save and discard the draft, publish it as an immutable version, roll back; all audited.

Publishing compiles the version (app/workflows/compiler.py): its plan rows go to workflow_steps and the type's
per-type columns are rewritten, in the same transaction, so a notification accepted after the commit runs the
new version and one accepted before keeps the steps its ledger rows name.
"""

from __future__ import annotations

import sqlalchemy as sa
from flask_babel import gettext

from app.audit import service as audit
from app.extensions import db
from app.models import NotificationType, WorkflowDraft, WorkflowStep, WorkflowVersion
from app.refusal import Refused
from app.workflows import queries
from app.workflows.compiler import compile_workflow
from app.workflows.definition import Workflow, normalized, parse, to_document
from app.workflows.knobs import workflow_from_columns

NOTE_MAX = 500
COLUMN_FIELDS = (
    "escalate_after",
    "escalate_unless",
    "skip_when_online",
    "push_when_offline",
    "cap_count",
    "cap_window",
    "aggregation_window",
    "email_frequency",
    "channels",
    "in_app_step",
)


def _locked_type(type_: str) -> NotificationType:
    item = db.session.get(NotificationType, type_, with_for_update=True)
    if item is None:
        raise Refused(gettext("That notification type no longer exists."))
    return item


def save_draft(actor, type_: str, document: object) -> dict:
    """Check document (raises WorkflowInvalid, nothing written) and keep it as the type's draft; return it."""
    _locked_type(type_)
    steps = normalized(document)
    draft = db.session.get(WorkflowDraft, type_)
    before = draft.steps if draft else None
    if draft is None:
        draft = WorkflowDraft(type=type_, steps=steps)
        db.session.add(draft)
    draft.steps, draft.updated_by, draft.updated_at = steps, _user_id(actor), sa.func.now()
    db.session.flush()
    if before != steps:
        audit.record(actor, "workflow.draft", "notification_type", type_, before={"steps": before},
                     after={"steps": steps})  # fmt: skip
    return steps


def discard_draft(actor, type_: str) -> bool:
    """Drop the type's draft; whether there was one."""
    draft = db.session.get(WorkflowDraft, type_)
    if draft is None:
        return False
    audit.record(actor, "workflow.discard", "notification_type", type_, before={"steps": draft.steps})
    db.session.delete(draft)
    db.session.flush()
    return True


def publish(actor, type_: str, note: str = "") -> WorkflowVersion:
    """Publish the type's draft as its next version (the draft is then gone); Refused without a draft."""
    _locked_type(type_)
    draft = db.session.get(WorkflowDraft, type_)
    if draft is None:
        raise Refused(gettext("There is no draft to publish: the published version is what runs."))
    workflow = parse(draft.steps)
    version = _publish(actor, type_, workflow, note)
    db.session.delete(draft)
    db.session.flush()
    return version


def rollback(actor, type_: str, version: int) -> WorkflowVersion:
    """Publish an earlier version's steps again, as a new version that says which one it restores."""
    _locked_type(type_)
    old = queries.version(type_, version)
    if old is None:
        raise Refused(gettext("Version %(version)s of this workflow does not exist.", version=version))
    return _publish(actor, type_, parse(old.steps), gettext("Rolled back to version %(v)s", v=version),
                    restored_from=version)  # fmt: skip


def publish_columns(actor, type_: str, note: str = "") -> WorkflowVersion:
    """Publish what the type's timing columns say as its next version (a type saved by the older form, or
    written straight into the table), unless the version in force already says exactly that. A type's first
    version is part of creating it (its type.create entry, or none for a row written by SQL): not audited apart."""
    item = _locked_type(type_)
    workflow = workflow_from_columns(_columns(item))
    current = queries.published(type_)
    if current is not None and current.steps == to_document(workflow):
        return current
    return _publish(actor, type_, workflow, note or "from the type's settings", audited=current is not None)


def ensure_versions() -> int:
    """Give every type that has no published version its first, from its columns; how many got one."""
    missing = db.session.execute(
        sa.text("SELECT type FROM notification_types WHERE workflow_version_id IS NULL ORDER BY type")
    ).scalars()
    done = 0
    for type_ in list(missing):
        publish_columns(None, type_)
        done += 1
    return done


def _user_id(actor) -> int | None:
    """The user behind actor, for updated_by / published_by: none for an API key (its id is no user's) or the CLI."""
    return audit.actor_of(actor)[0]


def _columns(item: NotificationType) -> dict:
    return {name: getattr(item, name) for name in COLUMN_FIELDS}


def _publish(
    actor, type_: str, workflow: Workflow, note: str, restored_from: int | None = None, audited: bool = True
) -> WorkflowVersion:
    if len(note) > NOTE_MAX:
        raise Refused(gettext("A note has at most %(max)s characters.", max=NOTE_MAX))
    item = db.session.get(NotificationType, type_)
    steps = to_document(workflow)
    before = queries.published(type_)
    row = WorkflowVersion(
        type=type_,
        version=queries.next_version(type_),
        steps=steps,
        note=note.strip(),
        restored_from=restored_from,
        published_by=_user_id(actor),
    )
    db.session.add(row)
    db.session.flush()
    compiled = compile_workflow(workflow)
    for planned in compiled.steps:
        db.session.add(
            WorkflowStep(
                version_id=row.id,
                position=planned.position,
                channel=planned.channel,
                waits=planned.waits,
                unless=planned.unless,
                if_offline=planned.if_offline,
                wait_for_tab=planned.wait_for_tab,
                condition=planned.condition,
                exits=planned.exits,
            )
        )
    for name, value in compiled.columns.items():
        setattr(item, name, value)
    item.workflow_version_id = row.id
    db.session.flush()
    if not audited:
        return row
    audit.record(
        actor,
        "workflow.publish",
        "notification_type",
        type_,
        before={"version": before.version, "steps": before.steps} if before else None,
        after={"version": row.version, "steps": steps, "note": row.note, "restored_from": restored_from},
    )
    return row
