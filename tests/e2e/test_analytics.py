"""The analytics page in a real browser: charts with their tables, a filter through the URL, the CSV, and axe at
375 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.analytics import sweep as analytics
from app.extensions import db
from tests.e2e.helpers import sign_in
from tests.factories import UserFactory
from tests.support.axe import describe, serious_violations
from tests.support.rollup_ledger import event, make_ledger, update

pytestmark = pytest.mark.e2e


def test_an_operator_reads_the_figures_narrows_them_and_downloads_them(page, live_server):
    with live_server.app_context():
        ids = make_ledger()
        update(ids[:8], status="'sent'", provider="'smtp'", sent_at="created_at + interval '800 ms'")
        update(ids[:5], provider_status="'delivered'", provider_status_at="created_at + interval '3 s'")
        update(ids[8:9], status="'skipped'", skip_reason="'preference'")
        event(ids[0], "opened", "e2e-open")
        email = UserFactory(role="operator").email
        db.session.commit()
        analytics.sweep(live_server.config)  # the sweeper's step folds the changes
        db.session.remove()

    sign_in(page, email)
    page.goto("/console/dashboard")
    page.get_by_role("link", name="Analytics").click()
    chart = page.get_by_role("img", name="Outcomes of the deliveries accepted per period")
    expect(chart).to_be_visible()
    expect(page.locator("#analytics-series-chart rect").first).to_be_attached()
    expect(page.get_by_role("img", name="Time from acceptance")).to_be_visible()
    totals = page.locator("#analytics-totals")
    expect(totals).to_contain_text("comment")
    expect(totals.locator("tr.table__total")).to_contain_text("62.5 %")  # 5 delivered of 8 sent

    page.get_by_label("Group by", exact=True).select_option("channel")
    page.get_by_label("Period", exact=True).select_option("30d")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"/console/analytics\?.*period=30d.*group=channel"))
    expect(page.locator("#analytics-times")).to_contain_text("≤")
    expect(page.locator("#analytics-skips")).to_contain_text("preference")

    with page.expect_download() as download:
        page.get_by_role("link", name="Download CSV").click()
    text = open(download.value.path(), encoding="utf-8").read()
    assert text.startswith("section,key,accepted") and "\nchannel,email," in text.replace("\r\n", "\n")

    page.set_viewport_size({"width": 375, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    violations = serious_violations(page)
    assert not violations, describe(violations, "/console/analytics at 375 px: ")
