"""Campaign fanout throughput: the real fanout job against a raw INSERT … SELECT of the same rows.

    python -m tests.perf.bench_fanout [--users 1000000] [--batch N] [--rounds 2] [--keep]

Uses its own database `hato_bench_fanout` (dropped, created and migrated here, dropped again at the end
unless --keep) on the server of DATABASE_URL, and Redis database 3 on the server of REDIS_URL (flushed
before and after). Loads USERS users with one INSERT … SELECT generate_series, and a deviating
preference row for 10 % of them (5 % e-mail off, 5 % inbox off), for a type whose inbox and e-mail
are on by default. Then, in this one process and run:

  (a) raw      two statements in one transaction: INSERT INTO notifications … SELECT FROM users (inbox
               preference joined), then INSERT INTO notification_deliveries … SELECT the e-mail rows:
               the same rows, tables and indexes, with nothing else: the physical ceiling here
  (b) fanout   jobs/fanout.fanout_campaign(id) for a campaign to everyone: keyset batches of --batch
               users (default: the app's FANOUT_BATCH_SIZE), each one INSERT … SELECT with the
               preference resolution, dedupe key and deliveries in one statement, committed per
               batch, its deliveries enqueued on `low`, badge events for the (1,000) users marked online

What (a) does not do and (b) must (so (a) is a ceiling, not a peer): (a) is one transaction and one
commit, (b) commits each batch (about 100 WAL flushes for 1,000,000 users) and locks and updates the
campaign row each time (cursor, done: the progress operators see, and what a resumed fanout starts
from); (a) inserts plainly where (b) inserts ON CONFLICT (user_id, dedupe_key) DO NOTHING (a probe of
the unique index and a speculative insertion per row: a re-run writes nothing twice); (a) returns
nothing, (b) returns each batch's pending delivery ids and the inboxes that changed, and its Python
process enqueues the deliveries (DELIVERY_BATCH_SIZE ids a job: 9,500 RQ jobs) and publishes the badge
events while PostgreSQL writes the next batch; (a) knows the type's defaults and that no type is
mandatory, escalating or pushing, (b) resolves them per recipient (and the push skip reason). Both
write the same rows in the same tables with the same indexes and foreign keys (whose checks are about
half of either's CPU time). The tables are truncated and checkpointed before every run. The machine
is shared, so the runs alternate (a), (b), (a), (b) (--rounds 2) and the faster run of each counts: a
burst of someone else's load then skews neither side. Rows are notifications + deliveries.

Topic phase (issue 32): every user follows one topic (topic_subscriptions, loaded with one INSERT … SELECT), then,
alternating the same way:

  (c) topic raw     the same two statements as (a), reading the users from the topic's subscriptions
                    (topic_subscriptions JOIN users), the rows carrying the topic's id
  (d) topic fanout  POST /v1/notifications' topic path without HTTP: app/topics/service.create_fanout (the fanout
                    row, its follower count) and jobs/fanout.fanout_topic(id): keyset batches over
                    (topic_id, user_id), each the campaign's statement with the topic's shape (mutes of the
                    group_key, the request's route, API key, topic id), deliveries enqueued on the type's queue

topic_ratio = topic_fanout_rows_per_s / topic_raw_rows_per_s (target >= 0.8). Then an announcement to the same
users: one row, and a user who never read anything counts it unread.
Prints a table, then one JSON line (ratio = fanout_rows_per_s / raw_rows_per_s; target >= 0.8, issue 20; and
topic_ratio).
"""

from __future__ import annotations

import argparse
import json
import time

from tests.support.databases import (
    bench_urls,
    drop_database,
    fresh_bench_database,
    row_counts,
    run_outside_transaction,
)

BENCH_DB = "hato_bench_fanout"
BENCH_REDIS_DB = 3
ONLINE_USERS = 1000
TYPE = "promo"

