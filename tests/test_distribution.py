"""The migrated schema can be distributed by user_id (Citus): every per-user table is keyed by it.

Each table is classified here, and docs/scaling.md says why:
- DISTRIBUTED: hash-distributed by user_id and co-located, so one user's rows (inbox, badge, ledger,
  preferences, digests) live on one shard and their queries and foreign keys stay on it. A shard can
  enforce a primary key, a unique constraint or a foreign key only when it includes user_id.
- REFERENCE: small, read everywhere, written rarely: copied to every node (users, types, templates…).
- LOCAL: stays on the coordinator: operator-side logs and outboxes whose rows have no single user.
A new table that is not classified here fails test_every_table_is_classified.
"""

import json

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.inbox import queries as inbox_queries
from app.inbox import service as inbox_service

DISTRIBUTED = {
    "notifications",
    "notification_deliveries",
    "delivery_attempts",
    "notification_events",
    "scheduled_notifications",
    "announcement_reads",
    "notification_preferences",
    "notification_mutes",
    "notification_last_seen",
    "digest_preferences",
    "digest_runs",
    "delivery_cap_uses",
    "campaign_recipients",
    # Events no delivery matched carry user_id 0 (no user has it): they share one shard, pruned by age.
    "provider_events",
    # A phone's token moves between users under an advisory lock on it (app/devices/service.py), not a global key.
    "devices",
    "sms_consents",  # a member's SMS consent history (issue 29)
    "phone_verifications",  # a member's code in flight (issue 29), one row per member
    "chat_accounts",  # a member's channel data per chat provider (issue 29), keyed (user_id, provider)
    "tenant_members",  # a member's tenants (issue 32), keyed (user_id, tenant_id): the ingest's check stays local
    "topic_subscriptions",  # who follows a topic (issue 32), keyed (user_id, topic_id): a topic's fanout co-located
    # Analytics (issue 33): the ledger's changes waiting to be folded, written by its triggers on the row's shard.
    "delivery_rollup_changes",
    "tenant_last_seen",  # a member's last look at a tenant-scoped feed (issue 32), keyed (user_id, tenant_id)
    "inbox_undo",  # a bulk inbox action's rows before it (issue 33), keyed (user_id, token, notification_id)
    "notification_action_clicks",  # a member's action button clicks (issue 33), keyed (user_id, notification_id, name)
}

REFERENCE = {
    "users",  # every per-user table's foreign key to users stays on its shard
    "notification_types",
    "announcements",  # one row per broadcast, never copied per user
    "api_keys",
    "login_links",
    "push_subscriptions",  # unique by endpoint, read with its user's deliveries
    "email_suppressions",
    "sms_suppressions",  # numbers that replied STOP (issue 29): read with every SMS batch, written by replies
    "message_templates",
    "message_template_versions",
    "campaigns",
    "digest_templates",
    "webhook_endpoints",
    "channel_switches",  # the kill switches: a handful of rows every worker reads
    "workflow_versions",  # a type's published workflows (issue 31): immutable, a few per type
    "workflow_drafts",
    "workflow_steps",  # the engine's plan per sending step of a version: joined with every ledger row
    "tenants",  # the product's customers (issue 32): a handful of rows, read by the ingest and every send
    "tenant_preferences",  # a tenant's defaults per (type, channel): joined by the ingest's preference rule
    "topics",  # what members follow (issue 32): joined with each subscription
    "topic_fanouts",  # one row per notification sent to a topic, like campaigns
    "oidc_accounts",  # a staff account's (issuer, subject) at the OpenID Connect provider (issue 33): read at sign-in
}

LOCAL = {
    "audit_log",  # operator actions
    "bulk_operations",  # operator DLQ jobs
    "idempotency_keys",  # one per API request, which may name many users
    "webhook_deliveries",  # the outbox to operators' endpoints: one event may concern no user or many
    "webhook_attempts",
    "delivery_rollups",  # analytics per hour and day (issue 33): sums over every user, read by the console
}

TABLES_SQL = sa.text(
    "SELECT relname FROM pg_class WHERE relkind IN ('r', 'p') AND relnamespace = 'public'::regnamespace "
    "AND relname <> 'alembic_version'"
)

# Every unique index (primary keys and unique constraints included) with its plain columns.
UNIQUE_INDEXES_SQL = sa.text(
    """
SELECT t.relname AS table_name, i.relname AS index_name,
       array(SELECT a.attname FROM unnest(x.indkey) k JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k)
         AS columns
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
WHERE x.indisunique AND t.relnamespace = 'public'::regnamespace
"""
)

# Every foreign key as pairs of (column, referred column).
FOREIGN_KEYS_SQL = sa.text(
    """
SELECT c.conname, c.conrelid::regclass::text AS table_name, c.confrelid::regclass::text AS referred,
       array(SELECT a.attname || '=' || r.attname
             FROM unnest(c.conkey, c.confkey) AS k(col, ref)
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.col
             JOIN pg_attribute r ON r.attrelid = c.confrelid AND r.attnum = k.ref) AS pairs
FROM pg_constraint c
WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
"""
)


def _tables() -> set[str]:
    return set(db.session.execute(TABLES_SQL).scalars())


def test_the_classes_do_not_overlap():
    assert not DISTRIBUTED & REFERENCE and not DISTRIBUTED & LOCAL and not REFERENCE & LOCAL


def test_every_table_is_classified():
    unclassified = _tables() - DISTRIBUTED - REFERENCE - LOCAL
    assert not unclassified, f"classify {sorted(unclassified)} in tests/test_distribution.py and docs/scaling.md"
    assert not (DISTRIBUTED | REFERENCE | LOCAL) - _tables(), "a classified table no longer exists"


