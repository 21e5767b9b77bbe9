"""Campaign writes: create a draft (with its checked audience), send or schedule it, cancel, resume, delete.

A campaign is created as a draft so the operator sees its audience (and, for an uploaded list, the
unknown ids and bad lines that were left out) before anything is sent. Every function validates
before its first write, writes its audit row and flushes; none commits. Sending now and resuming
register the fanout job, which is enqueued only if the caller's transaction commits.
"""

from __future__ import annotations

import json
from datetime import datetime

import sqlalchemy as sa
from flask_babel import format_number, gettext

from app.audit import service as audit
from app.campaigns import csv_audience, fanout, queries
from app.clock import PAST_GRACE, db_now
from app.extensions import db
from app.limits import DATA_MAX_BYTES, NAME_MAX, OPERATOR_BODY_MAX, TITLE_MAX
from app.links import same_site_path
from app.locales import normalize_locale
from app.models import AUDIENCE_KINDS, Campaign, NotificationType
from app.queueing import fanout_job
from app.refusal import Refused
from app.unitofwork import after_commit

FIELDS = (
    "name",
    "type",
    "title",
    "body",
    "link_path",
    "data",
    "audience_kind",
    "audience_locale",
    "status",
    "scheduled_at",
    "total",
    "done",
    "cursor_user_id",
)

RECIPIENTS_SQL = sa.text(
    """
INSERT INTO campaign_recipients (campaign_id, user_id)
SELECT :campaign_id, u.id
FROM unnest(CAST(:refs AS text[])) AS e(ref)
JOIN users u ON u.external_id = e.ref
ON CONFLICT DO NOTHING
"""
)


def parse_data(text: str | None) -> dict:
    """Parse the campaign's data (a JSON object the templates can use); raise Refused."""
    if not (text or "").strip():
        return {}
    if len(text.encode("utf-8")) > DATA_MAX_BYTES:
        raise Refused(gettext("The data must be at most %(max)s bytes of JSON.", max=format_number(DATA_MAX_BYTES)))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Refused(
            gettext(
                "The data is not valid JSON: %(error)s (line %(line)s, column %(column)s).",
                error=exc.msg,
                line=exc.lineno,
                column=exc.colno,
            )
        ) from None
    if not isinstance(value, dict):
        raise Refused(gettext('The data must be a JSON object, like {"code": "SPRING"}.'))
    return value


def _check_content(name: str, type_: str, title: str, body: str, link_path: str | None) -> None:
    if not name.strip() or len(name) > NAME_MAX:
        raise Refused(gettext("The name must have 1 to %(max)s characters.", max=NAME_MAX))
    if db.session.get(NotificationType, type_) is None:
        raise Refused(gettext("There is no notification type %(type)s.", type=repr(type_)))
    if not title.strip() or len(title) > TITLE_MAX:
        raise Refused(gettext("The title must have 1 to %(max)s characters.", max=TITLE_MAX))
    if not body.strip() or len(body) > OPERATOR_BODY_MAX:
        raise Refused(gettext("The body must have 1 to %(max)s characters.", max=format_number(OPERATOR_BODY_MAX)))
    # A link is a path inside the product: never another site (the inbox renders it as a plain href).
    if link_path and not same_site_path(link_path):
        raise Refused(gettext("The link must be a path in the product starting with / (like /offers/spring)."))


def _audience(kind: str, locale: str | None, list_file: bytes | None):
    """Validate the audience; return (locale, parsed list, unknown ids) without writing anything."""
    if kind not in AUDIENCE_KINDS:
        raise Refused(gettext("Choose an audience: everyone, a locale, or an uploaded list."))
    if kind == "locale":
        return normalize_locale(locale or ""), None, []
    if kind == "list":
        if not list_file:
            raise Refused(gettext("Upload the list of external ids (a .csv or .txt file, one id per line)."))
        try:
            parsed = csv_audience.parse(list_file)
        except csv_audience.ListError as exc:
            raise Refused(str(exc)) from None
        unknown = queries.unknown_external_ids(parsed.ids)
        if len(unknown) == len(parsed.ids):
            raise Refused(
                gettext(
                    "None of the %(count)s ids in the file is a known user (first: %(first)s). Nothing was created.",
                    count=format_number(len(parsed.ids)),
                    first=repr(unknown[0]),
                )
            )
        return None, parsed, unknown
    return None, None, []


