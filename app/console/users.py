"""User pages (admins only): search by e-mail, external id or name; change a role."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user

from app.auth.access import admin_required
from app.console.blueprint import bp
from app.console.forms import RoleForm
from app.limits import EMAIL_MAX
from app.models import ROLES
from app.refusal import Refused
from app.unitofwork import commit
from app.users import queries, service


@bp.get("/users")
@admin_required
def users():
    """Search users; fifty per page, keyset on id."""
    q = request.args.get("q", "")[:EMAIL_MAX]
    role = request.args.get("role", "")
    role = role if role in ROLES else ""
    after = request.args.get("after", "")
    page = queries.search_users(q, role, int(after) if after.isdigit() else 0)
    return render_template("console/users.html", q=q, role=role, roles=ROLES, page=page, form=RoleForm())


@bp.post("/users/<int:user_id>/role")
@admin_required
def change_role(user_id: int):
    """Change one user's role (never the last admin's); audited."""
    form = RoleForm()
    if not form.validate_on_submit():
        flash("Choose one of the roles.", "error")
        return redirect(url_for("console.users", q=request.form.get("q", "")))
    try:
        target = service.change_role(current_user, user_id, form.role.data)
    except Refused as exc:
        flash(str(exc), "error")
    else:
        commit()
        flash(f"{target.email} is now {target.role}.", "success")
    return redirect(url_for("console.users", q=request.form.get("q", "")))
