"""Notification type pages: list, create, edit (rename while unused; confirm mandatory); the steps: workflows.py."""

from __future__ import annotations

from dataclasses import asdict

from flask import flash, redirect, render_template, request, url_for
from flask_babel import gettext
from flask_login import current_user

from app.console.actions import run_action
from app.console.blueprint import bp
from app.console.forms import TypeForm, fill_variants, variants_of
from app.console.listing import ListArgs
from app.console.workflow_diagram import summary as workflow_summary
from app.delivery.channels import member_channels
from app.models import PRIORITIES
from app.notification_types import queries, service
from app.refusal import Refused
from app.unitofwork import commit

SETTINGS = ("label", "description", "default_in_app", "default_email", "default_push", "mandatory", "priority")


def _settings(form: TypeForm) -> dict:
    return {name: getattr(form, name).data for name in SETTINGS} | {
        "description": form.description.data or "",
        "sms_max_segments": form.sms_max_segments.data,
        "locales": variants_of(form),
    }


def _routing(form: TypeForm) -> service.Routing:
    """What the form edits of the type's sending; its steps are the workflow editor's (app/console/workflows.py)."""
    return service.Routing(
        channel_mode=form.channel_mode.data,
        default_channels=tuple(form.default_channels.data or ()),
        bypass_quiet_hours=form.bypass_quiet_hours.data,
    )


@bp.get("/types")
def types():
    """Every notification type with its per-channel defaults; search by key, label or description, and filter."""
    lf = ListArgs(request.args)
    q = lf.text("q")
    channel = lf.choice("channel", [c.name for c in member_channels()], gettext("channel"))
    mandatory = lf.choice("mandatory", ("yes", "no"), gettext("mandatory"))
    priority = lf.choice("priority", PRIORITIES, gettext("priority"))
    rows = queries.notification_types(q=q, channel=channel, mandatory=mandatory, priority=priority)
    return render_template(
        "console/types.html", types=rows, lf=lf, priorities=PRIORITIES, workflow_summary=workflow_summary
    )


@bp.route("/types/new", methods=["GET", "POST"])
def new_type():
    """Create a notification type."""
    form = TypeForm()
    if form.validate_on_submit():
        done = run_action(
            lambda: service.create_type(
                current_user, key=form.key.data, timing=service.Timing(**asdict(_routing(form))), **_settings(form)
            ),
            success=gettext("Type %(key)s created.", key=form.key.data),
            redirect_to=url_for("console.types"),
            form=form,
        )
        if done is not None:
            return done
    return render_template(
        "console/type_form.html", form=form, item=None, in_use=False, overrides=None
    ), 422 if form.errors else 200


@bp.route("/types/<key>/edit", methods=["GET", "POST"])
def edit_type(key: str):
    """Edit a type; turning it mandatory first shows whose choices it overrides."""
    item = queries.notification_type(key)
    if item is None:
        return render_template("console/missing.html", what="notification type"), 404
    form = TypeForm(obj=item, key=item.type)
    if request.method == "GET":
        fill_variants(form, item.locales)
    in_use = queries.type_in_use(key)
    overrides = None
    if form.validate_on_submit():
        # Not run_action: a third outcome, the confirmation asked before a type turns mandatory (409).
        try:
            new_key = service.update_type(
                current_user,
                key,
                new_key=form.key.data,
                confirmed=form.confirmed.data,
                routing=_routing(form),
                **_settings(form),
            )
        except service.NeedsConfirmation as exc:
            overrides = exc.overrides
        except Refused as exc:
            form.form_errors.append(str(exc))
        else:
            commit()
            flash(gettext("Type %(key)s saved.", key=new_key), "success")
            return redirect(url_for("console.types"))
    status = 422 if form.errors else 409 if overrides else 200
    return render_template("console/type_form.html", form=form, item=item, in_use=in_use, overrides=overrides), status
