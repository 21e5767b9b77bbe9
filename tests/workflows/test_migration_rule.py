"""Migration 0032 writes each existing type's first version with a frozen copy of the knobs rule: the two agree."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from app.delivery.channels import routable_names
from app.workflows.compiler import compile_workflow
from app.workflows.definition import normalized, parse, to_document
from app.workflows.knobs import workflow_from_columns
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
