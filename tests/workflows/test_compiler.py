"""Compiling a workflow: the plan rows per sending step and the type's per-type columns; knobs round trip."""

from __future__ import annotations

import pytest

from app.workflows.compiler import compile_workflow
from app.workflows.definition import parse
from app.workflows.knobs import workflow_from_columns
from tests.workflows.test_definition import EXAMPLE


def test_the_example_plans_each_sending_step_with_the_delays_before_it(app):
    compiled = compile_workflow(parse(EXAMPLE))

    push, sms, email = compiled.steps
    assert (push.position, push.channel, push.waits, push.unless) == (3, "push", [{"seconds": 1800}], "read")
    assert sms.waits == [{"seconds": 1800}, {"seconds": 14400}] and sms.condition == "data.amount > 10000"
    assert (email.channel, email.waits, email.condition) == ("email", sms.waits, "!(data.amount > 10000)")
    assert compiled.columns["channels"] == ["push", "sms", "email"]
    assert compiled.columns["email_frequency"] == "daily" and compiled.columns["in_app_step"] is True
    assert compiled.columns["escalate_after"] is None  # the steps wait differently: no single escalation says it


def test_exit_conditions_go_to_every_step_after_them(app):
    compiled = compile_workflow(parse({"steps": [
        {"kind": "channel", "channel": "email"},
        {"kind": "exit", "condition": "data.cancelled == true"},
        {"kind": "delay", "local_time": "09:00"},
        {"kind": "channel", "channel": "push"},
    ]}))  # fmt: skip
    email, push = compiled.steps
    assert email.exits == [] and push.exits == ["data.cancelled == true"]
    assert push.waits == [{"local_time": "09:00"}] and compiled.columns["in_app_step"] is False


COLUMNS = [
    {},
    {"escalate_after": 60, "escalate_unless": "read"},
    {"escalate_after": 300, "escalate_unless": "seen", "skip_when_online": True},
    {"cap_count": 3, "cap_window": 3600, "email_frequency": "hourly"},
    {"aggregation_window": 120, "channels": ["push", "email"]},
    {"push_when_offline": True, "channels": ["push"]},
    {"skip_when_online": True},
]


@pytest.mark.parametrize("columns", COLUMNS)
def test_the_workflow_of_a_types_columns_compiles_back_to_those_columns(app, columns):
    defaults = {"escalate_after": None, "escalate_unless": "read", "skip_when_online": False,
                "push_when_offline": False, "cap_count": None, "cap_window": None, "aggregation_window": None,
                "email_frequency": "immediate", "channels": None}  # fmt: skip
    t = {**defaults, **columns}
    compiled = compile_workflow(workflow_from_columns(t)).columns
    for name, value in t.items():
        if name == "channels":
            assert compiled[name] == (value or ["email", "push", "sms", "chat"])
        else:
            assert compiled[name] == value, name
