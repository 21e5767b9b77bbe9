"""What SMS providers and replies change about a member: a number refused for good, consent withdrawn."""

from __future__ import annotations

import sqlalchemy as sa

# Only while the number is still the one that was refused (the member may have changed it meanwhile).
INVALIDATE_SQL = sa.text(
    """
UPDATE users SET phone_invalidated_at = now(), phone_invalid_reason = :reason
WHERE id = :user_id AND phone = :phone AND phone_invalidated_at IS NULL
"""
)

# Withdrawn once: a second refusal of an already withdrawn consent changes nothing and records nothing.
WITHDRAW_SQL = sa.text(
    """
WITH changed AS (
  UPDATE users SET sms_opt_in = false, sms_opt_in_at = now(), sms_consent_source = :source
  WHERE id = :user_id AND sms_opt_in
  RETURNING id, phone)
INSERT INTO sms_consents (user_id, phone, opted_in, source, detail)
SELECT id, phone, false, :source, :detail FROM changed
"""
)


def mark_invalid(conn, user_id: int, phone: str | None, reason: str) -> None:
    """The provider refused the member's number for good: no SMS goes to it until it changes (on conn)."""
    if phone:
        conn.execute(INVALIDATE_SQL, {"user_id": user_id, "phone": phone, "reason": reason})


def withdraw(conn, user_id: int, source: str, detail: str) -> None:
    """The member withdrew their SMS consent (source: member, keyword, api), recorded with why (on conn)."""
    conn.execute(WITHDRAW_SQL, {"user_id": user_id, "source": source, "detail": detail})
