"""Suppression pages: find an address (prefix, keyset pages), see why it is suppressed, lift it."""

from __future__ import annotations

from flask import render_template, request, url_for
from flask_babel import gettext
from flask_login import current_user

from app.console.actions import run_action
from app.console.blueprint import bp
from app.console.listing import ListArgs
from app.limits import EMAIL_MAX
from app.models import SUPPRESSION_REASONS
from app.suppressions import queries, service


@bp.get("/suppressions")
def suppressions():
    """Suppressed addresses starting with ?q=, fifty at a time."""
    lf = ListArgs(request.args)
    q = lf.text("q", EMAIL_MAX)
    reason = lf.choice("reason", SUPPRESSION_REASONS, gettext("reason"))
    page = queries.suppressions(q, request.args.get("after", "")[:EMAIL_MAX], reason=reason)
    return render_template(
        "console/suppressions.html", q=q, reason=reason, reasons=SUPPRESSION_REASONS, page=page, lf=lf
    )


@bp.post("/suppressions/lift")
def lift_suppression():
    """Lift one suppression (the address gets e-mail again); audited."""
    address = request.form.get("address", "")
    return run_action(
        lambda: service.lift_suppression(current_user, address),
        success=gettext("%(address)s can receive e-mail again.", address=address.strip().lower()),
        redirect_to=url_for(
            "console.suppressions", q=request.form.get("q", ""), reason=request.form.get("reason") or None
        ),
    )
