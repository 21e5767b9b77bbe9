"""`flask --app wsgi demo seed`: the demo data `make run` loads (safe to repeat), and its logins; dev mode only.

The seed article's four types, members, an operator, an admin, notifications and announcements. One member,
hanako, reads Hato in Japanese (locale ja, Asia/Tokyo): her notifications are worded as the requirement
documents' examples (予約 #310 が承認されました…), and the demo types have Japanese e-mail templates. Bob's
locale de has no catalog, so he shows the fallback to English. Type labels and notification titles are data,
not catalog entries; what the command prints is (in DEFAULT_LOCALE's language).

Alice has a phone, two in fact: an iPhone (APNs) and an Android phone (FCM), registered as the demo app
would at its start. Their tokens are made up and fixed, so a second seed refreshes the same two devices.
Her number takes SMS too (with her consent, as the product's API would set them), and "Reservation approved"
goes by SMS besides e-mail and push.
Once, she is also sent a notification through the real pipeline (a type with push on by default), so
`make run`'s worker sends it to her phones (through the local APNs/FCM stand-ins) and her e-mail, and the
delivery log shows it going out.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click
import sqlalchemy as sa
from flask import current_app
from flask.cli import AppGroup
from flask_babel import gettext
from sqlalchemy.dialects.postgresql import insert

from app.cli.demo_data import (
    DEMO_ACCOUNTS,
    DEMO_ANNOUNCEMENTS_JA,
    DEMO_PHONES,
    DEMO_SLACK_MEMBER,
    DEMO_SMS_NUMBER,
    DEMO_TEMPLATES_JA,
    DEMO_TYPES,
    DEMO_TYPES_JA,
    DEMO_WORDING,
    NOTIFICATIONS_PER_MEMBER,
    PHONE_OWNER,
    PHONE_PUSH_NUMBER,
    PHONE_PUSH_TYPE,
    UNREAD_PER_MEMBER,
)
from app.devices import service as devices
from app.extensions import db
from app.models import Announcement, MessageTemplate, Notification, NotificationType
from app.notify.service import notify
from app.unitofwork import commit
from app.users import chat_accounts
from app.users.service import create_or_update_user, upsert_member
from app.workflows import service as workflows

demo_cli = AppGroup("demo", help="Demo data.")


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
            locales={"ja": dict(zip(("label", "description"), DEMO_TYPES_JA[t], strict=True))},
        )
        for t, label, in_app, email, push, mandatory, priority, description in DEMO_TYPES
    ]
    stmt = insert(NotificationType).values(rows)
    # An operator's edits are kept; a type seeded before it had variants gets the Japanese ones.
    db.session.execute(
        stmt.on_conflict_do_update(
            index_elements=["type"],
            set_={"locales": stmt.excluded.locales},
            where=NotificationType.locales == sa.text("'{}'::jsonb"),
        )
    )
    workflows.ensure_versions()  # each type's version 1: in-app, then every channel the member has on


def seed_templates() -> None:
    """Insert the Japanese e-mail templates of the demo types (an operator's later edits are kept)."""
    rows = [
        dict(type=type_, channel="email", locale="ja", subject=subject, body_text=body_text, body_html="")
        for type_, subject, body_text in DEMO_TEMPLATES_JA
    ]
    stmt = insert(MessageTemplate).values(rows).on_conflict_do_nothing(constraint="message_templates_once")
    db.session.execute(stmt)


def _demo_notifications(user_id: int, now: datetime, locale: str | None = None) -> list[dict]:
    kinds = ["reservation_approved", "comment", "reservation_remind", "comment", "security"]
    wording = DEMO_WORDING.get((locale or "").split("-")[0], DEMO_WORDING["en"])
    rows = []
    for n in range(1, NOTIFICATIONS_PER_MEMBER + 1):
        kind = kinds[n % len(kinds)]
        created = now - timedelta(hours=7 * (NOTIFICATIONS_PER_MEMBER - n) + 1)
        unread = n > NOTIFICATIONS_PER_MEMBER - UNREAD_PER_MEMBER
        rows.append(
            dict(
                user_id=user_id,
                type=kind,
                title=wording["titles"][kind].format(n=300 + n),
                body=wording["body"],
                link_path=f"/inbox?filter=all#r{300 + n}",
                dedupe_key=f"demo:{n}",
                created_at=created,
                read_at=None if unread else created + timedelta(hours=1),
            )
        )
    return rows


def seed_notifications(members: list[tuple[int, str | None]], now: datetime) -> None:
    """Give each (user id, locale) member a few dozen notifications in their language, the newest unread.

    No duplicates on re-run (the dedupe keys are the same).
    """
    rows = [row for user_id, locale in members for row in _demo_notifications(user_id, now, locale)]
    stmt = insert(Notification).values(rows).on_conflict_do_nothing(constraint="notifications_dedupe")
    db.session.execute(stmt)


def seed_phones(user_id: int) -> None:
    """Register (or refresh) alice's iPhone and Android phone; the iPhone with the APNs topic in force."""
    for phone in DEMO_PHONES:
        app_id = current_app.config["APNS_TOPIC"] if phone["platform"] == "ios" else None
        devices.register(user_id, {**phone, "app_id": app_id or None})


def seed_sms() -> None:
    """Alice's number with her consent, as the product's API sets them; "Reservation approved" goes by SMS too."""
    upsert_member(PHONE_OWNER, {"phone": DEMO_SMS_NUMBER, "sms_opt_in": True})
    db.session.execute(
        sa.text("UPDATE notification_types SET default_channels = array_append(default_channels, 'sms') "
                "WHERE type = :type AND NOT 'sms' = ANY(default_channels)"),
        {"type": PHONE_PUSH_TYPE},
    )  # fmt: skip


def seed_chat(user_id: int) -> None:
    """Alice's Slack DM, as the product's API links it; "Reservation approved" goes to chat too."""
    chat_accounts.put_account(user_id, "slack", {"channel": DEMO_SLACK_MEMBER})
    db.session.execute(
        sa.text("UPDATE notification_types SET default_channels = array_append(default_channels, 'chat') "
                "WHERE type = :type AND NOT 'chat' = ANY(default_channels)"),
        {"type": PHONE_PUSH_TYPE},
    )  # fmt: skip


def send_phone_push(user_id: int, locale: str | None) -> None:
    """Send alice one notification through the pipeline (e-mail and push: her phones), once."""
    wording = DEMO_WORDING.get((locale or "").split("-")[0], DEMO_WORDING["en"])
    notify(
        [user_id],
        by="user_id",
        type_=PHONE_PUSH_TYPE,
        title=wording["titles"][PHONE_PUSH_TYPE].format(n=PHONE_PUSH_NUMBER),
        body=wording["body"],
        link_path=f"/inbox?filter=all#r{PHONE_PUSH_NUMBER}",
        dedupe_key="demo:phone",
    )


def seed_announcements(now: datetime) -> None:
    """Add one active, one expired and one scheduled announcement (with their Japanese), once."""
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
    existing = {a.title: a for a in db.session.scalars(sa.select(Announcement))}
    for title, body, published_at, expires_at in wanted:
        locales = {"ja": dict(zip(("title", "body"), DEMO_ANNOUNCEMENTS_JA[title], strict=True))}
        if title not in existing:
            db.session.add(
                Announcement(
                    title=title,
                    body=body,
                    body_format="markdown",
                    published_at=published_at,
                    expires_at=expires_at,
                    locales=locales,
                )
            )
        elif not existing[title].locales:  # seeded before it had variants
            existing[title].locales = locales


def seed() -> None:
    """Load all demo data; running it twice leaves the same rows."""
    now = datetime.now(UTC)
    seed_types()
    seed_templates()
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
    seed_notifications([(u.id, u.locale) for u in users if u.role == "member"], now)
    seed_announcements(now)
    alice = next(u for u in users if u.external_id == PHONE_OWNER)
    seed_phones(alice.id)
    seed_sms()
    seed_chat(alice.id)
    db.session.flush()
    send_phone_push(alice.id, alice.locale)


@demo_cli.command("seed")
def demo_seed_command() -> None:
    """Load the demo data (safe to run again) and print the demo logins. Dev mode only (HATO_DEV=1)."""
    if not current_app.config.get("DEV_MODE"):
        # The demo admin's password is in this file: on a real database it would be anyone's way in.
        raise click.ClickException(
            gettext(
                "demo seed creates an admin whose password is published; it runs only in dev mode "
                "(HATO_DEV=1, which make run sets). Nothing was changed."
            )
        )
    seed()
    commit()
    click.echo(gettext("Demo data loaded. Sign in with:"))
    for account in DEMO_ACCOUNTS:
        # The role and the language are data (as stored); the columns are padded before they are placed.
        role, email, password = account["role"].ljust(9), account["email"].ljust(24), account["password"].ljust(16)
        line = gettext(
            "%(role)s %(email)s password: %(password)s  (%(locale)s, %(timezone)s)",
            role=role,
            email=email,
            password=password,
            locale=account["locale"],
            timezone=account["timezone"],
        )
        click.echo("  " + line)
    click.echo(gettext("alice@example.com has two phones for push: an iPhone (APNs) and an Android phone (FCM)."))
