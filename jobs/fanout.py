"""fanout_campaign(campaign_id): the RQ job that writes a campaign's notifications in keyset batches.

Thin on purpose: the SQL is app/campaigns/fanout.py. Each batch is committed on its own (cursor and
progress move with it), then its deliveries are enqueued on the `low` queue, so interactive
notifications on `high`/`default` never wait behind a campaign, and badge events go only to
recipients with a live socket. Idempotent and resumable: a second run, or a run after a crash,
continues from the stored cursor, and the dedupe key stops anything being written twice.
The sweeper calls start_due_campaigns() every pass: scheduled campaigns start when due, and a
running campaign whose job was lost (Redis flushed, worker killed) gets a new one.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from flask import current_app

from app.campaigns import fanout, queries
from app.extensions import db
from app.queueing import enqueue_deliveries, enqueue_unless_alive
from app.realtime.presence import online_user_ids
from app.realtime.publish import publish_badge

FANOUT_JOB = "jobs.fanout.fanout_campaign"
QUEUE = "low"
JOB_TIMEOUT_SECONDS = 6 * 3600  # a timeout only ends this run; the next one resumes from the cursor


def job_id(campaign_id: int) -> str:
    """The RQ job id of a campaign's fanout (one live job per campaign)."""
    return f"fanout-{int(campaign_id)}"


def fanout_campaign(campaign_id: int) -> dict:
    """Fan the campaign out batch by batch until it is done or cancelled; return what was written."""
    campaign_id = int(campaign_id)
    app = current_app._get_current_object()
    size = int(app.config["FANOUT_BATCH_SIZE"])
    totals = {"batches": 0, "users": 0, "created": 0, "email": 0, "push": 0, "badges": 0}
    # One helper thread enqueues and publishes each committed batch (in order) while this thread's
    # next INSERT … SELECT runs: the Redis work costs no wall-clock time. Leaving the block waits for it.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fanout-after-commit") as helper:
        done = []
        try:
            started = fanout.start(campaign_id)
            db.session.commit()
            if started is None:
                return totals
            while (batch := fanout.run_batch(campaign_id, size)) is not None:
                db.session.commit()
                done.append(helper.submit(_after_commit, app, batch))
                if batch.finished:
                    break
            db.session.commit()
        except Exception as exc:
            db.session.rollback()
            fanout.mark_failed(campaign_id, f"{type(exc).__name__}: {exc}")
            db.session.commit()
            raise
    for future in done:
        for key, value in future.result().items():
            totals[key] += value
    return totals


def _after_commit(app, batch: fanout.Batch) -> dict:
    """Enqueue a committed batch's deliveries on low and tell its online recipients; return the counts."""
    with app.app_context():
        for channel, ids in batch.pending.items():
            enqueue_deliveries(QUEUE, channel, ids)  # False means Redis is down: the sweeper enqueues later
        online = online_user_ids(batch.badge_user_ids)
        if online:
            publish_badge(online, toast={"title": batch.title})
    return {
        "batches": 1,
        "users": batch.users,
        "created": batch.created,
        "email": len(batch.pending["email"]),
        "push": len(batch.pending["push"]),
        "badges": len(online),
    }


def enqueue_fanout(campaign_id: int) -> bool:
    """Enqueue the campaign's fanout unless a job for it is already queued or running; False if Redis is down."""
    return enqueue_unless_alive(
        QUEUE,
        FANOUT_JOB,
        campaign_id,
        job_id(campaign_id),
        JOB_TIMEOUT_SECONDS,
        f"the fanout of campaign {campaign_id}",
    )


def start_due_campaigns() -> int:
    """Make sure every due scheduled and every running campaign has a live fanout job; return how many do."""
    ids = queries.campaigns_to_run()
    db.session.rollback()  # end the read: enqueueing must not hold a snapshot open
    return sum(1 for campaign_id in ids if enqueue_fanout(campaign_id))
