"""A push template's optional phone variant (issue 28 item 6): title, subtitle (iOS) and body for phones.

Empty parts fall back to the template's own title and body, so every existing template keeps working.

Revision ID: 0021_mobile_templates
Revises: 0020_push_subscription_switch
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0021_mobile_templates"
down_revision = "0020_push_subscription_switch"
branch_labels = None
depends_on = None

PARTS = ("mobile_title", "mobile_subtitle", "mobile_body")


def upgrade():
    for table in ("message_templates", "message_template_versions"):
        for part in PARTS:
            op.add_column(table, sa.Column(part, sa.Text, nullable=False, server_default=""))


def downgrade():
    for table in ("message_templates", "message_template_versions"):
        for part in PARTS:
            op.drop_column(table, part)