SETUP_SQL = [
    f"""INSERT INTO notification_types (type, label, default_in_app, default_email, default_push, priority)
        VALUES ('{TYPE}', 'Offers', true, true, false, 'default')""",
    """INSERT INTO users (external_id, email, display_name, locale)
       SELECT 'user-' || g, 'user' || g || '@example.com', 'User ' || g, CASE WHEN g % 10 = 3 THEN 'ja' ELSE 'en' END
       FROM generate_series(1, :users) g""",
    # 10 % deviate from the type's defaults: half turned e-mail off, half turned the inbox off.
    f"""INSERT INTO notification_preferences (user_id, type, channel, enabled)
        SELECT id, '{TYPE}', CASE WHEN id % 20 = 0 THEN 'email' ELSE 'in_app' END, false
        FROM users WHERE id % 10 = 0""",
]

CONTENT = {"title": "Spring sale", "body": "Everything 20 % off this week.", "link_path": "/offers/spring"}

# The ceiling: the same notifications (inbox-off users born read and hidden) and the same pending
# e-mail deliveries, straight from users, with no batching, no dedupe check and no RETURNING.
RAW_SQL = [
    f"""INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, data, campaign_id,
                                   in_app, read_at)
        SELECT u.id, '{TYPE}', :title, :body, :link_path, :dedupe_key, CAST('{{}}' AS jsonb), :campaign_id,
               coalesce(p.enabled, true), CASE WHEN coalesce(p.enabled, true) THEN NULL ELSE now() END
        FROM users u
        LEFT JOIN notification_preferences p ON p.user_id = u.id AND p.type = '{TYPE}' AND p.channel = 'in_app'""",
    f"""INSERT INTO notification_deliveries (notification_id, user_id, channel, status)
        SELECT n.id, n.user_id, 'email', 'pending'
        FROM notifications n
        LEFT JOIN notification_preferences p ON p.user_id = n.user_id AND p.type = '{TYPE}' AND p.channel = 'email'
        WHERE n.campaign_id = :campaign_id AND coalesce(p.enabled, true)""",
]

TOPIC_KEY = "bench:topic"
TOPIC_SETUP_SQL = [
    f"INSERT INTO topics (key, name) VALUES ('{TOPIC_KEY}', 'Bench topic')",
    f"""INSERT INTO topic_subscriptions (user_id, topic_id)
        SELECT u.id, t.id FROM users u CROSS JOIN topics t WHERE t.key = '{TOPIC_KEY}' ORDER BY u.id""",
]
# (c): the same rows as (a), the audience read from the topic's subscriptions.
TOPIC_RAW_SQL = [
    f"""INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, data, topic_id, in_app, read_at)
        SELECT s.user_id, '{TYPE}', :title, :body, :link_path, :dedupe_key, CAST('{{}}' AS jsonb), s.topic_id,
               coalesce(p.enabled, true), CASE WHEN coalesce(p.enabled, true) THEN NULL ELSE now() END
        FROM topic_subscriptions s
        JOIN users u ON u.id = s.user_id
        LEFT JOIN notification_preferences p ON p.user_id = s.user_id AND p.type = '{TYPE}' AND p.channel = 'in_app'
        WHERE s.topic_id = :topic_id""",
    f"""INSERT INTO notification_deliveries (notification_id, user_id, channel, status)
        SELECT n.id, n.user_id, 'email', 'pending'
        FROM notifications n
        LEFT JOIN notification_preferences p ON p.user_id = n.user_id AND p.type = '{TYPE}' AND p.channel = 'email'
        WHERE n.topic_id = :topic_id AND coalesce(p.enabled, true)""",
]

COUNTS_SQL = """SELECT (SELECT count(*) FROM notifications) AS notifications,
                       (SELECT count(*) FROM notifications WHERE NOT in_app) AS hidden,
                       (SELECT count(*) FROM notification_deliveries) AS deliveries"""


def _campaign(service, db) -> int:
    """A fresh campaign to everyone, sent now (each fanout run gets its own)."""
    campaign = service.create_campaign(
        None, name="Bench", type_=TYPE, title=CONTENT["title"], body=CONTENT["body"], link_path=CONTENT["link_path"]
    )
    service.send_campaign(None, campaign.id)
    db.session.commit()
    return campaign.id


