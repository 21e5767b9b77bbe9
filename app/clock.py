"""The database's clock: rules about "now" read it, so every process and transaction agrees on the time."""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa

from app.extensions import db

# A "send/publish at" a little in the past is a slow form, not a mistake; more than this is a mistake.
PAST_GRACE = timedelta(minutes=1)


def db_now() -> datetime:
    """The database's now() (the transaction's start), what inbox and ledger queries compare against."""
    return db.session.execute(sa.select(sa.func.now())).scalar_one()
