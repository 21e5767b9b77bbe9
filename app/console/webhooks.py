"""Webhook endpoint pages (admins only): register (the secret is shown once), edit, recent attempts, test, replay."""

from __future__ import annotations

from flask import abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext, lazy_gettext, ngettext
from flask_login import current_user

from app.auth.access import admin_required
from app.console.actions import run_action
from app.console.blueprint import bp
from app.console.listing import ListArgs
from app.refusal import Refused
from app.unitofwork import commit
from app.webhooks import queries, service
from app.webhooks.events import EVENT_TYPES

OUTCOME_LABELS = {
    "sent": lazy_gettext("sent"),
    "transient": lazy_gettext("failed, will retry"),
    "permanent": lazy_gettext("rejected"),
    "held": lazy_gettext("expired while held"),
}


def _list(new_secret: str | None = None, errors: list[str] | None = None, status: int = 200):
    form = request.form if errors else {}
    return render_template(
        "console/webhooks.html",
        endpoints=queries.endpoints(),
        event_types=EVENT_TYPES,
        new_secret=new_secret,
        errors=errors or [],
        form=form,
        chosen=request.form.getlist("event_types") if errors else list(EVENT_TYPES),
    ), status


@bp.get("/webhooks")
@admin_required
def webhooks():
    """Every webhook endpoint with its queue figures, and the form to register one."""
    return _list()


@bp.post("/webhooks")
@admin_required
def create_webhook():
    """Register an endpoint and show its signing secret this once (rendered, never stored in the session)."""
    # Not run_action: the secret is rendered this once (201), never flashed or redirected.
    try:
        created = service.create_endpoint(
            current_user, request.form.get("url", ""), request.form.getlist("event_types"),
            request.form.get("description", ""), request.form.get("enabled") == "on",
        )  # fmt: skip
    except Refused as exc:
        return _list(errors=[str(exc)], status=422)
    commit()
    return _list(new_secret=created.secret, status=201)


@bp.get("/webhooks/<int:endpoint_id>")
@admin_required
def webhook(endpoint_id: int):
    """One endpoint: its settings and its recent attempts (filter by outcome in the URL)."""
    row = queries.endpoint(endpoint_id)
    if row is None:
        abort(404)
    lf = ListArgs(request.args)
    outcome = lf.choice("outcome", queries.OUTCOMES, gettext("outcome"))
    return render_template(
        "console/webhooks_detail.html",
        endpoint=row,
        attempts=queries.recent_attempts(endpoint_id, outcome),
        event_types=EVENT_TYPES,
        outcome_labels=OUTCOME_LABELS,
        lf=lf,
    )


@bp.post("/webhooks/<int:endpoint_id>")
@admin_required
def update_webhook(endpoint_id: int):
    """Save the event types and the switch."""

    def save() -> None:
        found = service.update_endpoint(
            current_user, endpoint_id, request.form.getlist("event_types"), request.form.get("enabled") == "on"
        )
        if not found:
            abort(404)

    return run_action(
        save, success=gettext("Endpoint saved."), redirect_to=url_for("console.webhook", endpoint_id=endpoint_id)
    )


@bp.post("/webhooks/<int:endpoint_id>/test")
@admin_required
def test_webhook(endpoint_id: int):
    """Queue a webhook.test event to this endpoint."""
    # Not run_action: a disabled endpoint is a plain answer of the service (False), not a refusal.
    if service.send_test(endpoint_id):
        commit()
        flash(gettext("Test event queued: it appears under recent attempts within seconds."), "success")
    else:
        flash(gettext("The endpoint is disabled: enable it to send a test event."), "error")
    return redirect(url_for("console.webhook", endpoint_id=endpoint_id))


@bp.post("/webhooks/<int:endpoint_id>/replay")
@admin_required
def replay_webhook(endpoint_id: int):
    """Send the endpoint's failed events again, each with its own webhook-id."""
    return run_action(
        lambda: service.replay_failed(endpoint_id),
        success=lambda count: ngettext(
            "%(num)d failed event queued again.", "%(num)d failed events queued again.", count
        ),
        redirect_to=url_for("console.webhook", endpoint_id=endpoint_id),
    )


@bp.post("/webhooks/<int:endpoint_id>/delete")
@admin_required
def delete_webhook(endpoint_id: int):
    """Remove the endpoint with its queued events and its history."""
    # Not run_action: an endpoint already gone just goes back to the list, without a message.
    if service.delete_endpoint(current_user, endpoint_id):
        commit()
        flash(gettext("Endpoint deleted."), "success")
    return redirect(url_for("console.webhooks"))
