"""One member's data as a JSON document, streamed: profile, preferences, notifications with their deliveries.

The document is written piece by piece as it is read: notifications come in keyset pages of PAGE_SIZE
along notifications_list_idx (newest first, each starting after the last row), each page with its
deliveries fetched in one statement by notification id, so memory holds one page whatever the member's
history (100,000 notifications export in the same few megabytes as 1,000). Everything runs in one REPEATABLE READ
transaction, so the document is one consistent snapshot even while the member's inbox changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, time

import sqlalchemy as sa

from app.extensions import db
from app.users.queries import by_external_id
from app.users.service import NotAMember, UserNotFound

PAGE_SIZE = 1000
FORMAT_VERSION = 1

PROFILE_SQL = sa.text(
    """SELECT external_id, email, display_name, locale, timezone, quiet_hours_start, quiet_hours_end,
              digest_time, created_at, phone, phone_verified_at, sms_opt_in, sms_opt_in_at, sms_consent_source,
              properties
       FROM users WHERE id = :user_id"""
)
CONSENTS_SQL = sa.text(
    "SELECT phone, opted_in, source, detail, created_at FROM sms_consents WHERE user_id = :user_id ORDER BY id"
)
# A push token is a secret of the phone: the export names the phone, not the token.
DEVICES_SQL = sa.text(
    """SELECT platform, app_id, app_version, locale, timezone, created_at, last_seen_at,
              disabled_at IS NOT NULL AS disabled
       FROM devices WHERE user_id = :user_id ORDER BY id"""
)
# A webhook URL is a secret (whoever has it can post): the export names its host only.
CHAT_ACCOUNTS_SQL = sa.text(
    """SELECT provider, data->>'channel' AS channel, data->>'user_id' AS line_user_id,
              substring(data->>'webhook_url' from '^[A-Za-z]+://([^/:?#]+)') AS webhook_host,
              created_at, updated_at, invalidated_at, invalid_reason
       FROM chat_accounts WHERE user_id = :user_id ORDER BY provider"""
)
TOPICS_SQL = sa.text(
    """SELECT t.key, t.name, s.created_at AS followed_at FROM topic_subscriptions s JOIN topics t ON t.id = s.topic_id
       WHERE s.user_id = :user_id ORDER BY t.key"""
)
TENANTS_SQL = sa.text(
    """SELECT t.key, t.name FROM tenant_members m JOIN tenants t ON t.id = m.tenant_id
       WHERE m.user_id = :user_id ORDER BY t.key"""
)
PREFERENCES_SQL = sa.text(
    "SELECT type, channel, enabled FROM notification_preferences WHERE user_id = :user_id ORDER BY type, channel"
)
DIGEST_PREFERENCES_SQL = sa.text(
    "SELECT type, frequency FROM digest_preferences WHERE user_id = :user_id ORDER BY type"
)
ANNOUNCEMENT_READS_SQL = sa.text(
    "SELECT announcement_id, read_at FROM announcement_reads WHERE user_id = :user_id ORDER BY announcement_id"
)
# One keyset page along notifications_list_idx (user_id, created_at DESC, id DESC).
NOTIFICATIONS_SQL = sa.text(
    """SELECT id, type, title, body, link_path AS link, data, dedupe_key, in_app, read_at, archived_at,
              created_at, event_count, actor_count
       FROM notifications
       WHERE user_id = :user_id AND (created_at, id) < (:before_at, :before_id)
       ORDER BY created_at DESC, id DESC
       LIMIT :limit"""
)
# The page's deliveries through notification_deliveries_once (notification_id, channel).
DELIVERIES_SQL = sa.text(
    """SELECT notification_id, channel, status, attempts, provider, sent_at, skip_reason, error_kind,
              provider_status, provider_status_at, created_at, updated_at
       FROM notification_deliveries
       WHERE notification_id = ANY(:ids)
       ORDER BY notification_id, channel"""
)
# After every row: the first page starts here.
AFTER_ALL = (datetime(9999, 12, 31, tzinfo=UTC), 2**63 - 1)


def _default(value):
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _dumps(value) -> str:
    return json.dumps(value, default=_default, ensure_ascii=False, separators=(",", ":"))


def member_id(external_id: str) -> int:
    """The id of the member with this external id (UserNotFound; NotAMember for an operator's account)."""
    row = by_external_id(external_id)
    if row is None:
        raise UserNotFound(external_id)
    if row.role != "member":
        raise NotAMember(external_id)
    return row.id


def _rows(statement: sa.TextClause, params: dict) -> list[dict]:
    return [dict(row._mapping) for row in db.session.execute(statement, params)]


def notification_pages(user_id: int, page_size: int | None = None) -> Iterator[list[dict]]:
    """The member's notifications, newest first, a page at a time (PAGE_SIZE), each with its deliveries."""
    page_size = page_size or PAGE_SIZE
    before_at, before_id = AFTER_ALL
    while True:
        page = _rows(
            NOTIFICATIONS_SQL,
            {"user_id": user_id, "before_at": before_at, "before_id": before_id, "limit": page_size},
        )
        if not page:
            return
        deliveries: dict[int, list[dict]] = {}
        for row in _rows(DELIVERIES_SQL, {"ids": [n["id"] for n in page]}):
            deliveries.setdefault(row.pop("notification_id"), []).append(row)
        for notification in page:
            notification["deliveries"] = deliveries.get(notification["id"], [])
        yield page
        if len(page) < page_size:
            return
        before_at, before_id = page[-1]["created_at"], page[-1]["id"]


def stream(user_id: int, page_size: int | None = None) -> Iterator[str]:
    """The export document of user_id as JSON text chunks (one per notification page)."""
    # One snapshot for the whole document; only reads, so the transaction ends with a rollback.
    db.session.rollback()
    try:
        # Inside a caller's savepoint (the test suite's rolled-back transaction) the outer transaction rules.
        if not db.session.connection().in_nested_transaction():
            db.session.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
        params = {"user_id": user_id}
        profile = next(iter(_rows(PROFILE_SQL, params)), None)  # None: erased since the request began
        yield f'{{"format":{FORMAT_VERSION},"user":{_dumps(profile)}'
        yield f',"preferences":{_dumps(_rows(PREFERENCES_SQL, params))}'
        yield f',"digest_preferences":{_dumps(_rows(DIGEST_PREFERENCES_SQL, params))}'
        yield f',"announcement_reads":{_dumps(_rows(ANNOUNCEMENT_READS_SQL, params))}'
        yield f',"sms_consents":{_dumps(_rows(CONSENTS_SQL, params))}'
        yield f',"devices":{_dumps(_rows(DEVICES_SQL, params))}'
        yield f',"chat_accounts":{_dumps(_rows(CHAT_ACCOUNTS_SQL, params))}'
        yield f',"topics":{_dumps(_rows(TOPICS_SQL, params))}'
        yield f',"tenants":{_dumps(_rows(TENANTS_SQL, params))}'
        yield ',"notifications":['
        first = True
        for page in notification_pages(user_id, page_size):
            body = ",".join(_dumps(notification) for notification in page)
            yield body if first else "," + body
            first = False
        yield "]}"
    finally:
        db.session.rollback()
