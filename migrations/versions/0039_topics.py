"""Topics (issue 32): topics, who follows them, and the fanouts of a notification to a topic.

topic_subscriptions is keyed (user_id, topic_id), user_id first like every per-user table (migration 0016), so
a topic's fanout stays co-located with the rows it writes; (topic_id, user_id) is the fanout's and the API's
keyset walk over one topic. topic_fanouts carries what one POST /v1/notifications with `topic` asked for and its
cursor, as campaigns do. notifications.topic_id says which topic a row came from (the inbox's "Unfollow").

Revision ID: 0039_topics
Revises: 0038_tenants
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0039_topics"
down_revision = "0038_tenants"
branch_labels = None
depends_on = None

_tz = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "topics",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        sa.Column("created_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("key", name="topics_key_key"),
    )
    op.create_table(
        "topic_subscriptions",
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("topic_id", sa.BigInteger(), sa.ForeignKey("topics.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("user_id", "topic_id", name="topic_subscriptions_pkey"),
    )
    op.create_index("topic_subscriptions_topic_idx", "topic_subscriptions", ["topic_id", "user_id"], unique=True)
    op.create_table(
        "topic_fanouts",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column("topic_id", sa.BigInteger(), sa.ForeignKey("topics.id", ondelete="SET NULL"), nullable=True),
        sa.Column("topic_key", sa.Text(), nullable=False),
        sa.Column("api_key_id", sa.BigInteger(), sa.ForeignKey("api_keys.id", ondelete="SET NULL"), nullable=True),
        sa.Column("type", sa.Text(), sa.ForeignKey("notification_types.type"), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("link_path", sa.Text(), nullable=True),
        sa.Column("data", JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("dedupe_key", sa.Text(), nullable=False),
        sa.Column("group_key", sa.Text(), nullable=True),
        sa.Column("cancellation_key", sa.Text(), nullable=True),
        sa.Column("route", sa.ARRAY(sa.Text()), nullable=True),
        sa.Column("channel_mode", sa.Text(), nullable=True),
        sa.Column("excluded_user_ids", sa.ARRAY(sa.BigInteger()), nullable=False, server_default="{}"),
        sa.Column("status", sa.Text(), nullable=False, server_default="running"),
        sa.Column("total", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("done", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("created", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cursor_user_id", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.Column("finished_at", _tz, nullable=True),
        sa.CheckConstraint("status IN ('running', 'done', 'failed')", name="topic_fanouts_status"),
    )
    op.create_index("topic_fanouts_list_idx", "topic_fanouts", [sa.text("created_at DESC"), sa.text("id DESC")])
    op.create_index(
        "topic_fanouts_running_idx", "topic_fanouts", ["id"], postgresql_where=sa.text("status = 'running'")
    )
    op.add_column("notifications", sa.Column("topic_id", sa.BigInteger(), nullable=True))


def downgrade():
    op.drop_column("notifications", "topic_id")
    op.drop_table("topic_fanouts")
    op.drop_table("topic_subscriptions")
    op.drop_table("topics")
