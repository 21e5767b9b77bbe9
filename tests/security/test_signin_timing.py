"""Attack: tell accounts apart by how long a failed sign-in takes.

A member created through the API has no password. If the sign-in skips the scrypt check for such an
account (or for an unknown e-mail), a wrong password answers in microseconds instead of tens of
milliseconds, and the attacker learns which e-mails are members. The test counts the password hashes
each failure computes (and their cost parameters) instead of timing them, so it cannot be flaky.
"""

from __future__ import annotations

import pytest
import werkzeug.security

from tests.factories import UserFactory


@pytest.fixture
def hashes(monkeypatch):
    """Record the method (with its cost parameters) of every password hash computed."""
    seen: list[str] = []
    real = werkzeug.security._hash_internal

    def counting(method: str, salt: str, password: str):
        seen.append(method)
        return real(method, salt, password)

    monkeypatch.setattr(werkzeug.security, "_hash_internal", counting)
    return seen


def _attempt(client, csrf, email, password="a-wrong-guess"):  # noqa: S107 - the attacker's guess
    return client.post("/login", data={"email": email, "password": password}, headers=csrf())


def _cost_of_a_failure(client, csrf, hashes, email, **kwargs) -> list[str]:
    hashes.clear()
    assert _attempt(client, csrf, email, **kwargs).status_code == 401
    return list(hashes)


def test_every_kind_of_failed_sign_in_computes_the_same_hash(client, csrf, hashes):
    member = UserFactory(email="member@example.com")
    api_member = UserFactory(email="from-the-api@example.com", password_hash=None)
    empty_hash = UserFactory(email="empty-hash@example.com", password_hash="")
    real_cost = member.password_hash.split("$")[0]  # e.g. scrypt:32768:8:1

    costs = {
        "member, wrong password": _cost_of_a_failure(client, csrf, hashes, member.email),
        "member without a password": _cost_of_a_failure(client, csrf, hashes, api_member.email),
        "member with an empty hash": _cost_of_a_failure(client, csrf, hashes, empty_hash.email),
        "stranger": _cost_of_a_failure(client, csrf, hashes, "stranger@example.com"),
        "stranger, odd case": _cost_of_a_failure(client, csrf, hashes, "Stranger@Example.COM"),
        "member, odd case": _cost_of_a_failure(client, csrf, hashes, "FROM-the-api@example.com"),
    }

    assert costs == dict.fromkeys(costs, [real_cost]), costs


def test_a_member_without_a_password_cannot_sign_in_with_any_password(client, csrf, hashes):
    api_member = UserFactory(email="from-the-api@example.com", password_hash=None)
    for guess in ("", " ", "not-a-real-password", "None", "null"):
        response = client.post("/login", data={"email": api_member.email, "password": guess}, headers=csrf())
        assert response.status_code == 401
    with client.session_transaction() as sess:
        assert "_user_id" not in sess


def test_the_right_password_costs_one_hash_too(client, csrf, hashes, password):
    member = UserFactory()
    hashes.clear()
    assert _attempt(client, csrf, member.email, password=password).status_code == 302
    assert hashes == [member.password_hash.split("$")[0]]
