"""Campaign pages: list, create a draft, review its audience, send now or schedule, cancel, resume.

The fanout runs in a job (app/campaigns/fanout.py); it is enqueued after the view's commit. The progress bar is
a fragment the page polls every second while the campaign is scheduled or running.
"""

from __future__ import annotations

from flask import current_app, flash, redirect, render_template, request, url_for
from flask_babel import gettext, lazy_gettext
from flask_login import current_user
from flask_wtf import FlaskForm
from flask_wtf.file import FileField
from wtforms import DateTimeLocalField, RadioField, SelectField, StringField, TextAreaField
from wtforms.validators import DataRequired, Length, Optional, ValidationError

from app.campaigns import csv_audience, queries, service
from app.console.actions import run_action
from app.console.blueprint import bp, operator_zone
from app.console.forms import choices
from app.console.listing import ListArgs
from app.limits import LINK_MAX, LOCALE_MAX, NAME_MAX, OPERATOR_BODY_MAX, TITLE_MAX
from app.notification_types import queries as type_queries
from app.refusal import Refused
from app.timezones import LOCAL_FORMAT, aware
from app.unitofwork import commit

# How long sending waits to tell whether the fanout job reached the queue.
HANDOFF_WAIT_SECONDS = 2.0
AUDIENCES = {
    "all": lazy_gettext("Everyone"),
    "locale": lazy_gettext("Users of a locale"),
    "list": lazy_gettext("An uploaded list of external ids"),
}


class CampaignForm(FlaskForm):
    """What to send and to whom (when is chosen on the review page)."""

    name = StringField(lazy_gettext("Name (for operators)"), validators=[DataRequired(), Length(max=NAME_MAX)])
    type = SelectField(lazy_gettext("Notification type"), validators=[DataRequired()])
    title = StringField(lazy_gettext("Title"), validators=[DataRequired(), Length(max=TITLE_MAX)])
    body = TextAreaField(lazy_gettext("Body"), validators=[DataRequired(), Length(max=OPERATOR_BODY_MAX)])
    link_path = StringField(lazy_gettext("Link (optional)"), validators=[Optional(), Length(max=LINK_MAX)])
    payload = TextAreaField(lazy_gettext("Data for the templates (JSON, optional)"), validators=[Optional()])
    audience = RadioField(lazy_gettext("Audience"), choices=choices(AUDIENCES), default="all")
    locale = StringField(lazy_gettext("Locale"), validators=[Optional(), Length(max=LOCALE_MAX)])
    list_file = FileField(lazy_gettext("List of external ids"))


class SendForm(FlaskForm):
    """Send a reviewed draft now or at a time."""

    when = RadioField(
        lazy_gettext("When"),
        choices=choices({"now": lazy_gettext("Now"), "at": lazy_gettext("At a time")}),
        default="now",
    )
    send_at = DateTimeLocalField(lazy_gettext("Send at"), format=LOCAL_FORMAT, validators=[Optional()])

    def validate_when(self, field) -> None:
        """A scheduled send needs its time."""
        if field.data == "at" and self.send_at.data is None:
            raise ValidationError(gettext("Choose when to send, or send now."))


def _list_bytes(form: CampaignForm) -> bytes | None:
    upload = form.list_file.data
    # One byte over the limit is enough for the parser to refuse the file; never read more.
    return upload.read(csv_audience.MAX_BYTES + 1) if upload and form.audience.data == "list" else None


@bp.get("/campaigns")
def campaigns():
    """Every campaign, newest first, with its progress; search by name or title, narrow by status and type."""
    types = type_queries.notification_types()
    lf = ListArgs(request.args)
    q = lf.text("q")
    status = lf.choice("status", queries.STATUSES, gettext("status"))
    type_ = lf.choice("type", [t["type"] for t in types], gettext("notification type"))
    page = queries.campaign_page(request.args.get("cursor"), q=q, status=status, type_=type_)
    return render_template("console/campaigns.html", page=page, lf=lf, types=types, statuses=queries.STATUSES)


