"""The workflow in words and as an SVG (app/console/workflow_diagram.py): durations, the type list's summary, the
drawing's boxes, arrows, end and escaping."""

from __future__ import annotations

from app.console import workflow_diagram
from app.workflows.definition import parse

EXAMPLE = {"steps": [
    {"kind": "channel", "channel": "in_app"},
    {"kind": "delay", "seconds": 1800},
    {"kind": "channel", "channel": "push", "only_if": ["unread"]},
    {"kind": "delay", "local_time": "09:00"},
    {"kind": "channel", "channel": "sms", "only_if": ["unread"], "condition": "data.amount > 10000"},
    {"kind": "digest", "frequency": "daily", "only_if": ["unread"], "condition": "!(data.amount > 10000)"},
]}  # fmt: skip


def test_durations_take_the_largest_unit_that_divides(app):
    assert [workflow_diagram.duration(s) for s in (2, 90, 1800, 14400, 86400 * 2)] == [
        "2 s", "90 s", "30 min", "4 h", "2 d"]  # fmt: skip


def test_the_summary_reads_the_steps_in_order(app):
    text = workflow_diagram.summary(EXAMPLE)
    assert text.startswith("In-app → 30 min → Push if unread → until 09:00 local time → SMS if unread when data")
    assert text.endswith("Digest daily if unread when !(data.amount > 10000)")
    long = {"steps": [{"kind": "channel", "channel": "in_app"}] + [{"kind": "delay", "seconds": 1}] * 7}
    assert workflow_diagram.summary(long).endswith(" → …") and workflow_diagram.summary(None) == ""


def test_the_drawing_has_a_box_per_step_arrows_between_and_an_end(app):
    svg = str(workflow_diagram.render(parse(EXAMPLE), "Steps of <payment>"))
    assert svg.count('class="workflow-diagram__box"') == 6
    assert svg.count('class="workflow-diagram__arrow"') == 6  # five between the steps, one to the end
    assert 'role="img"' in svg and '<title id="workflow-diagram-title">Steps of &lt;payment&gt;</title>' in svg
    assert "<desc" in svg and "5. SMS if unread when data.amount &gt; 10000" in svg


def test_an_exit_without_a_condition_ends_the_drawing(app):
    steps = parse({"steps": [{"kind": "channel", "channel": "in_app"}, {"kind": "exit"}]})
    svg = str(workflow_diagram.render(steps, "t"))
    assert "workflow-diagram__step--exit" in svg and "workflow-diagram__end" not in svg
    assert svg.count('class="workflow-diagram__arrow"') == 1
