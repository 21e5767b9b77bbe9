"""Template pages: the list, the editor per (type, channel, locale) with live preview, versions, restore."""

from __future__ import annotations

from flask import abort, flash, make_response, redirect, render_template, request, url_for
from flask_babel import gettext
from flask_login import current_user
from wtforms.fields.choices import SelectChoice

from app.console.actions import run_action
from app.console.blueprint import bp
from app.console.forms import MessageTemplateForm, TemplateForm
from app.console.listing import ListArgs
from app.delivery.channels import channel_for, template_channels
from app.digests import templates as digest_templates
from app.limits import LOCALE_MAX
from app.locales import normalize_locale
from app.message_templates import preview as previews
from app.message_templates import queries, service
from app.notification_types import queries as type_queries
from app.refusal import Refused
from app.tenants import queries as tenant_queries
from app.web.headers import preview_csp


def _template_channel_names() -> list[str]:
    return [channel.name for channel in template_channels()]


def _key_or_404(type_: str, channel: str, locale: str):
    item = type_queries.notification_type(type_)
    if item is None or channel not in _template_channel_names():
        abort(404)
    try:
        return item, normalize_locale(locale)
    except Refused:
        abort(404)


def _with_tenants(form: MessageTemplateForm, channel: str) -> MessageTemplateForm:
    """Offer every tenant in the e-mail preview (issue 32); other channels carry no branding, so no choice."""
    form.tenant.choices = [SelectChoice("", gettext("No tenant (Hato's own look)"))]
    if channel == "email":
        form.tenant.choices += [SelectChoice(row.key, f"{row.name} ({row.key})") for row in tenant_queries.choices()]
    return form


def _preview(item, channel: str, locale: str, form: MessageTemplateForm) -> previews.Preview:
    parts = {name: getattr(form, name).data or "" for name in channel_for(channel).template_parts}
    key = form.tenant.data or "" if channel == "email" else ""
    brand = tenant_queries.branding_of(key) if key else None
    if key and brand is None:
        preview = previews.Preview(channel=channel)
        preview.problems.append(previews.Problem("tenant", gettext("There is no tenant with this key.")))
        return preview
    return previews.build_preview(
        item,
        channel,
        locale,
        parts,
        form.user_locale.data or locale,
        form.sample.data,
        queries.template_locales(item.type, channel),
        brand=brand,
    )


@bp.get("/templates")
def templates():
    """Every template by type, channel and locale (search and filters); open the editor for a new one."""
    types = type_queries.notification_types()
    lf = ListArgs(request.args)
    q = lf.text("q")
    channel = lf.choice("channel", _template_channel_names(), gettext("channel"))
    type_ = lf.choice("type", [t["type"] for t in types], gettext("notification type"))
    locale = lf.text("locale", LOCALE_MAX)
    return render_template(
        "console/templates.html",
        templates=queries.message_templates(q=q, channel=channel, locale=locale, type_=type_),
        lf=lf,
        types=types,
        channels=_template_channel_names(),
        digest_locales=digest_templates.locales(),
    )


@bp.get("/templates/open")
def open_template():
    """Go to the editor for the (type, channel, locale) chosen in the list page's form."""
    # Not run_action: a check that changes nothing (no commit, no success message), then a redirect.
    try:
        locale = service.check_template_key(
            request.args.get("type", ""), request.args.get("channel", ""), request.args.get("locale", "")
        )
    except Refused as exc:
        flash(str(exc), "error")
        return redirect(url_for("console.templates"))
    return redirect(
        url_for("console.edit_template", type_=request.args["type"], channel=request.args["channel"], locale=locale)
    )


