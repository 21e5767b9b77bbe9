"""The users table: end users, operators and admins."""

from __future__ import annotations

from datetime import datetime, time

import sqlalchemy as sa
from flask_login import UserMixin
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash

from app.extensions import db

ROLES = ("member", "operator", "admin")
# Where a member's SMS consent came from: the product's API, the member on the preferences page, a reply (STOP).
CONSENT_SOURCES = ("api", "member", "keyword")


class User(UserMixin, db.Model):
    """A person who reads an inbox; operators and admins also run the console."""

    __tablename__ = "users"
    __table_args__ = (
        sa.CheckConstraint(f"role IN {ROLES!r}", name="users_role"),
        sa.Index("users_email_key", sa.text("lower(email)"), unique=True),
        sa.CheckConstraint(r"phone ~ '^\+[1-9][0-9]{6,14}$'", name="users_phone_e164"),
        sa.CheckConstraint(f"sms_consent_source IN {CONSENT_SOURCES!r}", name="users_sms_consent_source"),
        sa.Index("users_phone_idx", "phone", postgresql_where=sa.text("phone IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    external_id: Mapped[str | None] = mapped_column(sa.Text, unique=True)
    email: Mapped[str | None] = mapped_column(sa.Text)
    display_name: Mapped[str] = mapped_column(sa.Text, server_default="")
    locale: Mapped[str | None] = mapped_column(sa.Text)  # NULL: not chosen (Accept-Language, then DEFAULT_LOCALE)
    timezone: Mapped[str] = mapped_column(sa.Text, server_default="UTC")
    # What the product says of the member (PUT /v1/users), for workflow conditions as recipient.properties (0034).
    properties: Mapped[dict] = mapped_column(JSONB, server_default=sa.text("'{}'::jsonb"))
    role: Mapped[str] = mapped_column(sa.Text, server_default="member")
    password_hash: Mapped[str | None] = mapped_column(sa.Text)
    quiet_hours_start: Mapped[time | None] = mapped_column(sa.Time)
    quiet_hours_end: Mapped[time | None] = mapped_column(sa.Time)
    digest_time: Mapped[time | None] = mapped_column(sa.Time)  # the daily digest's local time; NULL = 09:00
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), server_default=sa.func.now())
    # Bumped to end every session at once (sign out everywhere, password or role change).
    session_version: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    # SMS (0024): the number as E.164, when it was verified (a code, or the product's API vouching for it), and
    # when a provider refused it for good; the consent in force, with when and from where it came.
    phone: Mapped[str | None] = mapped_column(sa.Text)
    phone_verified_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    phone_invalidated_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    phone_invalid_reason: Mapped[str | None] = mapped_column(sa.Text)
    sms_opt_in: Mapped[bool] = mapped_column(sa.Boolean, server_default=sa.false())
    sms_opt_in_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    sms_consent_source: Mapped[str | None] = mapped_column(sa.Text)

    def set_password(self, password: str) -> None:
        """Store a scrypt hash of password."""
        self.password_hash = generate_password_hash(password, method="scrypt")

    def check_password(self, password: str) -> bool:
        """Return whether password matches the stored hash (False when none is set)."""
        return bool(self.password_hash) and check_password_hash(self.password_hash, password)

    @property
    def is_operator(self) -> bool:
        """Operators and admins may use the console."""
        return self.role in ("operator", "admin")

    @property
    def is_admin(self) -> bool:
        """Admins may also manage API keys and roles."""
        return self.role == "admin"

    @property
    def name(self) -> str:
        """What the header shows: the display name, else the e-mail."""
        return self.display_name or self.email or f"user {self.id}"


class SmsConsent(db.Model):
    """One change of a member's SMS consent: the number then, in or out, from where (CONSENT_SOURCES), and when."""

    __tablename__ = "sms_consents"
    __table_args__ = (sa.CheckConstraint(f"source IN {CONSENT_SOURCES!r}", name="sms_consents_source"),)

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    phone: Mapped[str | None] = mapped_column(sa.Text)
    opted_in: Mapped[bool] = mapped_column(sa.Boolean)
    source: Mapped[str] = mapped_column(sa.Text)
    detail: Mapped[str] = mapped_column(sa.Text, server_default="")
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), server_default=sa.func.now())


class OidcAccount(db.Model):
    """The link from an OpenID Connect identity (issuer, subject) to the Hato account it signs in as."""

    __tablename__ = "oidc_accounts"

    issuer: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    subject: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), server_default=sa.func.now())
    last_sign_in_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), server_default=sa.func.now())
