"""Migration 0032 writes each existing type's first version with a frozen copy of the knobs rule: the two agree."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
from flask_migrate import upgrade

from app import create_app
from app.config import sqlalchemy_url
from app.delivery.channels import routable_names
from app.extensions import db
from app.workflows.compiler import compile_workflow
from app.workflows.definition import normalized, parse, to_document
from app.workflows.knobs import workflow_from_columns
from tests.conftest import TEST_CONFIG
from tests.support.databases import recreate_database
from tests.workflows.test_compiler import COLUMNS

MIGRATION = Path(__file__).resolve().parents[2] / "migrations" / "versions" / "0032_workflows.py"


def _migration():
    spec = importlib.util.spec_from_file_location("migration_0032", MIGRATION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_migrations_channels_are_the_registrys(app):
    assert _migration().ROUTABLE == routable_names()


@pytest.mark.parametrize("columns", COLUMNS)
def test_the_migration_and_the_knobs_rule_write_the_same_steps_and_plan(app, columns):
    defaults = {"escalate_after": None, "escalate_unless": "read", "skip_when_online": False,
                "push_when_offline": False, "cap_count": None, "cap_window": None, "aggregation_window": None,
                "email_frequency": "immediate", "channels": None}  # fmt: skip
    t = {**defaults, **columns}
    steps, planned = _migration()._steps(t)
    workflow = workflow_from_columns(t)
    assert normalized({"steps": steps}) == to_document(workflow)
    compiled = compile_workflow(parse({"steps": steps})).steps
    assert [
        {"position": p.position, "channel": p.channel, "waits": json.dumps(p.waits) if p.waits else None,
         "unless": p.unless, "if_offline": p.if_offline, "wait_for_tab": p.wait_for_tab}
        for p in compiled
    ] == planned  # fmt: skip


def test_migration_0032_gives_existing_types_the_version_their_columns_meant(database_url):
    """Upgrade a database holding types with timing columns to 0032; its SQL function computes due times."""
    parts = urlsplit(database_url)
    url = parts._replace(path=parts.path + "_wf0032").geturl()
    recreate_database(url)
    scratch = create_app(dict(TEST_CONFIG, SQLALCHEMY_DATABASE_URI=sqlalchemy_url(url)))
    with scratch.app_context():
        upgrade(revision="0031_push_when_offline")
        db.session.execute(sa.text(
            "INSERT INTO notification_types (type, label, escalate_after, escalate_unless, skip_when_online,"
            " email_frequency, channels) VALUES ('mention', 'Mentions', 600, 'seen', true, 'daily',"
            " ARRAY['push', 'email']), ('plain', 'Plain', NULL, 'read', false, 'immediate', NULL)"
        ))  # fmt: skip
        db.session.commit()
        upgrade()
        versions = dict(db.session.execute(sa.text(
            "SELECT t.type, v.steps FROM notification_types t JOIN workflow_versions v ON v.id = t.workflow_version_id"
        )).tuples().all())  # fmt: skip
        plan = db.session.execute(sa.text(
            "SELECT s.channel, s.position, s.waits, s.unless, s.if_offline FROM workflow_steps s"
            " JOIN notification_types t ON t.workflow_version_id = s.version_id WHERE t.type = 'mention'"
            " ORDER BY s.position"
        )).all()  # fmt: skip
        due = db.session.execute(sa.text(
            "SELECT workflow_due(timestamptz '2026-01-01 00:00Z', '[{\"seconds\": 90}, {\"local_time\": \"09:00\"}]',"
            " '{}', NULL)"
        )).scalar_one()  # fmt: skip
        db.session.remove()
        db.engine.dispose()
    with create_app(TEST_CONFIG).app_context():
        expected = {t: to_document(workflow_from_columns(columns)) for t, columns in {
            "mention": {"escalate_after": 600, "escalate_unless": "seen", "skip_when_online": True,
                        "email_frequency": "daily", "channels": ["push", "email"]},
            "plain": {},
        }.items()}  # fmt: skip
    assert versions == expected
    assert [tuple(row) for row in plan] == [
        ("push", 3, [{"seconds": 600}], "seen", True), ("email", 4, [{"seconds": 600}], "seen", True)]  # fmt: skip
    assert due.isoformat() == "2026-01-01T09:00:00+00:00"  # 00:01:30 UTC, then the next 09:00 in UTC (no member)
