"""The migrated schema carries the seed article's constraints and indexes, exactly."""

import pytest
import sqlalchemy as sa

from app.extensions import db


def index_def(name: str) -> str:
    return db.session.execute(sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"), {"n": name}).scalar()


def constraint_def(name: str) -> str:
    return db.session.execute(
        sa.text("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = :n"), {"n": name}
    ).scalar()


@pytest.mark.parametrize(
    "name, definition",
    [
        (
            "notifications_list_idx",
            "CREATE INDEX notifications_list_idx ON public.notifications"
            " USING btree (user_id, created_at DESC, id DESC)",
        ),
        (
            # The seed's partial unread index, with created_at after user_id (0008): the badge still reads
            # only user_id; the unseen count (unread rows newer than the last-seen time) reads both.
            "notifications_unread_idx",
            "CREATE INDEX notifications_unread_idx ON public.notifications"
            " USING btree (user_id, created_at) WHERE (read_at IS NULL)",
        ),
        (
            "announcements_published_idx",
            "CREATE INDEX announcements_published_idx ON public.announcements USING btree (published_at DESC)",
        ),
    ],
)
def test_seed_indexes(name, definition):
    assert index_def(name) == definition


def test_unread_index_predicate_is_read_at_is_null():
    predicate = db.session.execute(
        sa.text(
            "SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = 'notifications_unread_idx'"
        )
    ).scalar()
    assert predicate == "(read_at IS NULL)"


@pytest.mark.parametrize(
    "name, definition",
    [
        ("notifications_dedupe", "UNIQUE (user_id, dedupe_key)"),
        # user_id in every key of a per-user table (0016, tests/test_distribution.py)
        ("notification_deliveries_once", "UNIQUE (notification_id, user_id, channel)"),
        ("notifications_pkey", "PRIMARY KEY (id, user_id)"),
        ("announcement_reads_pkey", "PRIMARY KEY (user_id, announcement_id)"),
        ("notification_preferences_pkey", "PRIMARY KEY (user_id, type, channel)"),
        (
            "notification_preferences_channel",
            "CHECK ((channel = ANY (ARRAY['in_app'::text, 'email'::text, 'push'::text, 'sms'::text, 'chat'::text])))",
        ),
        (
            "notification_deliveries_channel",
            "CHECK ((channel = ANY (ARRAY['email'::text, 'push'::text, 'sms'::text, 'chat'::text])))",
        ),
        (
            "fk_announcement_reads_announcement_id_announcements",
            "FOREIGN KEY (announcement_id) REFERENCES announcements(id) ON DELETE CASCADE",
        ),
        (
            "fk_notification_deliveries_notification_id_notifications",
            "FOREIGN KEY (notification_id, user_id) REFERENCES notifications(id, user_id) ON DELETE CASCADE",
        ),
        ("fk_notifications_type_notification_types", "FOREIGN KEY (type) REFERENCES notification_types(type)"),
        (
            "fk_notification_preferences_type_notification_types",
            "FOREIGN KEY (type) REFERENCES notification_types(type)",
        ),
        ("fk_notifications_user_id_users", "FOREIGN KEY (user_id) REFERENCES users(id) ON DELETE CASCADE"),
        ("fk_announcement_reads_user_id_users", "FOREIGN KEY (user_id) REFERENCES users(id) ON DELETE CASCADE"),
        ("fk_notification_preferences_user_id_users", "FOREIGN KEY (user_id) REFERENCES users(id) ON DELETE CASCADE"),
    ],
)
def test_seed_constraints(name, definition):
    assert constraint_def(name) == definition


def test_delivery_status_allows_the_design_states():
    definition = constraint_def("notification_deliveries_status")
    for status in ("pending", "sending", "sent", "skipped", "failed"):
        assert f"'{status}'::text" in definition


@pytest.mark.parametrize(
    "table, column, nullable, default",
    [
        ("notification_types", "default_in_app", "NO", "true"),
        ("notification_types", "default_email", "NO", "false"),
        ("notification_types", "default_push", "NO", "false"),
        ("notification_types", "mandatory", "NO", "false"),
        ("notifications", "read_at", "YES", None),
        ("notifications", "dedupe_key", "NO", None),
        ("notifications", "created_at", "NO", "now()"),
        ("announcements", "published_at", "NO", None),
        ("announcement_reads", "read_at", "NO", "now()"),
        ("notification_deliveries", "status", "NO", "'pending'::text"),
    ],
)
def test_seed_columns(table, column, nullable, default):
    row = db.session.execute(
        sa.text(
            "SELECT is_nullable, column_default FROM information_schema.columns "
            "WHERE table_name = :t AND column_name = :c"
        ),
        {"t": table, "c": column},
    ).one()
    assert row == (nullable, default)


def test_ids_are_identity_always():
    rows = (
        db.session.execute(
            sa.text(
                "SELECT table_name FROM information_schema.columns WHERE column_name = 'id' AND is_identity = 'YES' "
                "AND identity_generation = 'ALWAYS'"
            )
        )
        .scalars()
        .all()
    )
    assert {"notifications", "announcements", "notification_deliveries", "users"} <= set(rows)


def test_dedupe_rejects_a_second_registration():
    db.session.execute(sa.text("INSERT INTO notification_types (type, label) VALUES ('comment', 'Comment')"))
    user_id = db.session.execute(sa.text("INSERT INTO users (email) VALUES ('d@example.com') RETURNING id")).scalar()
    insert = sa.text(
        "INSERT INTO notifications (user_id, type, title, body, dedupe_key) VALUES (:u, 'comment', 't', 'b', 'k') "
        "ON CONFLICT (user_id, dedupe_key) DO NOTHING RETURNING id"
    )
    assert db.session.execute(insert, {"u": user_id}).scalar() is not None
    assert db.session.execute(insert, {"u": user_id}).scalar() is None
