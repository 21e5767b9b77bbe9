"""CLI: users create and an idempotent demo seed."""

import re

import sqlalchemy as sa

from app.cli.demo_data import DEMO_ACCOUNTS
from app.extensions import db
from app.models import Announcement, Device, Notification, NotificationType, User


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


def test_demo_seed_gives_alice_two_phones_and_sends_them_one_notification(app, monkeypatch):
    monkeypatch.setitem(app.config, "APNS_TOPIC", "org.hato.demo")  # make run's APNs stand-in's topic
    runner = app.test_cli_runner()
    first = runner.invoke(args=["demo", "seed"])
    assert first.exit_code == 0, first.output
    assert "alice@example.com has two phones for push: an iPhone (APNs) and an Android phone (FCM)." in first.output
    alice = db.session.scalars(sa.select(User).where(User.external_id == "demo-alice")).one()
    phones = db.session.scalars(sa.select(Device).where(Device.user_id == alice.id).order_by(Device.platform)).all()
    assert [(p.platform, p.app_id, p.locale) for p in phones] == [
        ("android", None, "en"),
        ("ios", "org.hato.demo", "en"),
    ]
    assert re.fullmatch(r"[0-9a-f]{64}", phones[1].token)  # an APNs token: 32 bytes in hex
    sent = sa.text(
        "SELECT n.type, d.channel, d.status FROM notifications n "
        "JOIN notification_deliveries d ON d.notification_id = n.id AND d.user_id = n.user_id "
        "WHERE n.user_id = :user AND n.dedupe_key = 'demo:phone'"
    )
    deliveries = set(db.session.execute(sent, {"user": alice.id}).all())
    assert {("reservation_approved", "push", "pending"), ("reservation_approved", "email", "pending")} <= deliveries

    # A second seed refreshes the same phones (one a push service refused comes back) and sends nothing again.
    db.session.execute(sa.update(Device).where(Device.id == phones[0].id).values(invalidated_at=sa.func.now()))
    assert runner.invoke(args=["demo", "seed"]).exit_code == 0
    db.session.expire_all()
    again = db.session.scalars(sa.select(Device).where(Device.user_id == alice.id).order_by(Device.platform)).all()
    assert [p.id for p in again] == [p.id for p in phones] and again[0].invalidated_at is None
    assert set(db.session.execute(sent, {"user": alice.id}).all()) == deliveries
