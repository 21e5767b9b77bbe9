"""Suppression writes: lift one (audited); a hard bounce or a complaint adds one (the e-mail channel at send
time, or a provider's webhook afterwards, app/hooks)."""

from __future__ import annotations

import sqlalchemy as sa
from flask_babel import gettext

from app.audit import service as audit
from app.extensions import db
from app.models import EmailSuppression
from app.refusal import Refused

SUPPRESSION_FIELDS = ("address", "reason", "detail", "created_at")

# An address is suppressed once: a later bounce keeps the first reason and detail.
SUPPRESS_BOUNCE_SQL = sa.text(
    """
INSERT INTO email_suppressions (address, reason, detail)
VALUES (lower(btrim(:address)), 'bounce', :detail)
ON CONFLICT (address) DO NOTHING
"""
)


# A provider's webhook: a hard bounce or a spam complaint; the first reason stays.
SUPPRESS_SQL = sa.text(
    """
INSERT INTO email_suppressions (address, reason, detail)
VALUES (lower(btrim(:address)), :reason, :detail)
ON CONFLICT (address) DO NOTHING
"""
)


def lift_suppression(actor, address: str) -> None:
    """Delete a suppression so the address receives e-mail again."""
    item = db.session.get(EmailSuppression, address.strip().lower(), with_for_update=True)
    if item is None:
        raise Refused(gettext("That address is not suppressed (any more)."))
    before = audit.snapshot(item, SUPPRESSION_FIELDS)
    db.session.delete(item)
    db.session.flush()
    audit.record(actor, "suppression.lift", "email_suppression", before["address"], before=before)


def suppress_bounce(conn, address: str, detail: str) -> None:
    """Suppress an address that hard-bounced (on conn: the send loop's own autocommit connection)."""
    conn.execute(SUPPRESS_BOUNCE_SQL, {"address": address, "detail": detail})


def suppress(address: str, reason: str, detail: str) -> None:
    """Suppress an address (reason bounce | complaint) in the caller's transaction; an existing entry stays."""
    db.session.execute(SUPPRESS_SQL, {"address": address, "reason": reason, "detail": detail[:500]})
