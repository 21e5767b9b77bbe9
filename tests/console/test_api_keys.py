"""API keys (admins only): created through the API module, shown once, listed by prefix, revoked; audited."""

from __future__ import annotations

import sqlalchemy as sa

from app.api_keys import service as keys
from app.extensions import db
from app.models import ApiKey
from tests.support.html import one, texts


def test_create_shows_the_key_once_and_stores_only_its_hash(client, csrf, admin, audit_rows):
    response = client.post(
        "/console/api-keys", headers=csrf(), data={"name": "reservations-prod", "scopes": "notifications:write"}
    )
    assert response.status_code == 201
    page = response.get_data(as_text=True)
    key = one(page, "code#new-key").get_text()
    assert key.startswith("hato_") and len(key) > len("hato_")
    row = db.session.scalars(sa.select(ApiKey)).one()
    assert (row.name, row.created_by, row.prefix) == ("reservations-prod", admin.id, keys.key_prefix(key))
    assert row.key_hash == keys.hash_key(key) and key not in row.key_hash
    (entry,) = audit_rows("api_key.create")
    assert entry.target_id == row.prefix and key not in str(entry.after)
    listing = client.get("/console/api-keys").get_data(as_text=True)
    cells = texts(listing, f'.console-keys tr[id="key-{row.prefix}"] > td')  # name, prefix, created, last used, …
    assert cells[1] == f"{row.prefix}…" and cells[3] == "never" and key not in listing
    assert keys.authenticate(key).name == "reservations-prod"  # the shown key is the one that works


def test_revoke(client, csrf, admin, audit_rows):
    client.post("/console/api-keys", headers=csrf(), data={"name": "old", "scopes": "notifications:write"})
    row = db.session.scalars(sa.select(ApiKey)).one()
    response = client.post(f"/console/api-keys/{row.prefix}/revoke", headers=csrf(), follow_redirects=True)
    assert "revoked" in response.get_data(as_text=True)
    db.session.refresh(row)
    assert row.revoked_at is not None
    assert [e.action for e in audit_rows()] == ["api_key.create", "api_key.revoke"]
    again = client.post(f"/console/api-keys/{row.prefix}/revoke", headers=csrf(), follow_redirects=True)
    assert "already revoked" in again.get_data(as_text=True)
    assert len(audit_rows()) == 2


def test_a_name_is_required(client, csrf, admin):
    response = client.post("/console/api-keys", headers=csrf(), data={"name": ""})
    assert response.status_code == 422
    assert db.session.scalar(sa.select(sa.func.count()).select_from(ApiKey)) == 0


def test_an_admin_sets_a_keys_limits_checked_and_audited(client, csrf, admin, audit_rows):
    key = keys.create_api_key(None, "reservations", ["notifications:write"])
    prefix = keys.key_prefix(key)
    url = f"/console/api-keys/{prefix}/quota"

    refused = client.post(url, headers=csrf(), data={"burst": "5"}, follow_redirects=True)
    assert "A burst needs a rate" in refused.get_data(as_text=True)
    bad = client.post(url, headers=csrf(), data={"rate": "0"}, follow_redirects=True)
    assert bad.status_code == 200 and not audit_rows("api_key.quota")

    done = client.post(url, headers=csrf(), data={"rate": "20", "burst": "40", "daily": "10000"}, follow_redirects=True)
    page = done.get_data(as_text=True)
    assert "now has these limits" in page
    limits = texts(page, f'tr[id="key-{prefix}"] .console-quota li')
    assert limits == ["20 requests/s, bursts of 40", "10,000 notifications a day (UTC)"]
    (entry,) = audit_rows("api_key.quota")
    assert (entry.before, entry.after) == (
        {"rate": None, "burst": None, "daily": None}, {"rate": 20.0, "burst": 40, "daily": 10000}
    )  # fmt: skip
    row = db.session.scalars(sa.select(ApiKey).where(ApiKey.prefix == prefix)).one()
    assert (row.rate_per_second, row.rate_burst, row.daily_quota) == (20.0, 40, 10000)

    cleared = client.post(url, headers=csrf(), data={"rate": "", "burst": "", "daily": ""}, follow_redirects=True)
    assert "No limits" in texts(cleared.get_data(as_text=True), f'tr[id="key-{prefix}"] .console-key-limits')[0]


def test_limits_need_a_csrf_token(client, admin):  # and an admin: tests/console/test_access.py
    key = keys.create_api_key(None, "reservations", ["notifications:write"])
    assert client.post(f"/console/api-keys/{keys.key_prefix(key)}/quota", data={"daily": "5"}).status_code == 400
    assert db.session.scalars(sa.select(ApiKey.daily_quota).where(ApiKey.prefix == keys.key_prefix(key))).one() is None
