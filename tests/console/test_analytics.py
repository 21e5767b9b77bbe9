"""The analytics page and its CSV: figures from the rollups, filters in the URL, access by role."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest

from app.analytics import service
from tests.support.rollup_ledger import HOUR, event, make_ledger, update


@pytest.fixture
def ledger():
    """The small ledger, sent and partly delivered, folded into the rollups."""
    ids = make_ledger()
    update(ids[:8], status="'sent'", provider="'smtp'", sent_at="created_at + interval '1500 ms'")
    update(ids[:4], provider_status="'delivered'", provider_status_at="created_at + interval '4 s'")
    update(ids[8:9], status="'failed'", provider="'smtp'")
    update(ids[9:10], status="'skipped'", skip_reason="'quiet_hours'")
    event(ids[0], "opened", "o1")
    while service.roll_up(1000):
        pass
    return ids


def _range() -> dict:
    """Dates around the whole ledger in any zone: it spans three hours from HOUR (UTC), which may cross midnight, and
    the operator reads dates in Asia/Tokyo."""
    return {
        "since": (HOUR - timedelta(days=1)).strftime("%Y-%m-%d"),
        "until": (HOUR + timedelta(days=2)).strftime("%Y-%m-%d"),
    }


def test_the_page_shows_the_figures_with_charts_and_tables(client, operator, ledger):
    page = client.get("/console/analytics", query_string=_range())
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="analytics-series-chart"' in html and 'id="analytics-times-chart"' in html
    assert html.count('role="img"') >= 2 and '<desc id="series-chart-desc">' in html
    totals = html[html.index('id="analytics-totals"') :]
    assert "<code>comment</code>" in totals and "<code>invoice</code>" in totals
    assert "quiet_hours" in html  # skipped by reason
    assert "50.0 %" in html  # 4 delivered of 8 sent
    assert 'href="/console/analytics"' in html  # the nav entry


def test_filters_narrow_and_group_by_tenant(client, operator, ledger):
    html = client.get("/console/analytics", query_string={**_range(), "type": "invoice", "group": "tenant"}).get_data(
        as_text=True
    )
    assert "<code>acme</code>" in html and "<code>invoice</code>" not in html
    bad = client.get("/console/analytics", query_string={"channel": "pigeon", "tenant": "nobody", "since": "x"})
    assert bad.status_code == 200
    text = bad.get_data(as_text=True)
    assert "pigeon" in text and "nobody" in text and "YYYY-MM-DD" in text


def test_csv_has_the_same_figures(client, operator, ledger):
    response = client.get("/console/analytics.csv", query_string={**_range(), "group": "channel"})
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert "attachment" in response.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))
    total = next(r for r in rows if r["section"] == "total")
    assert (total["accepted"], total["sent"], total["delivered"], total["failed"], total["opened"]) == (
        "12", "8", "4", "1", "1")  # fmt: skip
    assert total["delivery_rate"] == "0.5000" and float(total["sent_p50_ms"]) >= 1500
    assert {r["key"] for r in rows if r["section"] == "channel"} == {"email", "sms"}
    assert any(r["section"] == "skip_reason" and r["key"] == "quiet_hours" and r["skipped"] == "1" for r in rows)


def test_members_are_refused(client, member):
    """(Visitors are sent to sign-in by tests/console/test_access.py, which walks every console URL.)"""
    assert client.get("/console/analytics").status_code == 403
    assert client.get("/console/analytics.csv").status_code == 403


def test_csv_cells_cannot_become_formulas(client, operator):
    from app.console.analytics import _cell

    assert _cell("=HYPERLINK(1)") == "'=HYPERLINK(1)" and _cell("comment") == "comment" and _cell(None) == ""
