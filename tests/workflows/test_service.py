"""Drafts, publishing, history and rollback: immutable versions, the type's columns following, every change audited."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import AuditEntry, NotificationType, WorkflowStep
from app.refusal import Refused
from app.workflows import queries, service
from app.workflows.definition import WorkflowInvalid
from tests.factories import NotificationTypeFactory

ESCALATE = [{"kind": "channel", "channel": "in_app"}, {"kind": "delay", "seconds": 600},
            {"kind": "channel", "channel": "email", "only_if": ["unseen", "offline"]}]  # fmt: skip


def actions() -> list[str]:
    return [e.action for e in db.session.query(AuditEntry).order_by(AuditEntry.id) if e.action.startswith("workflow")]


def test_a_factory_type_starts_with_version_one_from_its_columns(app):
    NotificationTypeFactory(type="reply", default_email=True, escalate_after=60)

    v1 = queries.published("reply")
    assert v1.version == 1
    assert v1.steps["steps"][:2] == [{"kind": "channel", "channel": "in_app"}, {"kind": "delay", "seconds": 60}]


def test_publishing_a_draft_makes_an_immutable_version_and_rewrites_the_columns(app):
    NotificationTypeFactory(type="reply", default_email=True)

    service.save_draft(None, "reply", {"steps": ESCALATE})
    assert queries.published("reply").version == 1  # a draft changes nothing that runs
    version = service.publish(None, "reply", note="escalate by e-mail")

    assert (version.version, version.note) == (2, "escalate by e-mail")
    assert queries.draft("reply") is None
    item = db.session.get(NotificationType, "reply")
    assert (item.workflow_version_id, item.channels, item.escalate_after, item.escalate_unless) == (
        version.id, ["email"], 600, "seen")  # fmt: skip
    [step] = db.session.query(WorkflowStep).filter_by(version_id=version.id).all()
    assert (step.position, step.unless, step.if_offline, step.waits) == (3, "seen", True, [{"seconds": 600}])
    assert actions() == ["workflow.draft", "workflow.publish"]  # version 1 came with the type


def test_a_draft_that_does_not_validate_changes_nothing(app):
    NotificationTypeFactory(type="reply")
    with pytest.raises(WorkflowInvalid) as caught:
        service.save_draft(None, "reply", {"steps": [{"kind": "channel", "channel": "email", "condition": "x >"}]})
    assert caught.value.problems[0].as_json()["step"] == 1
    assert queries.draft("reply") is None and actions() == []


def test_publish_without_a_draft_is_refused(app):
    NotificationTypeFactory(type="reply")
    with pytest.raises(Refused):
        service.publish(None, "reply")


def test_rollback_publishes_the_old_steps_as_a_new_version(app):
    NotificationTypeFactory(type="reply", default_email=True)
    service.save_draft(None, "reply", {"steps": ESCALATE})
    service.publish(None, "reply")

    restored = service.rollback(None, "reply", 1)

    assert (restored.version, restored.restored_from) == (3, 1)
    assert restored.steps == queries.version("reply", 1).steps
    assert [v.version for v in queries.history("reply")] == [3, 2, 1]
    assert db.session.get(NotificationType, "reply").escalate_after is None
    with pytest.raises(Refused):
        service.rollback(None, "reply", 9)


def test_saving_the_older_timing_fields_publishes_only_a_change(app):
    NotificationTypeFactory(type="reply")
    assert service.publish_columns(None, "reply").version == 1  # nothing changed: no new version
    db.session.get(NotificationType, "reply").cap_count = 2
    db.session.get(NotificationType, "reply").cap_window = 60
    assert service.publish_columns(None, "reply").version == 2