def test_per_user_tables_are_distributed_or_named_as_lookups():
    """A new table with a user_id column is distributed unless it is listed as a small lookup table."""
    with_user = set(
        db.session.execute(
            sa.text(
                "SELECT table_name FROM information_schema.columns "
                "WHERE table_schema = 'public' AND column_name = 'user_id'"
            )
        ).scalars()
    )
    # push_receivers and sms_receivers are views (migrations 0022, 0025), not tables.
    assert with_user - DISTRIBUTED <= {
        "login_links",
        "oidc_accounts",
        "push_subscriptions",
        "push_receivers",
        "sms_receivers",
    }


@pytest.mark.parametrize("table", sorted(DISTRIBUTED))
def test_distributed_tables_have_a_not_null_user_id(table):
    nullable = db.session.execute(
        sa.text(
            "SELECT is_nullable FROM information_schema.columns "
            "WHERE table_schema = 'public' AND table_name = :t AND column_name = 'user_id'"
        ),
        {"t": table},
    ).scalar()
    assert nullable == "NO"


def test_distributed_tables_have_a_primary_key_with_user_id():
    keys = {
        row.conrelid: row.columns
        for row in db.session.execute(
            sa.text(
                "SELECT c.conrelid::regclass::text AS conrelid, "
                "array(SELECT a.attname FROM unnest(c.conkey) k JOIN pg_attribute a "
                "      ON a.attrelid = c.conrelid AND a.attnum = k) AS columns "
                "FROM pg_constraint c WHERE c.contype = 'p' AND c.connamespace = 'public'::regnamespace"
            )
        )
    }
    missing = {table: keys.get(table) for table in DISTRIBUTED if "user_id" not in (keys.get(table) or [])}
    assert not missing


def test_unique_indexes_of_distributed_tables_include_user_id():
    rows = db.session.execute(UNIQUE_INDEXES_SQL).all()
    offending = [(r.table_name, r.index_name, r.columns) for r in rows if r.table_name in DISTRIBUTED]
    assert offending, "the query sees the distributed tables' keys"
    assert [row for row in offending if "user_id" not in row[2]] == []


def test_ids_stay_the_leading_key_column():
    """Lookups by id alone (the ledger, the API's GET) keep using the primary key's index."""
    rows = db.session.execute(UNIQUE_INDEXES_SQL).all()
    for row in rows:
        if row.table_name in DISTRIBUTED and row.index_name == f"{row.table_name}_pkey" and "id" in row.columns:
            assert row.columns[0] == "id", row


def test_foreign_keys_stay_on_one_shard():
    """Distributed → distributed on (…, user_id = user_id); reference tables point only at reference tables."""
    problems = []
    for fk in db.session.execute(FOREIGN_KEYS_SQL):
        if fk.table_name in DISTRIBUTED and fk.referred in DISTRIBUTED:
            if "user_id=user_id" not in fk.pairs:
                problems.append((fk.conname, "between distributed tables without user_id", fk.pairs))
        elif fk.table_name in DISTRIBUTED and fk.referred not in REFERENCE:
            problems.append((fk.conname, f"distributed → {fk.referred}, which is not a reference table"))
        elif fk.table_name in REFERENCE and fk.referred not in REFERENCE:
            problems.append((fk.conname, f"reference → {fk.referred}, which is not a reference table"))
        elif fk.table_name in LOCAL and fk.referred in DISTRIBUTED:
            problems.append((fk.conname, f"coordinator table → distributed {fk.referred}"))
    assert problems == []


def _plan_indexes(statement: sa.TextClause, params: dict) -> set[str]:
    plan = db.session.execute(sa.text("EXPLAIN (FORMAT JSON) " + statement.text), params).scalar()
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            if "Index Name" in node:
                found.add(node["Index Name"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(plan if isinstance(plan, list) else json.loads(plan))
    return found


@pytest.fixture
def inbox_rows():
    """200 users × 50 notifications, a fifth unread, analyzed (rolled back with the test)."""
    db.session.execute(sa.text("INSERT INTO notification_types (type, label) VALUES ('plan', 'Plan')"))
    db.session.execute(
        sa.text(
            "INSERT INTO users (email, external_id) SELECT 'plan' || g || '@example.com', 'plan-' || g "
            "FROM generate_series(1, 200) g"
        )
    )
    db.session.execute(
        sa.text(
            """INSERT INTO notifications (user_id, type, title, body, dedupe_key, created_at, read_at)
               SELECT u.id, 'plan', 't', 'b', 'plan:' || g, now() - make_interval(mins => g),
                      CASE WHEN g % 5 <> 0 THEN now() END
               FROM users u CROSS JOIN generate_series(1, 50) g WHERE u.external_id LIKE 'plan-%'"""
        )
    )
    db.session.execute(sa.text("ANALYZE notifications"))
    return db.session.execute(
        sa.text("SELECT user_id, id FROM notifications WHERE dedupe_key = 'plan:5' ORDER BY user_id LIMIT 1")
    ).one()


def test_the_seeds_badge_and_list_plans_keep_their_indexes(inbox_rows):
    """The badge walks the partial unread index, the first page the list index, mark-read the primary key."""
    user_id, notification_id = inbox_rows
    badge = _plan_indexes(inbox_queries.BADGE_SQL, {"user_id": user_id, "cap": inbox_queries.BADGE_CAP})
    assert "notifications_unread_idx" in badge
    page = _plan_indexes(inbox_queries._page_sql("all", keyset=False), {"user_id": user_id, "limit": 21})
    assert "notifications_list_idx" in page
    mark = _plan_indexes(inbox_service.MARK_READ_SQL, {"id": notification_id, "user_id": user_id})
    assert "notifications_pkey" in mark
