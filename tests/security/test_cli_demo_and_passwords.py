"""Attack: sign in as the demo admin on a real installation, or read a password from shell history.

`demo seed` creates admin@example.com with a password printed in docs/getting-started.md and the source. Run by
mistake against a production database (a copied `make run` line, a wrong DATABASE_URL) it would give
anyone the admin account. Outside dev mode it must refuse and change nothing. `users create` must not
need the password on the command line (where shell history and `ps` keep it): it asks, hidden, twice.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.cli.demo_data import DEMO_ACCOUNTS
from app.extensions import db
from app.models import User

DEMO_EMAILS = [account["email"] for account in DEMO_ACCOUNTS]


def _user(email: str) -> User | None:
    return db.session.scalars(sa.select(User).where(User.email == email)).one_or_none()


def _demo_users() -> int:
    return db.session.scalar(sa.select(sa.func.count()).select_from(User).where(User.email.in_(DEMO_EMAILS)))


@pytest.fixture
def production(app, monkeypatch):
    """The app as it runs outside make run/test: HATO_DEV unset."""
    monkeypatch.setitem(app.config, "DEV_MODE", False)


def test_demo_seed_refuses_outside_dev_mode_and_changes_nothing(app, production):
    result = app.test_cli_runner().invoke(args=["demo", "seed"])

    assert result.exit_code != 0
    assert "dev mode" in result.output and "HATO_DEV=1" in result.output
    assert _demo_users() == 0
    assert not any(account["password"] in result.output for account in DEMO_ACCOUNTS)


def test_demo_seed_refuses_to_reset_the_demo_admin_on_a_real_database(app, production):
    """An installation that happens to have an admin@example.com keeps its own password."""
    from tests.factories import UserFactory

    admin = next(a for a in DEMO_ACCOUNTS if a["role"] == "admin")
    existing = UserFactory(email=admin["email"], role="member")
    app.test_cli_runner().invoke(args=["demo", "seed"])
    db.session.expire_all()
    assert _user(admin["email"]).role == "member"
    assert not _user(admin["email"]).check_password(admin["password"])
    assert existing.id == _user(admin["email"]).id


def test_demo_seed_still_runs_in_dev_mode(app):
    assert app.config["DEV_MODE"] is True  # make run / make test set HATO_DEV=1
    result = app.test_cli_runner().invoke(args=["demo", "seed"])
    assert result.exit_code == 0, result.output
    assert _demo_users() == len(DEMO_ACCOUNTS)


def test_users_create_asks_for_the_password_hidden_and_twice(app):
    result = app.test_cli_runner().invoke(
        args=["users", "create", "ops@example.com", "--role", "operator"], input="long-enough-pw\nlong-enough-pw\n"
    )

    assert result.exit_code == 0, result.output
    assert "long-enough-pw" not in result.output  # hidden: never echoed
    assert result.output.count("Password") >= 1 and "Repeat for confirmation" in result.output
    user = _user("ops@example.com")
    assert user.role == "operator" and user.check_password("long-enough-pw")


def test_users_create_with_a_mistyped_confirmation_creates_nobody(app):
    result = app.test_cli_runner().invoke(
        args=["users", "create", "typo@example.com"], input="long-enough-pw\nlong-enough-pv\n"
    )

    assert result.exit_code != 0
    assert "do not match" in result.output
    assert _user("typo@example.com") is None


def test_users_create_with_a_short_prompted_password_is_refused(app):
    result = app.test_cli_runner().invoke(args=["users", "create", "short@example.com"], input="short\nshort\n")

    assert result.exit_code != 0
    assert "at least 8" in result.output
    assert _user("short@example.com") is None


def test_users_create_still_takes_the_password_as_an_option_for_scripts(app):
    result = app.test_cli_runner().invoke(args=["users", "create", "ci@example.com", "--password", "long-enough-pw"])
    assert result.exit_code == 0, result.output
    assert "Password" not in result.output
    assert _user("ci@example.com").check_password("long-enough-pw")
