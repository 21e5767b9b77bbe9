"""Role checks on every console URL: anonymous → sign-in, member → 403, operator vs admin-only pages."""

from __future__ import annotations

import pytest
from flask import url_for
from werkzeug.routing import AnyConverter, IntegerConverter

from app import create_app
from tests.conftest import TEST_CONFIG
from tests.factories import UserFactory

ADMIN_ONLY = {
    "console.api_keys",
    "console.create_api_key",
    "console.revoke_api_key",
    "console.set_api_key_scopes",
    "console.set_api_key_quota",
    "console.users",
    "console.change_role",
}


def _sample_value(rule, name: str):
    converter = rule._converters[name]
    if isinstance(converter, IntegerConverter):
        return "1"
    if isinstance(converter, AnyConverter):
        return sorted(converter.items)[0]
    return {"type_": "comment", "channel": "email", "locale": "en", "key": "comment"}.get(name, "x")


def console_requests() -> list[tuple[str, str, str]]:
    """(endpoint, method, concrete path) for every console rule, built from the app's url_map."""
    app = create_app(dict(TEST_CONFIG))
    found = []
    for rule in app.url_map.iter_rules():
        if not rule.endpoint.startswith("console."):
            continue
        values = {name: _sample_value(rule, name) for name in rule.arguments}
        with app.test_request_context():
            path = url_for(rule.endpoint, **values)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            found.append((rule.endpoint, method, path))
    return found


CONSOLE_REQUESTS = console_requests()


def test_every_console_rule_is_covered():
    endpoints = {endpoint for endpoint, _, _ in CONSOLE_REQUESTS}
    assert len(CONSOLE_REQUESTS) >= 20
    assert {"console.index", "console.announcements", "console.audit_log", "console.edit_template"} <= endpoints


@pytest.mark.parametrize(("endpoint", "method", "path"), CONSOLE_REQUESTS)
def test_members_get_403(client, csrf, login_as, endpoint, method, path):
    login_as(UserFactory(role="member"))
    response = client.open(path, method=method, headers=csrf())
    assert response.status_code == 403, (endpoint, method, path)


@pytest.mark.parametrize(("endpoint", "method", "path"), CONSOLE_REQUESTS)
def test_anonymous_visitors_are_sent_to_sign_in(client, csrf, endpoint, method, path):
    response = client.open(path, method=method, headers=csrf())
    assert response.status_code == 302, (endpoint, method, path)
    assert "/login" in response.headers["Location"]


@pytest.mark.parametrize(("endpoint", "method", "path"), [r for r in CONSOLE_REQUESTS if r[0] in ADMIN_ONLY])
def test_operators_get_403_on_admin_pages(client, csrf, login_as, endpoint, method, path):
    login_as(UserFactory(role="operator"))
    assert client.open(path, method=method, headers=csrf()).status_code == 403


@pytest.mark.parametrize(
    "path",
    [
        "/console/",
        "/console/announcements",
        "/console/announcements/new",
        "/console/types",
        "/console/types/new",
        "/console/templates",
        "/console/suppressions",
        "/console/audit",
    ],
)
def test_operators_see_operator_pages(client, login_as, path):
    login_as(UserFactory(role="operator"))
    response = client.get(path)
    assert response.status_code == 200
    assert b'aria-label="Console"' in response.data
    assert b"API keys" not in response.data  # admin-only tabs are hidden from operators


@pytest.mark.parametrize("path", ["/console/api-keys", "/console/users"])
def test_admins_see_admin_pages(client, login_as, path):
    login_as(UserFactory(role="admin"))
    response = client.get(path)
    assert response.status_code == 200
    assert b"API keys" in response.data


def test_state_changing_posts_need_a_csrf_token(client, login_as, audit_rows):
    login_as(UserFactory(role="admin"))
    for path, data in [
        ("/console/announcements/new", {"title": "T", "body": "B", "publish": "now"}),
        ("/console/types/new", {"key": "new_type", "label": "New"}),
        ("/console/api-keys", {"name": "svc"}),
    ]:
        response = client.post(path, data=data)
        assert response.status_code == 400, path
        assert b"Reload the page" in response.data
    assert audit_rows() == []


@pytest.mark.parametrize(("role", "shown"), [("operator", True), ("admin", True), ("member", False)])
def test_the_header_links_to_the_console_for_operators_only(client, login_as, role, shown):
    login_as(UserFactory(role=role))
    assert (b'href="/console/"' in client.get("/inbox").data) is shown
