"""The seed article's tables: types, personal notifications, announcements, preferences, deliveries."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db
from app.models.delivery import PROVIDER_STATUSES

# standby: a later channel of a "first" chain waiting its turn; passed: this channel could not reach the member
# and the chain went on to the next (migration 0018). The channel names are the registry's
# (app/delivery/channels); the database's channel checks follow it (app/delivery/channel_constraints.py).
DELIVERY_STATUSES = ("pending", "sending", "sent", "skipped", "failed", "standby", "passed")
CHANNEL_MODES = ("all", "first")
DEFAULT_ON_SQL = (
    "array_remove(ARRAY[CASE WHEN default_in_app THEN 'in_app' END, CASE WHEN default_email THEN 'email' END, "
    "CASE WHEN default_push THEN 'push' END], NULL) || default_channels"
)
PRIORITIES = ("high", "default", "low")

_tz = sa.DateTime(timezone=True)


class NotificationType(db.Model):
    """A kind of notification with its per-channel defaults; mandatory types cannot be turned off."""

    __tablename__ = "notification_types"
    __table_args__ = (
        sa.CheckConstraint(f"priority IN {PRIORITIES!r}", name="notification_types_priority"),
        sa.CheckConstraint(
            "(escalate_after IS NULL OR escalate_after > 0) AND escalate_unless IN ('read', 'seen')",
            name="notification_types_escalation",
        ),
        sa.CheckConstraint(
            "(cap_count IS NULL) = (cap_window IS NULL) AND (cap_count IS NULL OR (cap_count > 0 AND cap_window > 0))",
            name="notification_types_cap",
        ),
        sa.CheckConstraint(
            "aggregation_window IS NULL OR aggregation_window > 0", name="notification_types_aggregation"
        ),
        sa.CheckConstraint(
            "email_frequency IN ('immediate', 'hourly', 'daily')", name="notification_types_email_frequency"
        ),
        sa.CheckConstraint(f"channel_mode IN {CHANNEL_MODES!r}", name="notification_types_channel_mode"),
        sa.CheckConstraint("sms_max_segments BETWEEN 1 AND 10", name="notification_types_sms_max_segments"),
    )

    type: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    label: Mapped[str] = mapped_column(sa.Text)
    default_in_app: Mapped[bool] = mapped_column(server_default=sa.true())
    default_email: Mapped[bool] = mapped_column(server_default=sa.false())
    default_push: Mapped[bool] = mapped_column(server_default=sa.false())
    mandatory: Mapped[bool] = mapped_column(server_default=sa.false())
    priority: Mapped[str] = mapped_column(sa.Text, server_default="default")
    description: Mapped[str] = mapped_column(sa.Text, server_default="")
    # The label and description per locale ({"ja": {"label": …, "description": …}}); the columns above are the fallback.
    locales: Mapped[dict] = mapped_column(JSONB, server_default=sa.text("'{}'::jsonb"))
    # Escalation: e-mail/push wait escalate_after seconds and go only if the row is still unread (or unseen).
    escalate_after: Mapped[int | None] = mapped_column(sa.Integer)
    escalate_unless: Mapped[str] = mapped_column(sa.Text, server_default="read")  # read | seen
    # Online routing: e-mail/push are skipped (reason "online") for a user with a live socket.
    skip_when_online: Mapped[bool] = mapped_column(server_default=sa.false())
    # Frequency cap: at most cap_count e-mails (and pushes) per cap_window seconds per user and type.
    cap_count: Mapped[int | None] = mapped_column(sa.Integer)
    cap_window: Mapped[int | None] = mapped_column(sa.Integer)
    # Aggregation: events of one (user, group_key) within this many seconds collapse into one row.
    aggregation_window: Mapped[int | None] = mapped_column(sa.Integer)
    # E-mail goes out immediately or in the user's hourly/daily digest (digest_preferences holds deviations).
    email_frequency: Mapped[str] = mapped_column(sa.Text, server_default="immediate")
    # The order its notifications go out in (NULL: every channel in the registry's order), and whether on
    # every listed channel the member has on (all) or only the first that reaches them (first).
    channels: Mapped[list[str] | None] = mapped_column(ARRAY(sa.Text))
    channel_mode: Mapped[str] = mapped_column(sa.Text, server_default="all")
    # Channels on by default that have no seed column of their own (the seed's default_* cover in-app, e-mail, push).
    default_channels: Mapped[list[str]] = mapped_column(ARRAY(sa.Text), server_default="{}")
    # Every channel on by default, the seed's three columns and default_channels together (what the rule reads).
    default_on: Mapped[list[str]] = mapped_column(ARRAY(sa.Text), sa.Computed(DEFAULT_ON_SQL))
    # An SMS of this type may take this many parts at most (a longer rendering fails for good; 0025).
    sms_max_segments: Mapped[int] = mapped_column(sa.SmallInteger, server_default="3")
    # Its messages go out during the member's quiet hours, on every channel (sign-in codes; 0028).
    bypass_quiet_hours: Mapped[bool] = mapped_column(server_default=sa.false())
    # Its pushes go only when no open tab of the member acked the frame that showed it (0031, seed 004).
    push_when_offline: Mapped[bool] = mapped_column(server_default=sa.false())
    # The published workflow version its notifications run (0032, app/workflows); the columns above are what
    # that version compiles to, per type.
    workflow_version_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("workflow_versions.id", use_alter=True, name="notification_types_workflow_version")
    )
    # Its workflow has an in-app step: the inbox shows its notifications (without one the row only anchors sends).
    in_app_step: Mapped[bool] = mapped_column(server_default=sa.true())


class Notification(db.Model):
    """One personal notification for one recipient; read_at NULL means unread."""

    __tablename__ = "notifications"
    __table_args__ = (
        sa.UniqueConstraint("user_id", "dedupe_key", name="notifications_dedupe"),
        sa.Index("notifications_list_idx", "user_id", sa.text("created_at DESC"), sa.text("id DESC")),
        # (user_id) for the unread badge, created_at for the unseen one (newer than the last-seen time).
        sa.Index("notifications_unread_idx", "user_id", "created_at", postgresql_where=sa.text("read_at IS NULL")),
        sa.Index(
            "notifications_cancellation_idx",
            "cancellation_key",
            postgresql_where=sa.text("cancellation_key IS NOT NULL"),
        ),
        sa.Index("notifications_snoozed_idx", "snoozed_until", postgresql_where=sa.text("snoozed_until IS NOT NULL")),
        sa.Index("notifications_campaign_idx", "campaign_id", postgresql_where=sa.text("campaign_id IS NOT NULL")),
        sa.Index("notifications_created_idx", "created_at", "id"),  # the retention walk, oldest first (0014)
        # A tenant's part of a member's inbox (0037): its unread (and unseen) count, and its list, by index.
        sa.Index(
            "notifications_tenant_unread_idx",
            "user_id",
            "tenant_id",
            "created_at",
            postgresql_where=sa.text("read_at IS NULL AND tenant_id IS NOT NULL"),
        ),
        sa.Index(
            "notifications_tenant_list_idx",
            "user_id",
            "tenant_id",
            sa.text("created_at DESC"),
            sa.text("id DESC"),
            postgresql_where=sa.text("tenant_id IS NOT NULL"),
        ),
        sa.Index(
            "notifications_window_idx",
            "user_id",
            "type",
            "group_key",
            sa.text("window_ends_at DESC"),
            postgresql_where=sa.text("window_ends_at IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    # In the key (id, user_id): the distribution column (0016, docs/scaling.md); id leads for lookups by id.
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    type: Mapped[str] = mapped_column(sa.Text, sa.ForeignKey("notification_types.type"))
    title: Mapped[str] = mapped_column(sa.Text)
    body: Mapped[str] = mapped_column(sa.Text)
    link_path: Mapped[str | None] = mapped_column(sa.Text)
    dedupe_key: Mapped[str] = mapped_column(sa.Text)
    read_at: Mapped[datetime | None] = mapped_column(_tz)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    data: Mapped[dict] = mapped_column(JSONB, server_default=sa.text("'{}'::jsonb"))
    campaign_id: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("campaigns.id", ondelete="SET NULL"))
    # The API key that created the row: only that key may read it back (GET /v1/notifications/<id>).
    api_key_id: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("api_keys.id", ondelete="SET NULL"))
    # The topic a topic fanout wrote it for (no foreign key: a deleted topic leaves it unread by any join).
    topic_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    archived_at: Mapped[datetime | None] = mapped_column(_tz)
    # False when the user turned in-app off for the type: the row anchors e-mail/push deliveries but is
    # born read (so it never enters the unread index) and is hidden from every inbox list.
    in_app: Mapped[bool] = mapped_column(server_default=sa.true())
    # A thread ("post:123"): the user can mute it; later rows with the same key arrive read and hidden.
    group_key: Mapped[str | None] = mapped_column(sa.Text)
    # DELETE /v1/cancellations/<key> cancels what has not happened yet for rows with this key.
    cancellation_key: Mapped[str | None] = mapped_column(sa.Text)
    # Snoozed: out of the unread index (read_at set) and hidden until then, then back on top as unread.
    snoozed_until: Mapped[datetime | None] = mapped_column(_tz)
    # Aggregated rows (app/notify/aggregate.py): events join the row until window_ends_at; e-mail/push wait for it.
    window_ends_at: Mapped[datetime | None] = mapped_column(_tz)
    event_count: Mapped[int] = mapped_column(server_default="1")
    actor_count: Mapped[int] = mapped_column(server_default="0")
    actor_names: Mapped[list] = mapped_column(JSONB, server_default=sa.text("'[]'::jsonb"))
    # The W3C traceparent of the request that made the row (tracing on, app/telemetry.py): its sends join that
    # trace, and the console's delivery log shows the trace id. NULL with tracing off.
    traceparent: Mapped[str | None] = mapped_column(sa.Text)
    # The workflow version in force when it was accepted (0032): it runs that one, whatever is published later.
    workflow_version_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    # The tenant the product sent it for (0037, issue 32). No foreign key: a deleted tenant's rows keep its id,
    # which no other tenant gets again (an identity), and the ingest's insert pays for no key check.
    tenant_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    # Its action buttons as the request sent them (0043, issue 33; app/actions): NULL without any.
    actions: Mapped[list | None] = mapped_column(JSONB)


class ScheduledNotification(db.Model):
    """A notification asked for with send_at in the future: invisible until the sweeper releases it."""

    __tablename__ = "scheduled_notifications"
    __table_args__ = (
        sa.UniqueConstraint("user_id", "dedupe_key", name="scheduled_notifications_dedupe"),
        sa.Index("scheduled_notifications_due_idx", "send_at", "id"),
        sa.Index(
            "scheduled_notifications_cancellation_idx",
            "cancellation_key",
            postgresql_where=sa.text("cancellation_key IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    # In the key (id, user_id): the distribution column (0016, docs/scaling.md); id leads for lookups by id.
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    type: Mapped[str] = mapped_column(sa.Text, sa.ForeignKey("notification_types.type"))
    title: Mapped[str] = mapped_column(sa.Text)
    body: Mapped[str] = mapped_column(sa.Text)
    link_path: Mapped[str | None] = mapped_column(sa.Text)
    data: Mapped[dict] = mapped_column(JSONB, server_default=sa.text("'{}'::jsonb"))
    dedupe_key: Mapped[str] = mapped_column(sa.Text)
    group_key: Mapped[str | None] = mapped_column(sa.Text)
    cancellation_key: Mapped[str | None] = mapped_column(sa.Text)
    api_key_id: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("api_keys.id", ondelete="SET NULL"))
    send_at: Mapped[datetime] = mapped_column(_tz)
    # The request's channel order and mode, kept for the release (NULL: the type's).
    channels: Mapped[list[str] | None] = mapped_column(ARRAY(sa.Text))
    channel_mode: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    # The request's tenant (0037), written on the notification at release.
    tenant_id: Mapped[int | None] = mapped_column(sa.BigInteger)


class NotificationLastSeen(db.Model):
    """When the user last opened their inbox (the seed's method C): rows created later are unseen."""

    __tablename__ = "notification_last_seen"

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(_tz)


class TenantLastSeen(db.Model):
    """When the member last opened a tenant-scoped feed (issue 32): that scope's rows created later are unseen."""

    __tablename__ = "tenant_last_seen"

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    seen_at: Mapped[datetime] = mapped_column(_tz)


class InboxUndo(db.Model):
    """One row a member's bulk inbox action changed, with its state before, so Undo can put exactly it back.

    A token names one action's rows; the rows live until expires_at (the undo toast's time), then the sweeper
    drops them (and, for a delete, removes the hidden notification unless INBOX_DELETE_KEEPS_FOR_RETENTION).
    """

    __tablename__ = "inbox_undo"
    __table_args__ = (
        sa.ForeignKeyConstraint(
            ["notification_id", "user_id"], ["notifications.id", "notifications.user_id"], ondelete="CASCADE"
        ),
        sa.CheckConstraint("action IN ('read', 'archive', 'delete')", name="inbox_undo_action"),
        sa.Index("inbox_undo_expires_idx", "expires_at"),
    )

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    token: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    notification_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    action: Mapped[str] = mapped_column(sa.Text)
    read_at: Mapped[datetime | None] = mapped_column(_tz)
    archived_at: Mapped[datetime | None] = mapped_column(_tz)
    snoozed_until: Mapped[datetime | None] = mapped_column(_tz)
    expires_at: Mapped[datetime] = mapped_column(_tz)


class NotificationMute(db.Model):
    """A thread (group key) one user muted: its later notifications arrive read, hidden and unsent."""

    __tablename__ = "notification_mutes"

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    group_key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class Announcement(db.Model):
    """A broadcast to everyone: one row, never copied per user."""

    __tablename__ = "announcements"
    __table_args__ = (
        sa.Index("announcements_published_idx", sa.text("published_at DESC")),
        sa.CheckConstraint("body_format IN ('plain', 'markdown')", name="announcements_body_format"),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    title: Mapped[str] = mapped_column(sa.Text)
    body: Mapped[str] = mapped_column(sa.Text)
    published_at: Mapped[datetime] = mapped_column(_tz)
    expires_at: Mapped[datetime | None] = mapped_column(_tz)
    body_format: Mapped[str] = mapped_column(sa.Text, server_default="plain")  # plain | markdown
    # The title and body per locale ({"ja": {"title": …, "body": …}}); title and body above are the fallback.
    locales: Mapped[dict] = mapped_column(JSONB, server_default=sa.text("'{}'::jsonb"))
    created_by: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class AnnouncementRead(db.Model):
    """The fact that one user read one announcement (only readers get a row)."""

    __tablename__ = "announcement_reads"
    # The reads of one expired announcement, for retention (0014); the badge uses the primary key.
    __table_args__ = (sa.Index("announcement_reads_announcement_idx", "announcement_id", "user_id"),)

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    announcement_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("announcements.id", ondelete="CASCADE"), primary_key=True
    )
    read_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())


