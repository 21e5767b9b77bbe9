"""The console's one action helper: refused → the message, nothing committed; else commit, say so, redirect."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from flask import get_flashed_messages
from flask_wtf import FlaskForm

from app.audit import service as audit
from app.console.actions import run_action
from app.extensions import db
from app.models import AuditEntry
from app.refusal import Refused


def _change(refuse: bool = False):
    """Write one audit row (a stand-in for any service change), then refuse if asked."""

    def change() -> AuditEntry:
        entry = audit.record(None, "test.action", "thing", 7)
        if refuse:
            raise Refused("Not today.")
        return entry

    return change


def _rows_after_rollback() -> int:
    """How many test rows survive a rollback of what was not committed."""
    db.session.rollback()
    return db.session.execute(sa.text("SELECT count(*) FROM audit_log WHERE action = 'test.action'")).scalar_one()


def test_a_change_is_committed_said_and_redirected(app):
    with app.test_request_context("/console/x", method="POST"):
        response = run_action(
            _change(),
            success=lambda entry: f"Entry {entry.target_id} written.",
            redirect_to=lambda entry: f"/console/things/{entry.target_id}",
        )
        assert (response.status_code, response.location) == (302, "/console/things/7")
        assert get_flashed_messages(with_categories=True) == [("success", "Entry 7 written.")]
        assert _rows_after_rollback() == 1


def test_a_refusal_is_flashed_and_nothing_is_committed(app):
    with app.test_request_context("/console/x", method="POST"):
        response = run_action(
            _change(refuse=True), success="Never said.", redirect_to=lambda _: "/console/done", refused_to="/console/x"
        )
        assert (response.status_code, response.location) == (302, "/console/x")
        assert get_flashed_messages(with_categories=True) == [("error", "Not today.")]
        assert _rows_after_rollback() == 0


def test_a_refusal_goes_back_to_a_plain_redirect_target(app):
    with app.test_request_context("/console/x", method="POST"):
        response = run_action(_change(refuse=True), success="Never said.", redirect_to="/console/list")
        assert response.location == "/console/list"


def test_a_refusal_with_a_form_lands_on_the_form(app):
    with app.test_request_context("/console/x", method="POST"):
        form = FlaskForm(meta={"csrf": False})
        assert run_action(_change(refuse=True), success="Never said.", redirect_to="/console/list", form=form) is None
        assert form.form_errors == ["Not today."]
        assert get_flashed_messages() == []
        assert _rows_after_rollback() == 0


def test_a_refusal_needs_somewhere_to_go(app):
    with app.test_request_context("/console/x", method="POST"), pytest.raises(TypeError):
        run_action(_change(refuse=True), success="Never said.", redirect_to=lambda _: "/console/done")