def _fresh(db, sa) -> None:
    """Empty the written tables and checkpoint, so every run starts from the same state."""
    db.session.execute(sa.text("TRUNCATE notification_deliveries, notifications CASCADE"))
    db.session.commit()
    run_outside_transaction(db, "CHECKPOINT")


def _topic_phase(figures, users, rounds, db, sa, redis, touch, topics, fanout_topic, TopicFanout) -> dict:
    """Every user follows one topic; (c) raw and (d) the topic fanout alternately; return the phase's figures."""
    for statement in TOPIC_SETUP_SQL:
        db.session.execute(sa.text(statement))
    db.session.commit()
    run_outside_transaction(db, "VACUUM ANALYZE topic_subscriptions")
    topic_id = db.session.execute(sa.text("SELECT id FROM topics WHERE key = :k"), {"k": TOPIC_KEY}).scalar_one()
    out: dict = {"topic_raw_runs": [], "topic_runs": []}
    for round_ in range(rounds):
        _fresh(db, sa)
        started = time.perf_counter()
        for statement in TOPIC_RAW_SQL:
            db.session.execute(sa.text(statement), {**CONTENT, "topic_id": topic_id, "dedupe_key": "topic:raw"})
        db.session.commit()
        out["topic_raw_runs"].append(time.perf_counter() - started)
        raw = row_counts(db, sa, COUNTS_SQL)
        _fresh(db, sa)
        redis.client().flushdb()
        touch(redis.client(), range(1, users + 1, max(users // ONLINE_USERS, 1)), ttl=3600)
        created = topics.create_fanout(TOPIC_KEY, type_=TYPE, dedupe_key=f"topic:{round_}", **CONTENT)
        db.session.commit()
        redis.client().flushdb()  # the fanout's job (this process runs it)
        started = time.perf_counter()
        fanout_topic(created["id"])
        out["topic_runs"].append(time.perf_counter() - started)
        real = row_counts(db, sa, COUNTS_SQL)
    finished = db.session.get(TopicFanout, created["id"])
    raw_rows, real_rows = raw["notifications"] + raw["deliveries"], real["notifications"] + real["deliveries"]
    raw_s, topic_s = min(out["topic_raw_runs"]), min(out["topic_runs"])
    out.update(
        topic_fanout={"status": finished.status, "done": finished.done, "total": finished.total},
        topic_same_counts=raw == real,
        topic_raw_s=raw_s,
        topic_s=topic_s,
        topic_raw_rows=raw_rows,
        topic_rows=real_rows,
        topic_raw_rows_per_s=raw_rows / raw_s,
        topic_rows_per_s=real_rows / topic_s,
    )
    out["topic_ratio"] = out["topic_rows_per_s"] / out["topic_raw_rows_per_s"]
    return out


def run(users: int, batch: int | None, rounds: int) -> dict:
    """Load, run (a) and (b) alternately `rounds` times, the announcement check; return the figures."""
    import sqlalchemy as sa
    from flask_migrate import upgrade

    from app import create_app
    from app.announcements.service import create_announcement
    from app.campaigns import fanout, service
    from app.extensions import db, redis
    from app.inbox.queries import unread_counts
    from app.live.presence import touch
    from app.models import Campaign, TopicFanout
    from app.queueing import get_queue
    from app.topics import service as topics
    from jobs.fanout import fanout_campaign, fanout_topic

    # Presence lasts the whole run, so the same 1,000 users are online for every batch.
    app = create_app({"PRESENCE_TTL_SECONDS": 3600, **({"FANOUT_BATCH_SIZE": batch} if batch else {})})
    batch = int(app.config["FANOUT_BATCH_SIZE"])
    figures: dict = {"users": users, "batch": batch, "rounds": rounds, "raw_runs": [], "fanout_runs": []}
    with app.app_context():
        upgrade()
        redis.client().flushdb()
        started = time.perf_counter()
        for statement in SETUP_SQL:
            db.session.execute(sa.text(statement), {"users": users})
        db.session.commit()
        figures["load_s"] = time.perf_counter() - started
        run_outside_transaction(db, "VACUUM ANALYZE users", "VACUUM ANALYZE notification_preferences")
        raw_campaign = _campaign(service, db)
        for _ in range(rounds):
            # (a) raw
            _fresh(db, sa)
            started = time.perf_counter()
            for statement in RAW_SQL:
                db.session.execute(
                    sa.text(statement),
                    {**CONTENT, "campaign_id": raw_campaign, "dedupe_key": fanout.dedupe_key(raw_campaign)},
                )
            db.session.commit()
            figures["raw_runs"].append(time.perf_counter() - started)
            raw = row_counts(db, sa, COUNTS_SQL)
            # (b) the real fanout job
            _fresh(db, sa)
            redis.client().flushdb()  # the previous run's delivery jobs
            touch(redis.client(), range(1, users + 1, max(users // ONLINE_USERS, 1)), ttl=3600)
            campaign_id = _campaign(service, db)
            started = time.perf_counter()
            result = fanout_campaign(campaign_id)
            figures["fanout_runs"].append(time.perf_counter() - started)
            real = row_counts(db, sa, COUNTS_SQL)
        finished = db.session.get(Campaign, campaign_id)
        figures["campaign"] = {"status": finished.status, "done": finished.done, "total": finished.total}
        figures["jobs"] = {name: get_queue(name).count for name in ("high", "default", "low")}
        figures["badges"] = result["badges"]
        figures["same_counts"] = raw == real
        figures.update(_topic_phase(figures, users, rounds, db, sa, redis, touch, topics, fanout_topic, TopicFanout))

        # An announcement to the same users is one row; nobody gets a row until they read it.
        started = time.perf_counter()
        create_announcement(None, title="Maintenance on Sunday", body="The service pauses 02:00-03:00.")
        db.session.commit()
        figures["announcement_ms"] = (time.perf_counter() - started) * 1000
        rows = db.session.execute(
            sa.text("SELECT (SELECT count(*) FROM announcements), (SELECT count(*) FROM announcement_reads)")
        ).one()
        never_read = db.session.execute(sa.text("SELECT max(id) FROM users")).scalar_one()
        counts = unread_counts(never_read)
        figures.update(
            announcement_rows=rows[0] + rows[1],
            announcement_reads=rows[1],
            never_read_user=never_read,
            never_read_unread=counts.total,
            never_read_announcements=counts.announcements,
        )
        redis.client().flushdb()
        db.session.remove()
        db.engine.dispose()

    raw_rows = raw["notifications"] + raw["deliveries"]
    real_rows = real["notifications"] + real["deliveries"]
    raw_s, fanout_s = min(figures["raw_runs"]), min(figures["fanout_runs"])
    figures.update(
        raw_s=raw_s,
        fanout_s=fanout_s,
        raw_rows=raw_rows,
        fanout_rows=real_rows,
        notifications=real["notifications"],
        deliveries=real["deliveries"],
        hidden=real["hidden"],
        raw_rows_per_s=raw_rows / raw_s,
        fanout_rows_per_s=real_rows / fanout_s,
    )
    figures["ratio"] = figures["fanout_rows_per_s"] / figures["raw_rows_per_s"]
    return figures


def report(f: dict) -> None:
    """Print the table, then the JSON line."""
    print(f"\nCampaign fanout to {f['users']:,} users (10 % with a deviating preference), batches of {f['batch']:,}")
    print(f"{'':<34}{'seconds':>10}{'notifications':>15}{'deliveries':>12}{'rows/s':>12}")
    print(
        f"{'(a) raw INSERT … SELECT':<34}{f['raw_s']:>10.2f}{f['notifications']:>15,}{f['deliveries']:>12,}"
        f"{f['raw_rows_per_s']:>12,.0f}"
    )
    print(
        f"{'(b) fanout job (real)':<34}{f['fanout_s']:>10.2f}{f['notifications']:>15,}{f['deliveries']:>12,}"
        f"{f['fanout_rows_per_s']:>12,.0f}"
    )
    print(f"{'ratio (b)/(a)':<34}{f['ratio']:>10.2f}   target >= 0.80")
    runs = lambda key: ", ".join(f"{s:.2f}" for s in f[key])  # noqa: E731
    print(f"runs, alternating, fastest counted: (a) {runs('raw_runs')} s · (b) {runs('fanout_runs')} s")
    print(
        f"same counts in (a) and (b): {f['same_counts']} · inbox-off rows (born read, hidden): {f['hidden']:,}"
        f" · campaign {f['campaign']['status']} {f['campaign']['done']:,}/{f['campaign']['total']:,}"
    )
    print(
        f"delivery jobs queued: low {f['jobs']['low']:,}, default {f['jobs']['default']}, high {f['jobs']['high']}"
        f" · badge events (online users only): {f['badges']:,}"
    )
    print(f"\nTopic with {f['users']:,} followers (every user), same content and preferences")
    print(
        f"{'(c) topic raw INSERT … SELECT':<34}{f['topic_raw_s']:>10.2f}{f['topic_raw_rows']:>27,}"
        f"{f['topic_raw_rows_per_s']:>12,.0f}"
    )
    print(
        f"{'(d) topic fanout job (real)':<34}{f['topic_s']:>10.2f}{f['topic_rows']:>27,}{f['topic_rows_per_s']:>12,.0f}"
    )
    print(f"{'topic_ratio (d)/(c)':<34}{f['topic_ratio']:>10.2f}   target >= 0.80")
    print(
        f"runs, alternating, fastest counted: (c) {runs('topic_raw_runs')} s · (d) {runs('topic_runs')} s"
        f" · same counts: {f['topic_same_counts']} · fanout {f['topic_fanout']['status']}"
        f" {f['topic_fanout']['done']:,}/{f['topic_fanout']['total']:,}"
    )
    print(
        f"announcement to the same users: {f['announcement_rows']} row ({f['announcement_ms']:.1f} ms),"
        f" {f['announcement_reads']} read rows; user {f['never_read_user']:,} (never read anything) counts"
        f" {f['never_read_announcements']} unread announcement ({f['never_read_unread']} unread in all)"
    )
    keys = (
        "users",
        "batch",
        "rounds",
        "raw_rows",
        "fanout_rows",
        "raw_s",
        "fanout_s",
        "raw_rows_per_s",
        "fanout_rows_per_s",
        "ratio",
        "announcement_rows",
        "never_read_unread",
        "same_counts",
        "topic_raw_rows",
        "topic_rows",
        "topic_raw_s",
        "topic_s",
        "topic_raw_rows_per_s",
        "topic_rows_per_s",
        "topic_ratio",
        "topic_same_counts",
    )
    print(json.dumps({k: round(f[k], 3) if isinstance(f[k], float) else f[k] for k in keys}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=None, help="Users per batch (default: FANOUT_BATCH_SIZE).")
    parser.add_argument("--rounds", type=int, default=2, help="Alternating (a)/(b) runs; the fastest of each counts.")
    parser.add_argument("--keep", action="store_true", help="Keep the benchmark database afterwards.")
    parser.add_argument("--database", default=BENCH_DB, help="Scratch database name (dropped and created).")
    parser.add_argument("--redis-db", type=int, default=BENCH_REDIS_DB, help="Redis database number (flushed).")
    args = parser.parse_args()
    db_url, redis_url = bench_urls(args.database, args.redis_db)
    fresh_bench_database(db_url, redis_url)
    try:
        figures = run(args.users, args.batch, max(args.rounds, 1))
    finally:
        if not args.keep:
            drop_database(db_url)
    report(figures)


if __name__ == "__main__":
    main()
