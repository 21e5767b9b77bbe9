"""Chat accounts: where a member's chat messages go, per chat provider (Slack, Teams, Discord, LINE)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

CHAT_PROVIDERS = ("slack", "msteams", "discord", "line")


class ChatAccount(db.Model):
    """One member's channel data for one chat provider (a Slack channel or webhook, a LINE user id …).

    Keyed (user_id, provider) like every per-user table (0016): one account per provider. A provider that
    refuses it for good (Slack channel_not_found, a deleted webhook's 404) invalidates it with the reason; the
    product's next PUT, or the member's unlink, replaces it.
    """

    __tablename__ = "chat_accounts"
    __table_args__ = (sa.CheckConstraint(f"provider IN {CHAT_PROVIDERS!r}", name="chat_accounts_provider"),)

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    provider: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    data: Mapped[dict] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), server_default=sa.func.now())
    invalidated_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    invalid_reason: Mapped[str | None] = mapped_column(sa.Text)
