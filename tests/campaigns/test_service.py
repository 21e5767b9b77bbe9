"""Campaign writes: drafts with a checked audience, send/schedule/cancel/resume/delete, audit rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from app.campaigns import service
from app.clock import db_now
from app.extensions import db
from app.models import AuditEntry, Campaign, CampaignRecipient
from app.refusal import Refused


def _campaign_rows() -> int:
    return db.session.execute(sa.select(sa.func.count()).select_from(Campaign)).scalar_one()


def _actions() -> list[str]:
    return list(db.session.scalars(sa.select(AuditEntry.action).order_by(AuditEntry.id)))


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"name": " "}, "name must have"),
        ({"type_": "nope"}, "no notification type"),
        ({"title": "x" * 201}, "title must have"),
        ({"body": ""}, "body must have"),
        ({"link_path": "https://evil.example/"}, "path in the product"),
        ({"link_path": "//evil.example/"}, "path in the product"),
        ({"audience_kind": "friends"}, "Choose an audience"),
        ({"audience_kind": "locale", "audience_locale": "english!"}, "locale must look like"),
        ({"audience_kind": "list", "list_file": None}, "Upload the list"),
        ({"audience_kind": "list", "list_file": b"\xff\xfe"}, "not UTF-8"),
        ({"audience_kind": "list", "list_file": b"ghost-1\nghost-2\n"}, "None of the 2 ids"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(operator, promo, fields, message):
    values = dict(name="Spring", type_=promo.type, title="Hello", body="Body") | fields

    with pytest.raises(Refused, match=message):
        service.create_campaign(operator, **values)

    assert _campaign_rows() == 0 and _actions() == []


@pytest.mark.parametrize(
    "text, message",
    [
        ("[1, 2]", "must be a JSON object"),
        ("{bad json", "not valid JSON"),
        ('{"a": "' + "x" * 10_001 + '"}', "at most 10,000 bytes"),
    ],
)
def test_data_must_be_a_small_json_object(text, message):
    with pytest.raises(Refused, match=message):
        service.parse_data(text)


def test_a_list_keeps_known_users_and_reports_the_rest(operator, promo, make_users):
    ids = make_users(3, prefix="c")

    campaign = service.create_campaign(
        operator,
        name="List",
        type_=promo.type,
        title="t",
        body="b",
        audience_kind="list",
        list_file=b"id\nc-1\nc-3\nc-1\nstranger\na,b\n\nc-2\n",
    )

    assert campaign.status == "draft" and campaign.total == 3
    recipients = db.session.scalars(
        sa.select(CampaignRecipient.user_id).where(CampaignRecipient.campaign_id == campaign.id)
    ).all()
    assert sorted(recipients) == ids
    report = campaign.audience_report
    assert (report["recipients"], report["unknown"], report["duplicates"], report["header"]) == (
        3,
        ["stranger"],
        1,
        True,
    )
    assert report["bad_lines"] == [
        {"line": 6, "text": "a,b", "problem": "more than one value on the line (one external id per line)"}
    ]
    entry = db.session.scalars(sa.select(AuditEntry)).one()
    assert entry.action == "campaign.create"
    assert entry.after["audience_report"] == {"recipients": 3, "unknown_count": 1, "bad_count": 1, "duplicates": 1}


def test_send_now_schedule_cancel_and_delete(operator, promo, make_users):
    make_users(2)
    now_one = service.create_campaign(operator, name="Now", type_=promo.type, title="t", body="b")
    later = service.create_campaign(operator, name="Later", type_=promo.type, title="t", body="b")
    draft = service.create_campaign(operator, name="Draft", type_=promo.type, title="t", body="b")
    db.session.flush()

    assert service.send_campaign(operator, now_one.id) is True
    assert service.send_campaign(operator, later.id, db_now() + timedelta(hours=2)) is False
    with pytest.raises(Refused, match="only a draft"):
        service.send_campaign(operator, now_one.id)
    with pytest.raises(Refused, match="has passed"):
        service.send_campaign(operator, draft.id, db_now() - timedelta(hours=1))
    with pytest.raises(Refused, match="only a draft can be deleted"):
        service.delete_draft(operator, later.id)

    service.cancel_campaign(operator, later.id)
    service.delete_draft(operator, draft.id)

    assert (later.status, now_one.status) == ("cancelled", "scheduled")
    assert db.session.get(Campaign, draft.id) is None
    with pytest.raises(Refused, match="only a scheduled or running one"):
        service.cancel_campaign(operator, later.id)
    with pytest.raises(Refused, match="only a failed one"):
        service.resume_campaign(operator, later.id)
    assert _actions() == ["campaign.create"] * 3 + [
        "campaign.send",
        "campaign.schedule",
        "campaign.cancel",
        "campaign.delete",
    ]


def test_an_empty_audience_cannot_be_sent(operator, promo):
    campaign = service.create_campaign(
        operator, name="Nobody", type_=promo.type, title="t", body="b", audience_kind="locale", audience_locale="pt-br"
    )
    with pytest.raises(Refused, match="audience is empty"):
        service.send_campaign(operator, campaign.id)
    assert campaign.status == "draft"
