"""CLI: users create and an idempotent demo seed."""

import sqlalchemy as sa

from app.cli.demo import DEMO_ACCOUNTS
from app.extensions import db
from app.models import Announcement, Notification, NotificationType, User


def test_users_create(app):
    runner = app.test_cli_runner()
    result = runner.invoke(
        args=[
            "users",
            "create",
            "ops@example.com",
            "--password",
            "long-enough-pw",
            "--role",
            "operator",
            "--external-id",
            "ops-1",
        ]
    )
    assert result.exit_code == 0, result.output
    user = db.session.scalars(sa.select(User).where(User.email == "ops@example.com")).one()
    assert user.role == "operator" and user.external_id == "ops-1" and user.check_password("long-enough-pw")
    assert user.password_hash.startswith("scrypt:")


def test_users_create_rejects_a_short_password(app):
    result = app.test_cli_runner().invoke(args=["users", "create", "x@example.com", "--password", "short"])
    assert result.exit_code != 0
    assert "at least 8" in result.output
    assert db.session.scalar(sa.select(sa.func.count()).select_from(User).where(User.email == "x@example.com")) == 0


def _counts():
    return {
        model.__name__: db.session.scalar(sa.select(sa.func.count()).select_from(model))
        for model in (User, NotificationType, Notification, Announcement)
    }


def test_demo_seed_is_idempotent_and_prints_logins(app):
    runner = app.test_cli_runner()
    first = runner.invoke(args=["demo", "seed"])
    assert first.exit_code == 0, first.output
    for account in DEMO_ACCOUNTS:
        assert account["email"] in first.output and account["password"] in first.output
    after_first = _counts()
    second = runner.invoke(args=["demo", "seed"])
    assert second.exit_code == 0
    assert _counts() == after_first
    assert after_first["NotificationType"] == 4 and after_first["Announcement"] == 3
    assert after_first["Notification"] >= 24
    security = db.session.get(NotificationType, "security")
    assert security.mandatory and security.default_email and not security.default_push
    states = db.session.execute(
        sa.text(
            "SELECT count(*) FILTER (WHERE expires_at < now()), count(*) FILTER (WHERE published_at > now()) "
            "FROM announcements"
        )
    ).one()
    assert tuple(states) == (1, 1)
    roles = sorted(u.role for u in db.session.scalars(sa.select(User)))
    assert roles == ["admin", "member", "member", "member", "member", "operator"]  # alice, hanako, bob, carol
