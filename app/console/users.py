"""User pages (admins only): search by e-mail, external id or name; change a role."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_babel import gettext
from flask_login import current_user

from app.auth.access import admin_required
from app.console.actions import run_action
from app.console.blueprint import bp
from app.console.forms import RoleForm
from app.console.labels import ROLE_LABELS
from app.console.listing import ListArgs
from app.limits import EMAIL_MAX
from app.models import ROLES
from app.pagination import parse_id_cursor
from app.users import queries, service


@bp.get("/users")
@admin_required
def users():
    """Search users; fifty per page, keyset on id."""
    lf = ListArgs(request.args)
    q = lf.text("q", EMAIL_MAX)
    role = lf.choice("role", ROLES, gettext("role"))
    after = parse_id_cursor(request.args.get("after")) or 0
    page = queries.search_users(q, role, after)
    return render_template("console/users.html", q=q, role=role, roles=ROLES, page=page, form=RoleForm(), lf=lf)


@bp.post("/users/<int:user_id>/role")
@admin_required
def change_role(user_id: int):
    """Change one user's role (never the last admin's); audited."""
    form = RoleForm()
    if not form.validate_on_submit():
        flash(gettext("Choose one of the roles."), "error")
        return redirect(url_for("console.users", q=request.form.get("q", "")))
    return run_action(
        lambda: service.change_role(current_user, user_id, form.role.data),
        success=lambda target: gettext("%(user)s is now %(role)s.", user=target.email, role=role_label(target.role)),
        redirect_to=url_for("console.users", q=request.form.get("q", "")),
    )


def role_label(role: str) -> str:
    """A role as operators read it, in their language."""
    return str(ROLE_LABELS.get(role, role))
