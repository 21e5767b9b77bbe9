"""What SMS providers and replies change about a member: a number refused for good, consent withdrawn or restored.

A reply of STOP (and its like) suppresses the number itself (sms_suppressions), whoever has it: a member who is
opted in again through the API or the preferences page still gets no SMS there until the number replies START,
as carriers require. START lifts the suppression and restores the consent of the members a keyword took it from
(source keyword, which a carrier's "unsubscribed recipient" answer also records); a consent the member or the
product withdrew stays withdrawn.
"""

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

SUPPRESS_SQL = sa.text(
    """
INSERT INTO sms_suppressions (phone, provider, detail) VALUES (:phone, :provider, :detail)
ON CONFLICT (phone) DO NOTHING
"""
)

# Every member with the number (users_phone_idx) withdraws, each recorded once.
WITHDRAW_NUMBER_SQL = sa.text(
    """
WITH changed AS (
  UPDATE users SET sms_opt_in = false, sms_opt_in_at = now(), sms_consent_source = 'keyword'
  WHERE phone = :phone AND sms_opt_in
  RETURNING id, phone)
INSERT INTO sms_consents (user_id, phone, opted_in, source, detail)
SELECT id, phone, false, 'keyword', :detail FROM changed
RETURNING user_id
"""
)

LIFT_SQL = sa.text("DELETE FROM sms_suppressions WHERE phone = :phone")

RESTORE_NUMBER_SQL = sa.text(
    """
WITH changed AS (
  UPDATE users SET sms_opt_in = true, sms_opt_in_at = now(), sms_consent_source = 'keyword'
  WHERE phone = :phone AND NOT sms_opt_in AND sms_consent_source = 'keyword'
  RETURNING id, phone)
INSERT INTO sms_consents (user_id, phone, opted_in, source, detail)
SELECT id, phone, true, 'keyword', :detail FROM changed
RETURNING user_id
"""
)


def mark_invalid(conn, user_id: int, phone: str | None, reason: str) -> None:
    """The provider refused the member's number for good: no SMS goes to it until it changes (on conn)."""
    if phone:
        conn.execute(INVALIDATE_SQL, {"user_id": user_id, "phone": phone, "reason": reason})


def withdraw(conn, user_id: int, source: str, detail: str) -> None:
    """The member withdrew their SMS consent (source: member, keyword, api), recorded with why (on conn)."""
    conn.execute(WITHDRAW_SQL, {"user_id": user_id, "source": source, "detail": detail})


def stop_number(conn, phone: str, provider: str, detail: str) -> list[int]:
    """The number replied STOP: suppress it and withdraw every member's consent there; the members withdrawn."""
    conn.execute(SUPPRESS_SQL, {"phone": phone, "provider": provider, "detail": detail})
    return list(conn.execute(WITHDRAW_NUMBER_SQL, {"phone": phone, "detail": detail}).scalars())


def start_number(conn, phone: str, detail: str) -> list[int]:
    """The number replied START: lift its suppression and restore what a keyword withdrew; the members restored."""
    conn.execute(LIFT_SQL, {"phone": phone})
    return list(conn.execute(RESTORE_NUMBER_SQL, {"phone": phone, "detail": detail}).scalars())