def create_campaign(
    actor,
    *,
    name: str,
    type_: str,
    title: str,
    body: str,
    link_path: str | None = None,
    data: dict | None = None,
    audience_kind: str = "all",
    audience_locale: str | None = None,
    list_file: bytes | None = None,
) -> Campaign:
    """Create a draft campaign; an uploaded list is checked and its known users stored as recipients."""
    link_path = (link_path or "").strip() or None
    _check_content(name, type_, title, body, link_path)
    locale, parsed, unknown = _audience(audience_kind, audience_locale, list_file)
    campaign = Campaign(
        name=name.strip(),
        type=type_,
        title=title.strip(),
        body=body,
        link_path=link_path,
        data=data or {},
        audience_kind=audience_kind,
        audience_locale=locale,
        status="draft",
        created_by=getattr(actor, "id", None),
    )
    db.session.add(campaign)
    db.session.flush()
    if parsed is not None:
        db.session.execute(RECIPIENTS_SQL, {"campaign_id": campaign.id, "refs": parsed.ids})
        campaign.audience_report = csv_audience.report(parsed, unknown, len(parsed.ids) - len(unknown))
    campaign.total = fanout.audience_size(audience_kind, locale, campaign.id)
    db.session.flush()
    audit.record(actor, "campaign.create", "campaign", campaign.id, after=_snapshot(campaign))
    return campaign


def _status(campaign: Campaign) -> str:
    """The campaign's status as the operator reads it."""
    return str(queries.STATUS_LABELS.get(campaign.status, campaign.status))


def _locked(campaign_id: int) -> Campaign:
    campaign = db.session.get(Campaign, campaign_id, with_for_update=True, populate_existing=True)
    if campaign is None:
        raise Refused(gettext("That campaign no longer exists."))
    return campaign


def _snapshot(campaign: Campaign) -> dict:
    snap = audit.snapshot(campaign, FIELDS)
    if campaign.audience_report:
        report = campaign.audience_report
        snap["audience_report"] = {k: report[k] for k in ("recipients", "unknown_count", "bad_count", "duplicates")}
    return snap


def _change(actor, campaign: Campaign, action: str, **values) -> None:
    before = _snapshot(campaign)
    for name, value in values.items():
        setattr(campaign, name, value)
    db.session.flush()
    audit.record(actor, action, "campaign", campaign.id, before=before, after=_snapshot(campaign))


def send_campaign(actor, campaign_id: int, at: datetime | None = None) -> bool:
    """Send a draft now (its fanout job follows the commit) or schedule it for `at`; return True for now."""
    campaign = _locked(campaign_id)
    if campaign.status != "draft":
        raise Refused(
            gettext("This campaign is %(status)s: only a draft can be sent or scheduled.", status=_status(campaign))
        )
    now = db_now()
    if at is not None and at < now - PAST_GRACE:
        raise Refused(gettext("That time has passed: choose a future time or send now."))
    if campaign.total == 0:
        raise Refused(gettext("The audience is empty: nobody would receive this campaign."))
    when = at if at is not None and at > now else now
    _change(
        actor, campaign, "campaign.send" if when == now else "campaign.schedule", status="scheduled", scheduled_at=when
    )
    if when == now:
        after_commit(fanout_job(campaign.id))  # a scheduled one is started by the sweeper when due
    return when == now


def cancel_campaign(actor, campaign_id: int) -> None:
    """Stop a scheduled or running campaign; a running fanout stops after its batch in progress.

    The lock on the campaign row waits for that batch to commit, so what it wrote stays (and its
    deliveries go out); no batch starts afterwards.
    """
    campaign = _locked(campaign_id)
    if campaign.status not in queries.LIVE_STATUSES:
        raise Refused(
            gettext(
                "This campaign is %(status)s: only a scheduled or running one can be cancelled.",
                status=_status(campaign),
            )
        )
    _change(actor, campaign, "campaign.cancel", status="cancelled", finished_at=db_now())


def resume_campaign(actor, campaign_id: int) -> None:
    """Start a failed campaign's fanout again; it continues from its cursor (nothing is written twice)."""
    campaign = _locked(campaign_id)
    if campaign.status != "failed":
        raise Refused(
            gettext("This campaign is %(status)s: only a failed one can be resumed.", status=_status(campaign))
        )
    _change(actor, campaign, "campaign.resume", status="scheduled", scheduled_at=db_now(), error=None)
    after_commit(fanout_job(campaign.id))


def delete_draft(actor, campaign_id: int) -> None:
    """Delete a draft (and its uploaded recipients); campaigns that went out are kept for the record."""
    campaign = _locked(campaign_id)
    if campaign.status != "draft":
        raise Refused(gettext("This campaign is %(status)s: only a draft can be deleted.", status=_status(campaign)))
    before = _snapshot(campaign)
    db.session.delete(campaign)
    db.session.flush()
    audit.record(actor, "campaign.delete", "campaign", campaign_id, before=before)
