"""API key pages (admins only): list, create (the key is shown once), set scopes, revoke; all audited."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_babel import gettext
from flask_login import current_user

from app.api_keys import queries, service
from app.api_keys.scopes import SCOPE_LABELS, SCOPES
from app.auth.access import admin_required
from app.console.actions import run_action, set_quota
from app.console.blueprint import bp
from app.console.forms import ApiKeyForm, ApiKeyScopesForm
from app.console.listing import ListArgs
from app.refusal import Refused
from app.unitofwork import commit


def _page(form: ApiKeyForm, new_key: str | None = None, status: int = 200):
    lf = ListArgs(request.args)
    q = lf.text("q")
    state = lf.choice("state", queries.STATES, gettext("state"))
    scope = lf.choice("scope", SCOPES, gettext("scope"))
    keys = queries.api_keys(q=q, state=state, scope=scope)
    return render_template(
        "console/api_keys.html",
        keys=keys,
        form=form,
        new_key=new_key,
        scopes=SCOPE_LABELS,
        scope_options=[(name, name) for name in SCOPES],
        lf=lf,
    ), status


@bp.get("/api-keys")
@admin_required
def api_keys():
    """Every API key, live ones first."""
    return _page(ApiKeyForm())


@bp.post("/api-keys")
@admin_required
def create_api_key():
    """Create a key and show it this once (it is rendered, never put in the session or a redirect)."""
    form = ApiKeyForm()
    if not form.validate_on_submit():
        return _page(form, status=422)
    # Not run_action: the new key is rendered this once (201), never flashed or redirected.
    try:
        key = service.create_api_key(current_user, form.name.data, form.scopes.data)
    except Refused as exc:
        form.form_errors.append(str(exc))
        return _page(form, status=422)
    commit()
    return _page(ApiKeyForm(formdata=None), new_key=key, status=201)


@bp.post("/api-keys/<prefix>/scopes")
@admin_required
def set_api_key_scopes(prefix: str):
    """Give a live key exactly the ticked scopes (audited); the key's next request sees them."""
    form = ApiKeyScopesForm()
    if not form.validate_on_submit():
        flash(" ".join(form.scopes.errors) or gettext("Choose at least one scope."), "error")
        return redirect(url_for("console.api_keys"))
    scopes = ", ".join(form.scopes.data)
    return run_action(
        lambda: service.set_scopes(current_user, prefix, form.scopes.data),
        success=lambda changed: (
            gettext("Key %(prefix)s… now has: %(scopes)s.", prefix=prefix, scopes=scopes)
            if changed
            else gettext("Key %(prefix)s… already had: %(scopes)s.", prefix=prefix, scopes=scopes)
        ),
        redirect_to=url_for("console.api_keys", _anchor=f"key-{prefix}"),
    )


@bp.post("/api-keys/<prefix>/quota")
@admin_required
def set_api_key_quota(prefix: str):
    """Set a live key's rate and daily quota of notifications (audited); its next requests count against them."""
    return set_quota(
        lambda rate, burst, daily: service.set_quota(current_user, prefix, rate, burst, daily),
        gettext("Key %(prefix)s… now has these limits.", prefix=prefix),
        gettext("Key %(prefix)s… already had these limits.", prefix=prefix),
        url_for("console.api_keys", _anchor=f"key-{prefix}"),
    )


@bp.post("/api-keys/<prefix>/revoke")
@admin_required
def revoke_api_key(prefix: str):
    """Revoke a key at once."""
    return run_action(
        lambda: service.revoke_api_key(current_user, prefix),
        success=gettext("Key %(prefix)s… revoked: requests with it now get 401.", prefix=prefix),
        redirect_to=url_for("console.api_keys"),
    )
