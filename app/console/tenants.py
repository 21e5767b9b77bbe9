"""Tenant pages (issue 32): the list, the editor (name and branding), its default preferences and limits, delete."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_babel import gettext
from flask_login import current_user

from app.console.actions import run_action, set_quota
from app.console.blueprint import bp
from app.console.forms import TenantForm
from app.console.listing import ListArgs
from app.delivery.channels import member_channels
from app.notification_types import queries as type_queries
from app.tenants import queries, service
from app.unitofwork import commit

# A default's three states in the editor's grid: the type's own default, on, off.
DEFAULT_STATES = ("", "on", "off")


def _grid(tenant) -> dict:
    """What the defaults grid shows: the types, the channels members choose, and the tenant's settings."""
    return {
        "types": type_queries.notification_types(),
        "channels": [c.name for c in member_channels()],
        "defaults": queries.preferences(tenant.id) if tenant is not None else {},
    }


def _fields(form: TenantForm) -> dict:
    return {name: getattr(form, name).data for name in service.SETTINGS}


def _save(form: TenantForm, key: str):
    """Save the form; a field the service refuses gets its message and nothing is stored (None: re-render)."""
    try:
        item, created = service.put_tenant(current_user, key, _fields(form))
    except service.TenantInvalid as exc:
        for field, message in exc.problems:
            getattr(form, field, form.key).errors.append(str(message))
        return None
    commit()
    flash(gettext("Tenant %(key)s saved.", key=item.key), "success")
    return redirect(url_for("console.edit_tenant", key=item.key))


@bp.get("/tenants")
def tenants():
    """Every tenant with its member count; search by key or name."""
    lf = ListArgs(request.args)
    return render_template("console/tenants.html", tenants=queries.tenants(lf.text("q")), lf=lf)


@bp.route("/tenants/new", methods=["GET", "POST"])
def new_tenant():
    """Create a tenant."""
    form = TenantForm()
    if form.validate_on_submit():
        if queries.tenant(form.key.data) is not None:
            form.key.errors.append(gettext("A tenant already has this key."))
        else:
            done = _save(form, form.key.data)
            if done is not None:
                return done
    return render_template("console/tenant_form.html", form=form, item=None, **_grid(None)), (
        422 if form.errors else 200
    )


@bp.route("/tenants/<key>/edit", methods=["GET", "POST"])
def edit_tenant(key: str):
    """Edit a tenant's name and branding (its key names it in the product: it stays)."""
    item = queries.tenant(key)
    if item is None:
        return render_template("console/missing.html", what="tenant"), 404
    form = TenantForm(obj=item)
    form.key.data = item.key  # never renamed here, whatever was posted
    if form.validate_on_submit():
        done = _save(form, item.key)
        if done is not None:
            return done
    return render_template("console/tenant_form.html", form=form, item=item, **_grid(item)), (
        422 if form.errors else 200
    )


@bp.post("/tenants/<key>/quota")
def tenant_quota(key: str):
    """Set the tenant's rate and daily quota of notifications (audited); its next requests count against them."""
    return set_quota(
        lambda rate, burst, daily: service.set_quota(current_user, key, rate, burst, daily),
        gettext("Tenant %(key)s now has these limits.", key=key),
        gettext("Tenant %(key)s already had these limits.", key=key),
        url_for("console.edit_tenant", key=key, _anchor="tenant-limits"),
    )


@bp.post("/tenants/<key>/preferences")
def tenant_preferences(key: str):
    """Replace the tenant's default preferences with the grid's choices."""
    item = queries.tenant(key)
    if item is None:
        return render_template("console/missing.html", what="tenant"), 404
    channels = {c.name for c in member_channels()}
    defaults = []
    for name, value in request.form.items():
        parts = name.split(":")
        if len(parts) == 3 and parts[0] == "pref" and parts[2] in channels and value in ("on", "off"):
            defaults.append((parts[1], parts[2], value == "on"))
    return run_action(
        lambda: service.set_preferences(current_user, item, defaults),
        success=gettext("Default preferences of %(key)s saved.", key=item.key),
        redirect_to=url_for("console.edit_tenant", key=item.key) + "#tenant-defaults",
    )


@bp.post("/tenants/<key>/delete")
def delete_tenant(key: str):
    """Delete the tenant with its memberships and defaults (its notifications stay)."""
    if service.delete_tenant(current_user, key):
        commit()
        flash(gettext("Tenant %(key)s deleted.", key=key), "success")
    return redirect(url_for("console.tenants"))
