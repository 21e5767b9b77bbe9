"""Fixtures for the tenant tests: tenants with members, made through the domain's own services."""

from __future__ import annotations

import pytest

from app.tenants import service
from tests.factories import UserFactory


@pytest.fixture
def make_tenant():
    """Return a function that creates a tenant (key, name) with the given members (users)."""

    def make(key: str, *members, **fields):
        tenant, _ = service.put_tenant(None, key, {"name": key.title(), **fields})
        for user in members:
            keys = [row for row in _keys(user.id)] + [key]
            service.set_member_tenants(None, user.id, keys)
        return tenant

    return make


def _keys(user_id: int) -> list[str]:
    from app.tenants.queries import member_tenant_keys

    return member_tenant_keys(user_id)


@pytest.fixture
def member():
    """A member with an e-mail address."""
    return UserFactory()
