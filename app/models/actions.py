"""Action buttons' clicks (issue 33): one row per member, notification and named action."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db

_tz = sa.DateTime(timezone=True)


class NotificationActionClick(db.Model):
    """A named action clicked (its key makes a second click send nothing), and the state the product answered."""

    __tablename__ = "notification_action_clicks"
    __table_args__ = (
        sa.ForeignKeyConstraint(
            ["notification_id", "user_id"], ["notifications.id", "notifications.user_id"], ondelete="CASCADE"
        ),
    )

    # user_id first: the distribution column (0016, docs/scaling.md).
    user_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    notification_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    name: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    # NULL when the product answered (PATCH) before the member clicked: the button is then closed unsent.
    clicked_at: Mapped[datetime | None] = mapped_column(_tz)
    via: Mapped[str | None] = mapped_column(sa.Text)  # inbox | feed | email | push
    state: Mapped[str | None] = mapped_column(sa.Text)  # the product's answer, such as "Approved"
    state_at: Mapped[datetime | None] = mapped_column(_tz)
