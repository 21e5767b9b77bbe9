"""Workflow documents: what parses, the problems reported at their step and field, the canonical form."""

from __future__ import annotations

import pytest

from app.workflows.definition import WorkflowInvalid, normalized, parse, to_document

EXAMPLE = {
    "steps": [
        {"kind": "channel", "channel": "in_app"},
        {"kind": "delay", "seconds": 1800},
        {"kind": "channel", "channel": "push", "only_if": ["unread"]},
        {"kind": "delay", "seconds": 14400},
        {"kind": "channel", "channel": "sms", "only_if": "unread", "condition": "data.amount > 10000"},
        {"kind": "digest", "frequency": "daily", "only_if": ["unread"], "condition": "!(data.amount > 10000)"},
    ]
}


def problems(document) -> list[tuple]:
    with pytest.raises(WorkflowInvalid) as caught:
        parse(document)
    return [(p.step, p.field) for p in caught.value.problems]


def test_the_issue_example_parses_and_reads_back_canonically(app):
    workflow = parse(EXAMPLE)

    assert [s.kind for s in workflow.steps] == ["channel", "delay", "channel", "delay", "channel", "digest"]
    assert [(n, s.delivery_channel) for n, s in workflow.delivery_steps()] == [(3, "push"), (5, "sms"), (6, "email")]
    document = to_document(workflow)
    assert document["steps"][4] == {
        "kind": "channel", "channel": "sms", "only_if": ["unread"], "condition": "data.amount > 10000"
    }  # fmt: skip
    assert normalized(document) == document  # canonical form is a fixed point


@pytest.mark.parametrize(
    "steps, where",
    [
        ([{"kind": "send"}], [(1, "kind")]),
        ([{"kind": "channel", "channel": "fax"}], [(1, "channel")]),
        ([{"kind": "channel", "channel": "email", "colour": "red"}], [(1, "colour")]),
        ([{"kind": "channel", "channel": "email", "only_if": ["unread", "unseen"]}], [(1, "only_if")]),
        ([{"kind": "channel", "channel": "email", "only_if": ["sometimes"]}], [(1, "only_if")]),
        ([{"kind": "channel", "channel": "email", "condition": "data.amount >"}], [(1, "condition")]),
        ([{"kind": "channel", "channel": "email", "condition": "user.age > 3"}], [(1, "condition")]),
        ([{"kind": "channel", "channel": "email", "wait_for_tab": True}], [(1, "wait_for_tab")]),
        (
            [{"kind": "channel", "channel": "in_app", "only_if": ["unread"]}, {"kind": "channel", "channel": "email"}],
            [(1, "only_if")],
        ),
        ([{"kind": "delay"}, {"kind": "channel", "channel": "email"}], [(1, "seconds")]),
        ([{"kind": "delay", "seconds": 0}, {"kind": "channel", "channel": "email"}], [(1, "seconds")]),
        (
            [{"kind": "delay", "seconds": 5, "local_time": "09:00"}, {"kind": "channel", "channel": "email"}],
            [(1, "seconds")],
        ),
        ([{"kind": "delay", "local_time": "25:00"}, {"kind": "channel", "channel": "email"}], [(1, "local_time")]),
        ([{"kind": "delay", "until": "remind_at"}, {"kind": "channel", "channel": "email"}], [(1, "until")]),
        ([{"kind": "channel", "channel": "email"}, {"kind": "batch", "window": 60}], [(2, "kind")]),
        ([{"kind": "channel", "channel": "email"}, {"kind": "channel", "channel": "email"}], [(2, "channel")]),
        ([{"kind": "digest", "frequency": "daily"}, {"kind": "channel", "channel": "email"}], [(2, "channel")]),
        ([{"kind": "delay", "seconds": 5}, {"kind": "channel", "channel": "in_app"}], [(2, "channel")]),
        (
            [{"kind": "channel", "channel": "email"}, {"kind": "exit"}, {"kind": "channel", "channel": "push"}],
            [(3, "kind")],
        ),
        ([{"kind": "throttle", "count": 3}, {"kind": "channel", "channel": "email"}], [(1, "window")]),
        ([{"kind": "delay", "seconds": 60}], [(None, "steps")]),
        ([], [(None, "steps")]),
    ],
)
def test_each_problem_is_named_at_its_step_and_field(app, steps, where):
    assert problems({"steps": steps}) == where


def test_every_problem_is_reported_at_once(app):
    found = problems({"steps": [{"kind": "delay", "seconds": -1}, {"kind": "channel", "channel": "sms",
                                                                   "condition": "nope("}]})  # fmt: skip
    assert found == [(1, "seconds"), (2, "condition")]


@pytest.mark.parametrize("document", [None, [], {"steps": "x"}, {"step": []}])
def test_a_document_that_is_not_a_workflow(app, document):
    assert problems(document) == [(None, "steps")]


def test_too_many_steps(app):
    steps = [{"kind": "channel", "channel": "in_app"}] + [{"kind": "exit", "condition": "true"}] * 20
    assert (None, "steps") in problems({"steps": steps})