@bp.route("/templates/<type_>/<channel>/<locale>", methods=["GET", "POST"])
def edit_template(type_: str, channel: str, locale: str):
    """Edit one template; saving keeps the previous wording as a version."""
    item, locale = _key_or_404(type_, channel, locale)
    template = queries.message_template(type_, channel, locale)
    form = _with_tenants(MessageTemplateForm(obj=template), channel)
    if request.method == "GET":
        form.user_locale.data, form.sample.data = locale, previews.SAMPLE_JSON
    preview = _preview(item, channel, locale, form)
    status = 200
    confirm = False  # an SMS over the type's limit: warn at the field, save only on a second, confirmed submit
    if request.method == "POST" and form.validate_on_submit():
        warnings, confirmed = preview.warnings, bool(form.save_over_limit.data)
        if warnings and not confirmed:
            form.body_text.errors = [*form.body_text.errors, *warnings]
            confirm = True
        else:
            done = run_action(
                lambda: service.save_template(
                    current_user,
                    type_,
                    channel,
                    locale,
                    problems=[str(p) for p in preview.problems],
                    warnings=warnings,
                    confirmed=confirmed,
                    **{name: getattr(form, name).data or "" for name in service.PARTS},
                ),
                success=lambda saved: (
                    gettext("Template saved; the previous wording is kept below.")
                    if saved and template
                    else gettext("Template saved.")
                    if saved
                    else gettext("Nothing changed.")
                ),
                redirect_to=url_for("console.edit_template", type_=type_, channel=channel, locale=locale),
                form=form,
            )
            if done is not None:
                return done
    if form.errors or form.form_errors:
        status = 409 if confirm else 422
    versions = queries.template_versions(template.id) if template else []
    response = make_response(
        render_template(
            "console/template_editor.html",
            form=form,
            item=item,
            channel=channel,
            locale=locale,
            template=template,
            preview=preview,
            versions=versions,
            parts=channel_for(channel).template_parts,
            confirm=confirm,
        ),
        status,
    )
    response.headers["Content-Security-Policy"] = preview_csp()
    return response


@bp.post("/templates/<type_>/<channel>/<locale>/preview")
def preview_template(type_: str, channel: str, locale: str):
    """Render the editor's current wording (HTMX fragment, debounced while typing)."""
    item, locale = _key_or_404(type_, channel, locale)
    form = _with_tenants(MessageTemplateForm(), channel)
    return render_template(
        "console/_template_preview.html", preview=_preview(item, channel, locale, form), channel=channel, locale=locale
    )


@bp.post("/templates/<int:template_id>/versions/<int:version_id>/restore")
def restore_template(template_id: int, version_id: int):
    """Make a kept version current again (the current one is kept too)."""
    return run_action(
        lambda: service.restore_template_version(current_user, template_id, version_id),
        success=gettext("Version restored; the wording it replaced is kept as a version."),
        redirect_to=lambda template: url_for(
            "console.edit_template", type_=template.type, channel=template.channel, locale=template.locale
        ),
        refused_to=url_for("console.templates"),
    )


# --- the digest e-mail's wording per locale (app/digests/templates.py) -------------------------------


def _digest_preview(form: TemplateForm, locale: str) -> digest_templates.Preview:
    return digest_templates.preview(
        form.subject.data or "", form.body_text.data or "", form.body_html.data or "", locale
    )


@bp.route("/templates/digest/<locale>", methods=["GET", "POST"])
def edit_digest_template(locale: str):
    """Edit the digest e-mail's wording for one locale, previewed with a sample user and sample items."""
    try:
        locale = normalize_locale(locale)
    except Refused:
        abort(404)
    template = digest_templates.digest_template(locale)
    form = TemplateForm(obj=template)
    preview = _digest_preview(form, locale)
    status = 200
    if request.method == "POST" and form.validate_on_submit():
        parts = {name: getattr(form, name).data or "" for name in digest_templates.PARTS}
        done = run_action(
            lambda: digest_templates.save(current_user, locale, problems=preview.problems, **parts),
            success=lambda saved: gettext("Digest template saved.") if saved else gettext("Nothing changed."),
            redirect_to=url_for("console.edit_digest_template", locale=locale),
            form=form,
        )
        if done is not None:
            return done
    if form.errors or form.form_errors:
        status = 422
    response = make_response(
        render_template(
            "console/digest_template_editor.html", form=form, locale=locale, template=template, preview=preview
        ),
        status,
    )
    response.headers["Content-Security-Policy"] = preview_csp()
    return response


@bp.post("/templates/digest/<locale>/preview")
def preview_digest_template(locale: str):
    """Render the editor's current digest wording (HTMX fragment)."""
    try:
        locale = normalize_locale(locale)
    except Refused:
        abort(404)
    return render_template("console/_digest_preview.html", preview=_digest_preview(TemplateForm(), locale))
