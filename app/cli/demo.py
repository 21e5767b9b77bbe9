"""`flask --app wsgi demo seed`: the demo data `make run` loads (safe to repeat), and its logins; dev mode only.

The seed article's four types, members, an operator, an admin, notifications and announcements.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click
import sqlalchemy as sa
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy.dialects.postgresql import insert

from app.extensions import db
from app.models import Announcement, Notification, NotificationType
from app.unitofwork import commit
from app.users.service import create_or_update_user

demo_cli = AppGroup("demo", help="Demo data.")

# The seed article's types and defaults (type, label, in_app, email, push, mandatory) + priority.
DEMO_TYPES = [
    (
        "reservation_approved",
        "Reservation approved",
        True,
        True,
        True,
        False,
        "default",
        "A reservation you made was approved.",
    ),
    (
        "reservation_remind",
        "Reminder the day before",
        True,
        False,
        True,
        False,
        "default",
        "A reminder the day before you use a reservation.",
    ),
    ("comment", "Comment", True, False, False, False, "low", "Someone commented on your reservation."),
    (
        "security",
        "Sign-in and password changes",
        True,
        True,
        False,
        True,
        "high",
        "Security events on your account. These cannot be turned off.",
    ),
]

DEMO_ACCOUNTS = [
    {
        "email": "alice@example.com",
        "password": "hato-alice-demo",
        "role": "member",
        "name": "Alice Member",
        "external_id": "demo-alice",
        "timezone": "Asia/Tokyo",
        "locale": "ja",
    },
    {
        "email": "bob@example.com",
        "password": "hato-bob-demo",
        "role": "member",
        "name": "Bob Member",
        "external_id": "demo-bob",
        "timezone": "Europe/Berlin",
        "locale": "de",
    },
    {
        "email": "carol@example.com",
        "password": "hato-carol-demo",
        "role": "member",
        "name": "Carol Member",
        "external_id": "demo-carol",
        "timezone": "America/New_York",
        "locale": "en",
    },
    {
        "email": "olivia@example.com",
        "password": "hato-olivia-demo",
        "role": "operator",
        "name": "Olivia Operator",
        "external_id": "demo-olivia",
        "timezone": "UTC",
        "locale": "en",
    },
    {
        "email": "adam@example.com",
        "password": "hato-adam-demo",
        "role": "admin",
        "name": "Adam Admin",
        "external_id": "demo-adam",
        "timezone": "UTC",
        "locale": "en",
    },
]

NOTIFICATIONS_PER_MEMBER = 30
UNREAD_PER_MEMBER = 6


def seed_types() -> None:
    """Insert or refresh the four demo types."""
    rows = [
        dict(
            type=t,
            label=label,
            default_in_app=in_app,
            default_email=email,
            default_push=push,
            mandatory=mandatory,
            priority=priority,
            description=description,
        )
        for t, label, in_app, email, push, mandatory, priority, description in DEMO_TYPES
    ]
    stmt = insert(NotificationType).values(rows)
    db.session.execute(stmt.on_conflict_do_nothing(index_elements=["type"]))


def _demo_notifications(user_id: int, now: datetime) -> list[dict]:
    kinds = ["reservation_approved", "comment", "reservation_remind", "comment", "security"]
    rows = []
    for n in range(1, NOTIFICATIONS_PER_MEMBER + 1):
        kind = kinds[n % len(kinds)]
        created = now - timedelta(hours=7 * (NOTIFICATIONS_PER_MEMBER - n) + 1)
        unread = n > NOTIFICATIONS_PER_MEMBER - UNREAD_PER_MEMBER
        title = {
            "reservation_approved": f"Reservation #{300 + n} was approved",
            "comment": f"New comment on reservation #{300 + n}",
            "reservation_remind": f"Tomorrow: projector for reservation #{300 + n}",
            "security": "New sign-in to your account",
        }[kind]
        rows.append(
            dict(
                user_id=user_id,
                type=kind,
                title=title,
                body="Open it to see the details.",
                link_path=f"/inbox?filter=all#r{300 + n}",
                dedupe_key=f"demo:{n}",
                created_at=created,
                read_at=None if unread else created + timedelta(hours=1),
            )
        )
    return rows


def seed_notifications(user_ids: list[int], now: datetime) -> None:
    """Give each member a few dozen notifications, the newest unread (no duplicates on re-run)."""
    rows = [row for user_id in user_ids for row in _demo_notifications(user_id, now)]
    stmt = insert(Notification).values(rows).on_conflict_do_nothing(constraint="notifications_dedupe")
    db.session.execute(stmt)


def seed_announcements(now: datetime) -> None:
    """Add one active, one expired and one scheduled announcement, once."""
    wanted = [
        (
            "Welcome to Hato",
            "Your notifications and announcements now live in **one inbox**.\n\n"
            "- Mark things read or archive them\n- Choose channels under *Preferences*",
            now - timedelta(days=1),
            None,
        ),
        (
            "Maintenance finished",
            "Last week's maintenance window is over.",
            now - timedelta(days=14),
            now - timedelta(days=7),
        ),
        (
            "New rooms next month",
            "Two new meeting rooms can be reserved from next month.",
            now + timedelta(days=3),
            None,
        ),
    ]
    existing = set(db.session.scalars(sa.select(Announcement.title)))
    for title, body, published_at, expires_at in wanted:
        if title not in existing:
            db.session.add(
                Announcement(
                    title=title, body=body, body_format="markdown", published_at=published_at, expires_at=expires_at
                )
            )


def seed() -> None:
    """Load all demo data; running it twice leaves the same rows."""
    now = datetime.now(UTC)
    seed_types()
    users = [
        create_or_update_user(
            a["email"],
            a["password"],
            role=a["role"],
            display_name=a["name"],
            external_id=a["external_id"],
            locale=a["locale"],
            timezone=a["timezone"],
        )
        for a in DEMO_ACCOUNTS
    ]
    seed_notifications([u.id for u in users if u.role == "member"], now)
    seed_announcements(now)
    db.session.flush()


@demo_cli.command("seed")
def demo_seed_command() -> None:
    """Load the demo data (safe to run again) and print the demo logins. Dev mode only (HATO_DEV=1)."""
    if not current_app.config.get("DEV_MODE"):
        # The demo admin's password is in this file: on a real database it would be anyone's way in.
        raise click.ClickException(
            "demo seed creates an admin whose password is published; it runs only in dev mode "
            "(HATO_DEV=1, which make run sets). Nothing was changed."
        )
    seed()
    commit()
    click.echo("Demo data loaded. Sign in with:")
    for account in DEMO_ACCOUNTS:
        click.echo(f"  {account['role']:<9} {account['email']:<24} password: {account['password']}")
