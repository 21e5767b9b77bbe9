"""Campaign pages: create a draft (all, locale, list), review its audience, send, schedule, cancel, live bar."""

from __future__ import annotations

import io
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from app.campaigns import fanout, service
from app.clock import db_now
from app.extensions import db
from app.models import Campaign
from jobs.fanout import fanout_campaign
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.html import first, one, parse, texts

TOKYO = ZoneInfo("Asia/Tokyo")


@pytest.fixture
def promo():
    return NotificationTypeFactory(type="promo", label="Offers", default_email=True)


@pytest.fixture
def enqueued(monkeypatch):
    """Record the fanout jobs the views' commits enqueue (campaign ids)."""
    calls: list[int] = []
    monkeypatch.setattr("app.queueing.enqueue_unless_alive", lambda queue, func, arg, *rest: calls.append(arg) or True)
    return calls


def _form(promo, **fields) -> dict:
    return {
        "name": "Spring offer",
        "type": promo.type,
        "title": "Spring is here",
        "body": "20 % off",
        "link_path": "/offers/spring",
        "payload": '{"code": "SPRING"}',
        "audience": "all",
        **fields,
    }


def _only_campaign() -> Campaign:
    return db.session.scalars(sa.select(Campaign)).one()


def test_pages_need_the_operator_role(client, member):
    for url in ("/console/campaigns", "/console/campaigns/new", "/console/deliveries", "/console/dashboard"):
        assert client.get(url).status_code == 403


def test_the_console_nav_links_the_new_pages(client, operator):
    page = client.get("/console/campaigns").get_data(as_text=True)
    links = parse(page).select('nav[aria-label="Console"] a')
    nav = {link.get_text(): (link["href"], link.get("aria-current")) for link in links}  # label: (href, aria-current)

    assert nav["Campaigns"] == ("/console/campaigns", "page")
    for href, label in (
        ("/console/deliveries", "Delivery log"),
        ("/console/dlq", "Dead letters"),
        ("/console/dashboard", "Dashboard"),
    ):
        assert nav[label] == (href, None)


def test_create_a_draft_review_it_and_send_now(client, csrf, operator, promo, enqueued, audit_rows):
    UserFactory.create_batch(2)
    assert "Save draft and review" in client.get("/console/campaigns/new").get_data(as_text=True)

    response = client.post("/console/campaigns/new", headers=csrf(), data=_form(promo))

    campaign = _only_campaign()
    assert response.status_code == 302 and response.location.endswith(f"/console/campaigns/{campaign.id}")
    assert (campaign.status, campaign.total, campaign.data, campaign.created_by) == (
        "draft",
        3,
        {"code": "SPRING"},
        operator.id,
    )
    page = client.get(f"/console/campaigns/{campaign.id}").get_data(as_text=True)
    assert texts(page, "#campaign-audience-size") == ["3 users"] and "Send or schedule" in page
    assert enqueued == []

    response = client.post(f"/console/campaigns/{campaign.id}/send", headers=csrf(), data={"when": "now"})

    assert response.status_code == 302 and enqueued == [campaign.id]
    assert campaign.status == "scheduled"
    assert [e.action for e in audit_rows()] == ["campaign.create", "campaign.send"]
    assert "Sending now." in client.get(response.location).get_data(as_text=True)


def test_schedule_for_later_in_the_operators_zone(client, csrf, operator, promo, enqueued):
    UserFactory()
    client.post("/console/campaigns/new", headers=csrf(), data=_form(promo))
    campaign = _only_campaign()
    at = db_now() + timedelta(hours=3)

    client.post(
        f"/console/campaigns/{campaign.id}/send",
        headers=csrf(),
        data={"when": "at", "send_at": at.astimezone(TOKYO).strftime("%Y-%m-%dT%H:%M")},
    )

    assert campaign.status == "scheduled" and abs(campaign.scheduled_at - at) < timedelta(minutes=1)
    assert enqueued == []  # the sweeper starts it when due


def test_bad_input_is_refused_with_a_message_and_creates_nothing(client, csrf, operator, promo):
    response = client.post("/console/campaigns/new", headers=csrf(), data=_form(promo, payload="[1]"))

    assert response.status_code == 422
    assert "must be a JSON object" in response.get_data(as_text=True)
    assert db.session.scalars(sa.select(Campaign)).first() is None


