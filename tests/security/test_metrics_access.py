"""Attack: scrape /metrics from the Internet (or through the proxy), and flood it to make PostgreSQL scan the ledger."""

from __future__ import annotations

import threading

import pytest
from werkzeug.middleware.proxy_fix import ProxyFix

from app import create_app
from app.delivery import stats
from tests.conftest import TEST_CONFIG

TOKEN = "m3trics-t0ken-for-prometheus-only"  # noqa: S105


@pytest.fixture
def app_with(app):
    """Build a throwaway app over the same database with some settings changed."""

    def build(**overrides):
        return create_app(dict(TEST_CONFIG, **overrides))

    return build


@pytest.mark.parametrize("address", ["203.0.113.9", "10.0.0.5", "192.168.1.20", "::ffff:198.51.100.7", "2001:db8::1"])
def test_a_remote_client_without_a_token_is_refused(client, address):
    response = client.get("/metrics", environ_base={"REMOTE_ADDR": address})
    assert response.status_code == 403
    assert "hato_" not in response.get_data(as_text=True)


@pytest.mark.parametrize(
    "headers",
    [{"X-Forwarded-For": "203.0.113.9"}, {"X-Forwarded-For": "127.0.0.1"}, {"Forwarded": "for=203.0.113.9"}],
)
def test_a_request_that_came_through_a_proxy_is_not_local_even_from_loopback(client, headers):
    # The reverse proxy runs on this host: without the rule, every Internet client would look local.
    response = client.get("/metrics", headers=headers, environ_base={"REMOTE_ADDR": "127.0.0.1"})
    assert response.status_code == 403


def test_behind_proxy_fix_the_original_peer_decides_not_the_forwarded_address(app_with):
    application = app_with()
    application.wsgi_app = ProxyFix(application.wsgi_app, x_for=1)
    response = application.test_client().get(
        "/metrics", headers={"X-Forwarded-For": "127.0.0.1"}, environ_base={"REMOTE_ADDR": "203.0.113.9"}
    )
    assert response.status_code == 403


def test_with_a_token_only_its_bearer_may_scrape_even_from_loopback(app_with):
    scraper = app_with(METRICS_TOKEN=TOKEN).test_client()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
                    {"Authorization": f"Bearer {TOKEN[:-1]}"}):  # fmt: skip
        refused = scraper.get("/metrics", headers=headers)
        assert refused.status_code == 401, headers
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
    allowed = scraper.get(
        "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, environ_base={"REMOTE_ADDR": "203.0.113.9"}
    )
    assert allowed.status_code == 200 and "hato_deliveries" in allowed.get_data(as_text=True)


def test_loopback_without_a_proxy_may_scrape(client):
    assert client.get("/metrics").status_code == 200


def test_a_flood_of_scrapes_scans_the_ledger_once_per_interval(app_with, monkeypatch):
    scans = []
    real = stats.status_counts
    monkeypatch.setattr(stats, "status_counts", lambda: scans.append(1) or real())
    scraper = app_with(METRICS_CACHE_SECONDS=60).test_client()
    results = []

    def scrape():
        results.append(scraper.get("/metrics").status_code)

    threads = [threading.Thread(target=scrape) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [200] * 20
    assert len(scans) == 1
