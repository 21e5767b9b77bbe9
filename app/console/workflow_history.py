"""A workflow's history: every published version newest first, its diff against the one before, and rollback.

Rolling back asks first: the history's button posts to the rollback URL, which answers with what would change
(the version in force against the one chosen); only that page's confirmed post publishes it again.
"""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_babel import gettext
from flask_login import current_user

from app.console.actions import run_action
from app.console.blueprint import bp
from app.notification_types import queries as type_queries
from app.workflows import history as workflow_history_reads
from app.workflows import queries, service


def _missing():
    return render_template("console/missing.html", what="notification type"), 404


@bp.get("/types/<type_>/workflow/history")
def workflow_history(type_: str):
    """Each published version, newest first, with who published it, its note and what it changed."""
    item = type_queries.notification_type(type_)
    if item is None:
        return _missing()
    return render_template(
        "console/workflow_history.html",
        item=item,
        entries=workflow_history_reads.history(type_),
        draft=queries.draft(type_),
    )


@bp.post("/types/<type_>/workflow/rollback/<int:version>")
def workflow_rollback(type_: str, version: int):
    """First post: show what publishing version `version` again would change; confirmed post: publish it."""
    item = type_queries.notification_type(type_)
    if item is None:
        return _missing()
    back = url_for("console.workflow_history", type_=type_)  # the POST's CSRF token is checked app-wide
    old = queries.version(type_, version)
    if old is None:
        flash(gettext("Version %(version)s of this workflow does not exist.", version=version), "error")
        return redirect(back)
    if request.form.get("confirmed") != "yes":
        current = queries.published(type_)
        before = workflow_history_reads.as_yaml(current.steps) if current else ""
        return render_template(
            "console/workflow_rollback.html",
            item=item,
            old=old,
            current=current,
            next_version=queries.next_version(type_),
            diff=workflow_history_reads.diff(before, workflow_history_reads.as_yaml(old.steps)),
        )
    return run_action(
        lambda: service.rollback(current_user, type_, version),
        success=lambda row: gettext(
            "Version %(new)s published: it restores version %(old)s.", new=row.version, old=row.restored_from
        ),
        redirect_to=back,
    )