def test_an_uploaded_list_shows_unknown_ids_and_bad_lines_before_sending(client, csrf, operator, promo):
    UserFactory(external_id="alice")
    UserFactory(external_id="bob")
    upload = (io.BytesIO(b"external_id\nalice\nghost\nbob,carol\nbob\n"), "audience.csv")

    response = client.post(
        "/console/campaigns/new",
        headers=csrf(),
        content_type="multipart/form-data",
        data=_form(promo, audience="list", list_file=upload),
    )

    campaign = _only_campaign()
    assert response.status_code == 302 and campaign.total == 2
    page = client.get(f"/console/campaigns/{campaign.id}").get_data(as_text=True)
    assert texts(page, "#list-recipients") == ["2 known users"]
    assert texts(page, "#list-report .ops-idlist code") == ["ghost"]  # the unknown id
    assert texts(page, "#list-report tbody code") == ["bob,carol"]  # the bad line
    assert texts(page, "#list-unknown") == ["1 — they get nothing"]


def test_a_list_of_only_unknown_ids_is_refused(client, csrf, operator, promo):
    upload = (io.BytesIO(b"ghost-1\nghost-2\n"), "audience.csv")

    response = client.post(
        "/console/campaigns/new",
        headers=csrf(),
        content_type="multipart/form-data",
        data=_form(promo, audience="list", list_file=upload),
    )

    assert response.status_code == 422 and "None of the 2 ids" in response.get_data(as_text=True)


def test_the_progress_fragment_polls_until_done(client, operator, promo, app, monkeypatch):
    monkeypatch.setattr("app.live.publish.route_badge", lambda *a, **k: set())
    monkeypatch.setattr("app.queueing.enqueue_deliveries", lambda *a: True)
    monkeypatch.setattr("app.queueing.enqueue_unless_alive", lambda *a: True)
    monkeypatch.setitem(app.config, "FANOUT_BATCH_SIZE", 2)
    UserFactory.create_batch(3)
    campaign = service.create_campaign(operator, name="c", type_=promo.type, title="t", body="b")
    service.send_campaign(operator, campaign.id)
    db.session.commit()

    scheduled = client.get(f"/console/campaigns/{campaign.id}/progress").get_data(as_text=True)
    # Waiting for its time.
    assert first(scheduled)["hx-trigger"] == "every 5s" and texts(scheduled, ".ops-progress__percent") == ["0 %"]
    assert fanout.start(campaign.id) is not None
    db.session.commit()
    running = client.get(f"/console/campaigns/{campaign.id}/progress").get_data(as_text=True)
    assert first(running)["hx-trigger"] == "every 1s"

    fanout_campaign(campaign.id)

    done = client.get(f"/console/campaigns/{campaign.id}/progress").get_data(as_text=True)
    assert "hx-trigger" not in done and one(done, "progress")["value"] == "100"
    assert texts(done, ".ops-progress__count") == ["4 of 4 users"]
    results = client.get(f"/console/campaigns/{campaign.id}/results").get_data(as_text=True)
    assert one(results, "#results-email") and first(results)["hx-trigger"] == "every 5s"  # e-mails still waiting
    assert texts(results, "#campaign-read-rate") == ["0.0 % (0 of 4 inbox rows read)"]
    listing = client.get("/console/campaigns").get_data(as_text=True)
    row = one(listing, f"#campaign-{campaign.id}")
    assert one(row, "progress")["value"] == "100" and texts(row, ".ops-campaigns__progress .small") == ["4 / 4"]


def test_cancel_a_scheduled_campaign(client, csrf, operator, promo, audit_rows):
    UserFactory()
    campaign = service.create_campaign(operator, name="c", type_=promo.type, title="t", body="b")
    service.send_campaign(operator, campaign.id, db_now() + timedelta(days=1))
    db.session.commit()

    response = client.post(f"/console/campaigns/{campaign.id}/cancel", headers=csrf())

    assert response.status_code == 302 and campaign.status == "cancelled"
    assert audit_rows("campaign.cancel")[0].before["status"] == "scheduled"
    again = client.post(f"/console/campaigns/{campaign.id}/cancel", headers=csrf(), follow_redirects=True)
    assert "only a scheduled or running one can be cancelled" in again.get_data(as_text=True)


def test_posts_need_a_csrf_token(client, operator, promo):
    assert client.post("/console/campaigns/new", data=_form(promo)).status_code == 400


def test_unknown_campaign_is_404(client, operator):
    assert client.get("/console/campaigns/999999").status_code == 404
    assert client.get("/console/campaigns/999999/progress").status_code == 404
