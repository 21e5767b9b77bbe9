"""A chat template's optional rich parts (issue 29 item 7): Slack Block Kit, a Teams Adaptive Card, a LINE Flex
message, each JSON whose strings are templates (app/delivery/rich_json.py).

Empty parts send the template's plain text, so every template keeps working.

Revision ID: 0029_chat_templates
Revises: 0028_phone_verification
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0029_chat_templates"
down_revision = "0028_phone_verification"
branch_labels = None
depends_on = None

PARTS = ("slack_blocks", "teams_card", "line_flex")


def upgrade():
    for table in ("message_templates", "message_template_versions"):
        for part in PARTS:
            op.add_column(table, sa.Column(part, sa.Text, nullable=False, server_default=""))


def downgrade():
    for table in ("message_templates", "message_template_versions"):
        for part in PARTS:
            op.drop_column(table, part)
