"""Webhooks out (issue 18): operators' endpoints, the outbox of signed events, and every try.

webhook_endpoints: URL, the event types wanted, enabled; the signing secret encrypted with a key
derived from SECRET_KEY (it must be recoverable to sign, see SECURITY.md), secret_hint its last
characters for the console. webhook_deliveries is the outbox: one row per (event, endpoint),
inserted in the transaction of the change that produced the event, the payload JSON built then
(stable across retries), webhook_id the Standard Webhooks message id, the same on every retry.
Its state machine is the delivery ledger's (pending → sending under a lease → sent | pending again
| failed = the DLQ). webhook_attempts keeps each try: outcome, latency and the response code.

Revision ID: 0015_webhooks
Revises: 0014_retention
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0015_webhooks"
down_revision = "0014_retention"
branch_labels = None
depends_on = None

_tz = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        sa.Column("event_types", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.Column("secret_sealed", sa.Text(), nullable=False),
        sa.Column("secret_hint", sa.Text(), nullable=False),
        sa.Column("created_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("length(url) <= 2000", name="webhook_endpoints_url_length"),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "endpoint_id", sa.BigInteger(), sa.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("webhook_id", sa.Text(), nullable=False),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("occurred_at", _tz, nullable=False),
        sa.Column("status", sa.Text(), nullable=False, server_default="pending"),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("next_attempt_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.Column("locked_until", _tz, nullable=True),
        sa.Column("held_since", _tz, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("error_kind", sa.Text(), nullable=True),
        sa.Column("response_code", sa.Integer(), nullable=True),
        sa.Column("sent_at", _tz, nullable=True),
        sa.Column("created_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("endpoint_id", "webhook_id", name="webhook_deliveries_once"),
        sa.CheckConstraint("status IN ('pending', 'sending', 'sent', 'failed')", name="webhook_deliveries_status"),
    )
    op.create_index(
        "webhook_deliveries_due_idx",
        "webhook_deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text("status IN ('pending', 'sending')"),
    )
    op.create_index("webhook_deliveries_endpoint_idx", "webhook_deliveries", ["endpoint_id", sa.text("id DESC")])
    op.create_table(
        "webhook_attempts",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "delivery_id",
            sa.BigInteger(),
            sa.ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("endpoint_id", sa.BigInteger(), nullable=False),
        sa.Column("started_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.Column("duration_ms", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("response_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint("outcome IN ('sent', 'transient', 'permanent', 'held')", name="webhook_attempts_outcome"),
    )
    op.create_index("webhook_attempts_endpoint_idx", "webhook_attempts", ["endpoint_id", sa.text("id DESC")])
    op.create_index("webhook_attempts_delivery_idx", "webhook_attempts", ["delivery_id"])


def downgrade():
    op.drop_table("webhook_attempts")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_endpoints")
