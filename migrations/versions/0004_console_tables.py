"""Console I: audit log, template history, announcement authorship and body format.

Revision ID: 0004_console_tables
Revises: 0003_delivery_tables
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004_console_tables"
down_revision = "0003_delivery_tables"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "actor_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="SET NULL", name="fk_audit_log_actor_id_users"),
            nullable=True,
        ),
        sa.Column("actor_label", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("target_type", sa.Text(), nullable=False),
        sa.Column("target_id", sa.Text(), server_default="", nullable=False),
        sa.Column("before", postgresql.JSONB(), nullable=True),
        sa.Column("after", postgresql.JSONB(), nullable=True),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
    )
    op.create_index("audit_log_list_idx", "audit_log", [sa.text("created_at DESC"), sa.text("id DESC")])
    op.create_index("audit_log_actor_idx", "audit_log", ["actor_id", sa.text("created_at DESC")])
    op.create_table(
        "message_template_versions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "template_id",
            sa.BigInteger(),
            sa.ForeignKey(
                "message_templates.id",
                ondelete="CASCADE",
                name="fk_message_template_versions_template_id_message_templates",
            ),
            nullable=False,
        ),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("body_text", sa.Text(), nullable=False),
        sa.Column("body_html", sa.Text(), nullable=False),
        sa.Column(
            "updated_by",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="SET NULL", name="fk_message_template_versions_updated_by_users"),
            nullable=True,
        ),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
    )
    op.create_index(
        "message_template_versions_template_idx", "message_template_versions", ["template_id", sa.text("id DESC")]
    )
    op.add_column("announcements", sa.Column("body_format", sa.Text(), server_default="plain", nullable=False))
    op.add_column(
        "announcements",
        sa.Column(
            "created_by",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="SET NULL", name="fk_announcements_created_by_users"),
            nullable=True,
        ),
    )
    op.add_column("announcements", sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False))
    op.add_column("announcements", sa.Column("updated_at", TZ, server_default=sa.text("now()"), nullable=False))
    op.create_check_constraint("announcements_body_format", "announcements", "body_format IN ('plain', 'markdown')")


def downgrade():
    op.drop_constraint("announcements_body_format", "announcements", type_="check")
    for column in ("updated_at", "created_at", "created_by", "body_format"):
        op.drop_column("announcements", column)
    op.drop_table("message_template_versions")
    op.drop_table("audit_log")