class NotificationPreference(db.Model):
    """A user's deviation from a type's default for one channel (defaults are not stored)."""

    __tablename__ = "notification_preferences"

    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    type: Mapped[str] = mapped_column(sa.Text, sa.ForeignKey("notification_types.type"), primary_key=True)
    channel: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    enabled: Mapped[bool] = mapped_column()


class NotificationDelivery(db.Model):
    """The ledger row for sending one notification over one channel (at most one per pair)."""

    __tablename__ = "notification_deliveries"
    # Its storage parameter fillfactor = 80 (0035: room on each page, so the sweeper's stamp is a HOT update) is
    # set by the migration; SQLAlchemy's Table has no option for it.
    __table_args__ = (
        sa.UniqueConstraint("notification_id", "user_id", "channel", name="notification_deliveries_once"),
        sa.ForeignKeyConstraint(
            ["notification_id", "user_id"], ["notifications.id", "notifications.user_id"], ondelete="CASCADE"
        ),
        # Deleting a digest run clears only digest_id (clearing the whole key would clear user_id too).
        sa.ForeignKeyConstraint(
            ["digest_id", "user_id"], ["digest_runs.id", "digest_runs.user_id"], ondelete="SET NULL (digest_id)"
        ),
        sa.CheckConstraint(f"status IN {DELIVERY_STATUSES!r}", name="notification_deliveries_status"),
        sa.CheckConstraint(
            "escalation IS NULL OR escalation IN ('read', 'seen')", name="notification_deliveries_escalation"
        ),
        sa.Index("notification_deliveries_due_idx", "next_attempt_at", postgresql_where=sa.text("status = 'pending'")),
        sa.Index("notification_deliveries_lease_idx", "locked_until", postgresql_where=sa.text("status = 'sending'")),
        sa.Index("notification_deliveries_created_idx", "created_at", "id"),  # dashboard windows, retention walk
        sa.Index("notification_deliveries_failed_idx", "id", postgresql_where=sa.text("status = 'failed'")),  # the DLQ
        sa.Index(  # e-mail waiting for the user's next digest (app/digests)
            "notification_deliveries_digest_wait_idx",
            "notification_id",
            postgresql_where=sa.text("skip_reason = 'digested' AND digest_id IS NULL"),
        ),
        sa.Index("notification_deliveries_digest_idx", "digest_id", postgresql_where=sa.text("digest_id IS NOT NULL")),
        sa.CheckConstraint(  # what the provider reported after the send (app/hooks), strongest so far
            f"provider_status IS NULL OR provider_status IN {PROVIDER_STATUSES!r}",
            name="notification_deliveries_provider_status",
        ),
        sa.Index(  # provider events find their delivery by message id, with or without angle brackets (0013)
            "notification_deliveries_message_idx",
            sa.text("btrim(provider_message_id, '<>')"),
            postgresql_where=sa.text("provider_message_id IS NOT NULL"),
        ),
        sa.Index(  # rows held back by a breaker or bucket, for DELIVERY_MAX_AGE expiry (app/sweeper.py)
            "notification_deliveries_held_idx",
            "held_since",
            postgresql_where=sa.text("status = 'pending' AND held_since IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=True), primary_key=True)
    # The notification's recipient, copied so the row lives on its user's shard (0016).
    user_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    notification_id: Mapped[int] = mapped_column(sa.BigInteger)
    channel: Mapped[str] = mapped_column(sa.Text)
    status: Mapped[str] = mapped_column(sa.Text, server_default="pending")
    sent_at: Mapped[datetime | None] = mapped_column(_tz)
    attempts: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    next_attempt_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    locked_until: Mapped[datetime | None] = mapped_column(_tz)
    provider: Mapped[str | None] = mapped_column(sa.Text)
    provider_message_id: Mapped[str | None] = mapped_column(sa.Text)
    last_error: Mapped[str | None] = mapped_column(sa.Text)
    error_kind: Mapped[str | None] = mapped_column(sa.Text)
    skip_reason: Mapped[str | None] = mapped_column(sa.Text)
    rendered_subject: Mapped[str | None] = mapped_column(sa.Text)
    rendered_body: Mapped[str | None] = mapped_column(sa.Text)
    # An escalation waits until next_attempt_at and is sent only if the notification is still unread/unseen.
    escalation: Mapped[str | None] = mapped_column(sa.Text)
    # Skipped with reason 'digested': the digest run that took it (NULL while it waits for one).
    digest_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    # The strongest thing the provider reported after the send (delivered < bounced < complained), and when.
    provider_status: Mapped[str | None] = mapped_column(sa.Text)
    provider_status_at: Mapped[datetime | None] = mapped_column(_tz)
    # Pending and held back without a try (open breaker, empty bucket, paused push service) since then.
    held_since: Mapped[datetime | None] = mapped_column(_tz)
    # Push: the endpoints and device tokens that took it while others of the member's still wait (0023).
    reached: Mapped[list[str] | None] = mapped_column(ARRAY(sa.Text))
    # Its place in a "first" chain (0 goes first; the others wait as standby); NULL: not in a chain.
    route_rank: Mapped[int | None] = mapped_column(sa.SmallInteger)
    # The workflow step it carries out (workflow_steps; 0032): its delay, rules and condition. NULL: none.
    workflow_step_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    created_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(_tz, server_default=sa.func.now())
