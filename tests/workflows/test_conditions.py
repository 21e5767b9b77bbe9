"""CEL conditions: checked when saved (names, size, syntax), evaluated with a bounded cost, false when unsure."""

from __future__ import annotations

import json
import time

import pytest

from app.workflows import conditions
from app.workflows.conditions import (
    CONDITION_DATA_MAX_BYTES,
    CONDITION_MAX_CHARS,
    CONDITION_TIME_LIMIT_MS,
    CONDITION_WORK_MAX,
    ConditionError,
)


def test_a_condition_reads_the_payload_the_member_and_the_notification(app):
    context = {"data": {"amount": 12000, "tags": ["vip"]}, "recipient": {"locale": "ja"},
               "notification": {"read": False}, "tenant": {}}  # fmt: skip
    assert conditions.evaluate("data.amount > 10000 && recipient.locale == 'ja'", context)
    assert conditions.evaluate("!notification.read && data.tags.exists(t, t == 'vip')", context)
    assert not conditions.evaluate("data.amount > 20000", context)


@pytest.mark.parametrize(
    "source, message",
    [
        ("", "Write a condition"),
        ("data.amount >", "Not valid CEL"),
        ("secret.key == 1", "Unknown name secret"),
        ("x" * (CONDITION_MAX_CHARS + 1), "at most 500 characters"),
        ("data.a.all(x, data.b.all(y, x == y))", "one list macro"),
    ],
)
def test_a_bad_condition_is_refused_with_why(app, source, message):
    with pytest.raises(ConditionError, match=message):
        conditions.check(source)


@pytest.mark.parametrize(
    "source, data",
    [
        ("data.missing > 1", {}),  # no such field
        ("data.amount > 'x'", {"amount": 1}),  # int against string
        ("data.amount", {"amount": 1}),  # not a boolean
    ],
)
def test_a_condition_that_cannot_be_decided_is_false_and_says_why(app, source, data):
    holds, why = conditions.explain(source, {"data": data})
    assert holds is False and why
    assert conditions.evaluate(source, {"data": data}) is False


def test_the_worst_case_allowed_stays_within_the_time_limit(app):
    # The longest list the work limit lets the longest condition walk, at the payload limit's edge.
    body = " && ".join(["x * 2 + 1 > -1"] * 6)
    source = f"data.xs.all(x, {body}) && size(data.pad) > 0"
    tokens = conditions._compiled(source).tokens
    numbers = list(range(CONDITION_WORK_MAX // tokens))
    data = {"xs": numbers, "pad": "p" * (CONDITION_DATA_MAX_BYTES - len(json.dumps({"xs": numbers})) - 20)}
    assert conditions.explain(source, {"data": data}) == (True, None)
    started = time.perf_counter()
    for _ in range(5):
        conditions.evaluate(source, {"data": data})
    per_call_ms = (time.perf_counter() - started) * 1000 / 5
    print(f"worst case allowed: {len(numbers)} elements x {tokens} tokens, {per_call_ms:.2f} ms per evaluation")
    assert per_call_ms < CONDITION_TIME_LIMIT_MS * 5  # the limit with room for a loaded machine


def test_past_a_limit_a_condition_is_undecided_and_false(app):
    walk = "data.xs.all(x, " + " && ".join(["x >= 0"] * 8) + ")"
    too_many = [0] * (CONDITION_WORK_MAX // conditions._compiled(walk).tokens + 1)
    assert len(str(too_many)) < CONDITION_DATA_MAX_BYTES  # the walk's limit, not the payload's
    assert conditions.explain(walk, {"data": {"xs": too_many[:1000]}}) == (True, None)
    holds, why = conditions.explain(walk, {"data": {"xs": too_many}})
    assert holds is False and "elements" in why
    holds, why = conditions.explain("data.blob != ''", {"data": {"blob": "x" * (CONDITION_DATA_MAX_BYTES + 1)}})
    assert holds is False and "bytes" in why


def test_only_the_fields_a_condition_names_are_handed_over(app):
    # A large field the condition does not read costs nothing and passes no limit.
    data = {"amount": 12000, "attachment": "x" * (CONDITION_DATA_MAX_BYTES * 4)}
    assert conditions.evaluate("data.amount > 10000", {"data": data})
