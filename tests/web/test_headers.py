"""Security headers on every response, pages and fragments alike."""

import pytest

from tests.factories import UserFactory


@pytest.mark.parametrize("path", ["/login", "/healthz", "/no-such-page", "/static/css/app.css"])
def test_headers_on_anonymous_responses(client, path):
    headers = client.get(path).headers
    csp = headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert "frame-ancestors 'none'" in csp
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["X-Frame-Options"] == "DENY"


def test_headers_on_signed_in_pages_and_fragments(client, login_as):
    login_as(UserFactory())
    for path in ("/inbox", "/inbox/badge"):
        response = client.get(path, headers={"HX-Request": "true"})
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
        assert "HX-Request" in response.headers["Vary"]


def test_secure_cookie_when_base_url_is_https(monkeypatch):
    from app import create_app
    from tests.conftest import TEST_CONFIG

    monkeypatch.setenv("BASE_URL", "https://hato.example")
    application = create_app(dict(TEST_CONFIG))
    assert application.config["SESSION_COOKIE_SECURE"] is True
    response = application.test_client().get("/healthz")
    assert response.headers["Strict-Transport-Security"].startswith("max-age=")


def test_no_inline_script_in_pages(client, login_as):
    login_as(UserFactory())
    html = client.get("/inbox").get_data(as_text=True)
    assert "<script>" not in html and "onclick=" not in html
