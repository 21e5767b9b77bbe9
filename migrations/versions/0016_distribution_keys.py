"""Distribution keys: every per-user table carries user_id in its primary key and unique constraints.

The condition for distributing the per-user tables by user_id and co-locating them (Citus, see
docs/scaling.md): a shard can enforce a primary key, a unique constraint or a foreign key only when
it includes the distribution column. So
- notification_deliveries, delivery_attempts and provider_events gain user_id, filled from the parent
  row (provider events no delivery matched have no user: user_id 0, which no user has);
- the primary keys of notifications, notification_deliveries, delivery_attempts, notification_events,
  scheduled_notifications, digest_runs and provider_events become (id, user_id), delivery_cap_uses'
  (delivery_id, user_id): id stays leading, so a lookup by id keeps its index;
- notification_deliveries_once becomes (notification_id, user_id, channel) and provider_events_once
  (provider, provider_event_id, user_id);
- the foreign keys between these tables go on (…, user_id); the digest link clears only digest_id.
The other per-user tables (notification_preferences, announcement_reads, notification_mutes,
notification_last_seen, digest_preferences, campaign_recipients) already had user_id in their keys.

Revision ID: 0016_distribution_keys
Revises: 0015_webhooks
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_distribution_keys"
down_revision = "0015_webhooks"
branch_labels = None
depends_on = None

# (table, key columns before, key columns after)
PRIMARY_KEYS = [
    ("notifications", ["id"], ["id", "user_id"]),
    ("notification_deliveries", ["id"], ["id", "user_id"]),
    ("delivery_attempts", ["id"], ["id", "user_id"]),
    ("notification_events", ["id"], ["id", "user_id"]),
    ("scheduled_notifications", ["id"], ["id", "user_id"]),
    ("digest_runs", ["id"], ["id", "user_id"]),
    ("provider_events", ["id"], ["id", "user_id"]),
    ("delivery_cap_uses", ["delivery_id"], ["delivery_id", "user_id"]),
]

# (name, table, columns before, columns after)
UNIQUES = [
    ("notification_deliveries_once", "notification_deliveries", ["notification_id", "channel"],
     ["notification_id", "user_id", "channel"]),
    ("provider_events_once", "provider_events", ["provider", "provider_event_id"],
     ["provider", "provider_event_id", "user_id"]),
]  # fmt: skip

# (name, table, column, referred table, ON DELETE before, ON DELETE after); the key gains user_id on both sides.
FOREIGN_KEYS = [
    ("fk_notification_deliveries_notification_id_notifications", "notification_deliveries", "notification_id",
     "notifications", "CASCADE", "CASCADE"),
    ("fk_notification_events_notification_id_notifications", "notification_events", "notification_id",
     "notifications", "CASCADE", "CASCADE"),
    ("fk_delivery_attempts_delivery_id_notification_deliveries", "delivery_attempts", "delivery_id",
     "notification_deliveries", "CASCADE", "CASCADE"),
    ("fk_provider_events_delivery_id_notification_deliveries", "provider_events", "delivery_id",
     "notification_deliveries", "CASCADE", "CASCADE"),
    ("fk_delivery_cap_uses_delivery_id_notification_deliveries", "delivery_cap_uses", "delivery_id",
     "notification_deliveries", "CASCADE", "CASCADE"),
    # SET NULL of the whole key would clear the delivery's user_id too: clear only digest_id (PostgreSQL 15).
    ("fk_notification_deliveries_digest_id_digest_runs", "notification_deliveries", "digest_id",
     "digest_runs", "SET NULL", "SET NULL (digest_id)"),
]  # fmt: skip

# (table, the UPDATE that fills its new user_id from the parent row)
NEW_COLUMNS = [
    (
        "notification_deliveries",
        "UPDATE notification_deliveries d SET user_id = n.user_id FROM notifications n WHERE n.id = d.notification_id",
    ),
    (
        "delivery_attempts",
        "UPDATE delivery_attempts a SET user_id = d.user_id FROM notification_deliveries d WHERE d.id = a.delivery_id",
    ),
    (
        "provider_events",
        "UPDATE provider_events e SET user_id = coalesce("
        "(SELECT d.user_id FROM notification_deliveries d WHERE d.id = e.delivery_id), 0)",
    ),
]


def upgrade():
    for table, fill in NEW_COLUMNS:
        op.add_column(table, sa.Column("user_id", sa.BigInteger(), nullable=True))
        op.execute(fill)
        op.alter_column(table, "user_id", nullable=False)
    for name, table, *_ in FOREIGN_KEYS:
        op.drop_constraint(name, table, type_="foreignkey")
    for name, table, _, after in UNIQUES:
        op.drop_constraint(name, table, type_="unique")
        op.create_unique_constraint(name, table, after)
    for table, _, after in PRIMARY_KEYS:
        op.drop_constraint(f"{table}_pkey", table, type_="primary")
        op.create_primary_key(f"{table}_pkey", table, after)
    for name, table, column, referred, _, after in FOREIGN_KEYS:
        op.create_foreign_key(name, table, referred, [column, "user_id"], ["id", "user_id"], ondelete=after)


def downgrade():
    for name, table, *_ in FOREIGN_KEYS:
        op.drop_constraint(name, table, type_="foreignkey")
    for table, before, _ in PRIMARY_KEYS:
        op.drop_constraint(f"{table}_pkey", table, type_="primary")
        op.create_primary_key(f"{table}_pkey", table, before)
    for name, table, before, _ in UNIQUES:
        op.drop_constraint(name, table, type_="unique")
        op.create_unique_constraint(name, table, before)
    for name, table, column, referred, before, _ in FOREIGN_KEYS:
        op.create_foreign_key(name, table, referred, [column], ["id"], ondelete=before)
    for table, _ in NEW_COLUMNS:
        op.drop_column(table, "user_id")
