"""The workflow's test run: what the draft or the published version would do for a sample payload and a member.

Nothing is sent or written: app/workflows/simulate.py applies the engine's rules to the member as they are
(their preferences, where each channel reaches them, quiet hours) and assumes the rest (read after N seconds,
or never). The form posts back to the page; htmx swaps only the results (and the fields, for their errors).
"""

from __future__ import annotations

import json

from flask import render_template, request
from flask_babel import gettext, lazy_gettext
from flask_wtf import FlaskForm
from wtforms import IntegerField, RadioField, StringField, TextAreaField
from wtforms.validators import DataRequired, Length, NumberRange, Optional, ValidationError

from app.clock import db_now
from app.console import workflow_words
from app.console.blueprint import bp
from app.console.forms import choices
from app.console.workflow_timeline import timeline
from app.console.workflow_words import offset
from app.limits import EXTERNAL_ID_MAX, SAMPLE_MAX
from app.notification_types import queries as type_queries
from app.workflows import queries, simulate
from app.workflows.definition import WorkflowInvalid, parse
from app.workflows.members import member as find_member

READ_AFTER_MAX = 365 * 86400
SAMPLE_JSON = '{\n  "amount": 20000\n}'


class TrialForm(FlaskForm):
    """A test run's sample payload, member, when they read it, and which version runs."""

    sample = TextAreaField(
        lazy_gettext("Sample payload (JSON)"), validators=[DataRequired(), Length(max=SAMPLE_MAX)], default=SAMPLE_JSON
    )
    member = StringField(lazy_gettext("Member (external id)"), validators=[DataRequired(), Length(max=EXTERNAL_ID_MAX)])
    read_after = IntegerField(
        lazy_gettext("The member reads it after (seconds)"), validators=[Optional(), NumberRange(0, READ_AFTER_MAX)]
    )
    which = RadioField(lazy_gettext("Workflow"), default="published")

    def validate_sample(self, field) -> None:
        """A JSON object (what a notification's data is); the message names the line of a mistake."""
        try:
            value = json.loads(field.data)
        except json.JSONDecodeError as error:
            raise ValidationError(
                gettext("Not JSON: %(error)s (line %(line)s).", error=error.msg, line=error.lineno)
            ) from None
        if not isinstance(value, dict):
            raise ValidationError(gettext('The payload is a JSON object, such as {"amount": 20000}.'))
        field.payload = value


@bp.route("/types/<type_>/workflow/test", methods=["GET", "POST"])
def workflow_trial(type_: str):
    """Run the draft or the published workflow for a sample, step by step; sends and writes nothing."""
    item = type_queries.notification_type(type_)
    if item is None:
        return render_template("console/missing.html", what="notification type"), 404
    draft, published = queries.draft(type_), queries.published(type_)
    form = TrialForm()
    options = {}
    if draft is not None:
        options["draft"] = gettext("The draft")
    if published is not None:
        options["published"] = gettext("The published version (%(version)s)", version=published.version)
    form.which.choices = choices(options)
    if request.method == "GET":
        form.which.data = "draft" if draft is not None else "published"
    run = None
    if options and form.validate_on_submit():
        member = find_member(form.member.data.strip(), type_)
        if member is None:
            form.member.errors = [gettext("No member has this external id.")]
        else:
            chosen = draft if form.which.data == "draft" else published
            try:
                workflow = parse(chosen.steps)
            except WorkflowInvalid as error:  # a channel taken out of the registry since it was saved
                form.which.errors = [gettext("This workflow no longer checks: %(error)s", error=str(error))]
                return _page(item, form, None, options), 422
            run = _result(workflow, form, member, None if form.which.data == "draft" else published.version)
    return _page(item, form, run, options), 422 if form.errors else 200


def _result(workflow, form: TrialForm, member, version: int | None) -> dict:
    """The test run from now: each step with its outcome and when (relative too), the picture, what was assumed."""
    now = db_now()
    outcomes = simulate.run(workflow, form.sample.payload, member, now, form.read_after.data)
    return {
        "version": version,
        "rows": [
            (step, o, None if o.at is None else offset((o.at - now).total_seconds()))
            for step, o in zip(workflow.steps, outcomes, strict=True)
        ],
        "timeline": timeline(workflow, outcomes, now),
        "member": member,
        "read_after": form.read_after.data,
    }


def _page(item, form: TrialForm, run: dict | None, options: dict) -> str:
    return render_template(
        "console/workflow_trial.html", item=item, form=form, run=run, has_workflow=bool(options), words=workflow_words
    )
