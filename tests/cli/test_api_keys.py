"""`flask api-keys create | list | revoke` (scopes: tests/security/test_api_scopes.py)."""

from __future__ import annotations

import sqlalchemy as sa

from app.api_keys.service import hash_key
from app.extensions import db


def test_create_prints_the_key_once_and_stores_only_its_hash(app, client):
    result = app.test_cli_runner().invoke(args=["api-keys", "create", "billing"])
    assert result.exit_code == 0, result.output
    (key,) = result.stdout.splitlines()  # the key alone on stdout; the note goes to stderr
    assert key.startswith("hato_") and "cannot be shown again" in result.stderr
    row = db.session.execute(sa.text("SELECT name, prefix, key_hash FROM api_keys")).one()
    assert (row.name, row.prefix, row.key_hash) == ("billing", key[:13], hash_key(key))
    response = client.get("/v1/notifications/1", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 403  # authenticated, but a new key may only send (notifications:write)


def test_list_shows_prefixes_and_revoke_stops_the_key(app, client):
    runner = app.test_cli_runner()
    key = runner.invoke(args=["api-keys", "create", "crm"]).stdout.splitlines()[0]
    listed = runner.invoke(args=["api-keys", "list"])
    assert key[:13] in listed.output and "crm" in listed.output and "live" in listed.output
    assert key not in listed.output
    revoked = runner.invoke(args=["api-keys", "revoke", key[:13]])
    assert revoked.exit_code == 0
    assert "revoked" in runner.invoke(args=["api-keys", "list"]).output
    assert client.get("/v1/notifications/1", headers={"Authorization": f"Bearer {key}"}).status_code == 401
    again = runner.invoke(args=["api-keys", "revoke", key[:13]])
    assert again.exit_code != 0 and "no live key" in again.output


def test_create_refuses_an_empty_name(app):
    result = app.test_cli_runner().invoke(args=["api-keys", "create", "  "])
    assert result.exit_code != 0
    assert db.session.execute(sa.text("SELECT count(*) FROM api_keys")).scalar_one() == 0