@bp.route("/campaigns/new", methods=["GET", "POST"])
def new_campaign():
    """Create a draft campaign (its audience is checked and shown before anything is sent)."""
    form = CampaignForm()
    form.type.choices = [(t["type"], f"{t['label']} ({t['type']})") for t in type_queries.notification_types()]
    if form.validate_on_submit():
        done = run_action(
            lambda: service.create_campaign(
                current_user,
                name=form.name.data,
                type_=form.type.data,
                title=form.title.data,
                body=form.body.data,
                link_path=form.link_path.data,
                data=service.parse_data(form.payload.data),
                audience_kind=form.audience.data,
                audience_locale=form.locale.data,
                list_file=_list_bytes(form),
            ),
            success=gettext("Draft saved: check the audience below, then send or schedule it."),
            redirect_to=lambda campaign: url_for("console.campaign", campaign_id=campaign.id),
            form=form,
        )
        if done is not None:
            return done
    locales = queries.known_locales(current_app.config["DEFAULT_LOCALE"])
    return render_template("console/campaigns_form.html", form=form, locales=locales), 422 if form.errors else 200


@bp.get("/campaigns/<int:campaign_id>")
def campaign(campaign_id: int):
    """One campaign: its content and audience, progress, and per-channel results."""
    item = queries.campaign(campaign_id)
    if item is None:
        return render_template("console/missing.html", what="campaign"), 404
    stats = queries.campaign_stats(campaign_id) if item.status != "draft" else None
    return render_template(
        "console/campaigns_detail.html", item=item, progress=queries.progress(campaign_id), stats=stats, form=SendForm()
    )


@bp.post("/campaigns/<int:campaign_id>/send")
def send_campaign(campaign_id: int):
    """Send a draft now (the fanout job is enqueued after the commit) or schedule it."""
    form = SendForm()
    if not form.validate_on_submit():
        flash(" ".join(e for errors in form.errors.values() for e in errors), "error")
        return redirect(url_for("console.campaign", campaign_id=campaign_id))
    at = aware(form.send_at.data, operator_zone()) if form.when.data == "at" else None
    # Not run_action: the message depends on what the commit's hand-off says of the job queue.
    try:
        now = service.send_campaign(current_user, campaign_id, at)
    except Refused as exc:
        flash(str(exc), "error")
        return redirect(url_for("console.campaign", campaign_id=campaign_id))
    handoff = commit()
    # The operator learns at once if the job queue is down (the sweeper then starts the fanout).
    if now and not handoff.wait(HANDOFF_WAIT_SECONDS).get("jobs"):
        flash(
            gettext("Sending: the job queue did not answer, so the sweeper will start the fanout shortly."), "success"
        )
    else:
        flash(gettext("Sending now.") if now else gettext("Scheduled."), "success")
    return redirect(url_for("console.campaign", campaign_id=campaign_id))


ACTIONS = {
    "cancel": (service.cancel_campaign, lazy_gettext("Cancelled: the fanout stops after the batch in progress.")),
    "resume": (service.resume_campaign, lazy_gettext("Resumed from where the fanout stopped.")),
    "delete": (service.delete_draft, lazy_gettext("Draft deleted.")),
}


@bp.post("/campaigns/<int:campaign_id>/<any(cancel, resume, delete):action>")
def campaign_action(campaign_id: int, action: str):
    """Cancel a scheduled/running campaign, resume a failed one, or delete a draft."""
    change, message = ACTIONS[action]
    here = url_for("console.campaign", campaign_id=campaign_id)
    # A resumed campaign's fanout job follows the commit (or the sweeper starts it).
    return run_action(
        lambda: change(current_user, campaign_id),
        success=message,
        redirect_to=url_for("console.campaigns") if action == "delete" else here,
        refused_to=here,
    )


@bp.get("/campaigns/<int:campaign_id>/progress")
def campaign_progress(campaign_id: int):
    """The progress bar fragment (polled while the campaign is scheduled or running)."""
    progress = queries.progress(campaign_id)
    if progress is None:
        return "", 404
    return render_template("console/_progress.html", progress=progress)


@bp.get("/campaigns/<int:campaign_id>/results")
def campaign_results(campaign_id: int):
    """The per-channel results fragment (polled while deliveries are still waiting)."""
    progress = queries.progress(campaign_id)
    if progress is None:
        return "", 404
    return render_template(
        "console/_campaign_results.html", progress=progress, stats=queries.campaign_stats(campaign_id)
    )
