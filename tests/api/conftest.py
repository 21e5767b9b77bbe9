"""Fixtures for the API tests: a live API key, an authenticated JSON client, rows to count."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from app import unitofwork
from app.api_keys.scopes import SCOPES
from app.api_keys.service import create_api_key
from app.extensions import db
from tests.factories import NotificationTypeFactory, UserFactory


@pytest.fixture
def api_key(app) -> str:
    """A fresh API key with every scope (its hash is in the test's rolled-back transaction)."""
    key = create_api_key(None, "tests", SCOPES)
    return key


class Api:
    """The test client with `Authorization: Bearer <key>` and JSON bodies."""

    def __init__(self, client, key: str) -> None:
        self.client, self.key = client, key

    def headers(self, idempotency_key: str | None = None, **extra) -> dict:
        headers = {"Authorization": f"Bearer {self.key}", **extra}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        return headers

    def call(self, method: str, path: str, json=None, idempotency_key: str | None = None, **kwargs):
        """Send the request; return once its post-commit Redis work has been sent too."""
        headers = self.headers(idempotency_key, **kwargs.pop("headers", {}))
        response = self.client.open(path, method=method, json=json, headers=headers, **kwargs)
        assert unitofwork.wait_idle(self.client.application)
        return response

    def post(self, path, json=None, **kwargs):
        return self.call("POST", path, json, **kwargs)

    def put(self, path, json=None, **kwargs):
        return self.call("PUT", path, json, **kwargs)

    def get(self, path, **kwargs):
        return self.call("GET", path, **kwargs)

    def delete(self, path, **kwargs):
        return self.call("DELETE", path, **kwargs)


@pytest.fixture
def api(client, api_key) -> Api:
    """An authenticated JSON client."""
    return Api(client, api_key)


@pytest.fixture
def comment_type():
    """The `comment` type: in-app and e-mail on by default, default queue."""
    return NotificationTypeFactory(type="comment", default_email=True, priority="default")


@pytest.fixture
def recipient():
    """A member with an external id and an e-mail address."""
    return UserFactory(external_id=f"ext-{uuid.uuid4().hex[:8]}")


def new_key() -> str:
    """A unique Idempotency-Key."""
    return str(uuid.uuid4())


def count(table: str, where: str = "true", **params) -> int:
    """Count rows of table (optionally filtered) in the test's transaction."""
    return db.session.execute(sa.text(f"SELECT count(*) FROM {table} WHERE {where}"), params).scalar_one()


def send_body(*recipients: str, **fields) -> dict:
    """A valid POST /v1/notifications body."""
    body = {"type": "comment", "recipients": list(recipients), "title": "New comment", "body": "Hello"}
    body.update(fields)
    return body
