"""SMS status and replies in (issue 29): SMS provider events and statuses, and numbers that replied STOP.

provider_events takes the SMS statuses Twilio's and Vonage's callbacks report (queued, sent, read, undelivered,
failed, canceled beside e-mail's delivered …), and notification_deliveries.provider_status the ones a delivery
can end in (sent < delivered < read; canceled, undelivered and failed final). sms_suppressions holds each number
that replied STOP (STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT, 停止) until it replies START or UNSTOP: the number
is refused whoever has it and whatever consent the API records meanwhile, so sms_receivers (0025) leaves it out
(sms_reachable reads the view, so the ingest's statement does not change).

Revision ID: 0027_sms_status_replies
Revises: 0026_chat_accounts
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0027_sms_status_replies"
down_revision = "0026_chat_accounts"
branch_labels = None
depends_on = None

OLD_EVENTS = ("delivered", "bounced", "soft_bounced", "complained", "opened", "clicked")
NEW_EVENTS = OLD_EVENTS + ("queued", "sent", "read", "undelivered", "failed", "canceled")
OLD_STATUSES = ("delivered", "bounced", "complained")
NEW_STATUSES = ("sent", "delivered", "read", "canceled", "undelivered", "failed", "bounced", "complained")

RECEIVERS = """
CREATE OR REPLACE VIEW sms_receivers AS
SELECT id AS user_id FROM users
WHERE phone IS NOT NULL AND phone_verified_at IS NOT NULL AND phone_invalidated_at IS NULL AND sms_opt_in{extra}
"""
NOT_SUPPRESSED = "\n  AND NOT EXISTS (SELECT FROM sms_suppressions s WHERE s.phone = users.phone)"


def _checks(events: tuple, statuses: tuple) -> None:
    op.drop_constraint("provider_events_event", "provider_events", type_="check")
    op.create_check_constraint("provider_events_event", "provider_events", f"event IN {events!r}")
    op.drop_constraint("notification_deliveries_provider_status", "notification_deliveries", type_="check")
    op.create_check_constraint(
        "notification_deliveries_provider_status",
        "notification_deliveries",
        f"provider_status IS NULL OR provider_status IN {statuses!r}",
    )


def upgrade():
    _checks(NEW_EVENTS, NEW_STATUSES)
    op.create_table(
        "sms_suppressions",
        sa.Column("phone", sa.Text(), primary_key=True),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), server_default="", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint(r"phone ~ '^\+[1-9][0-9]{6,14}$'", name="sms_suppressions_phone_e164"),
    )
    op.execute(RECEIVERS.format(extra=NOT_SUPPRESSED))


def downgrade():
    op.execute(RECEIVERS.format(extra=""))
    op.drop_table("sms_suppressions")
    op.execute(f"DELETE FROM provider_events WHERE event NOT IN {OLD_EVENTS!r}")
    op.execute(
        f"UPDATE notification_deliveries SET provider_status = NULL, provider_status_at = NULL "
        f"WHERE provider_status NOT IN {OLD_STATUSES!r}"
    )
    _checks(OLD_EVENTS, OLD_STATUSES)
