"""Suppression pages: find an address (prefix, keyset pages), see why it is suppressed, lift it."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user

from app.console.blueprint import bp
from app.limits import EMAIL_MAX
from app.refusal import Refused
from app.suppressions import queries, service
from app.unitofwork import commit


@bp.get("/suppressions")
def suppressions():
    """Suppressed addresses starting with ?q=, fifty at a time."""
    q = request.args.get("q", "")[:EMAIL_MAX]
    page = queries.suppressions(q, request.args.get("after", "")[:EMAIL_MAX])
    return render_template("console/suppressions.html", q=q, page=page)


@bp.post("/suppressions/lift")
def lift_suppression():
    """Lift one suppression (the address gets e-mail again); audited."""
    address = request.form.get("address", "")
    try:
        service.lift_suppression(current_user, address)
    except Refused as exc:
        flash(str(exc), "error")
    else:
        commit()
        flash(f"{address.strip().lower()} can receive e-mail again.", "success")
    return redirect(url_for("console.suppressions", q=request.form.get("q", "")))
