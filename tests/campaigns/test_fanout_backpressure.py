"""A campaign's fanout steps aside between batches while interactive work lags, and resumes with a new job."""

from __future__ import annotations

import pytest

from app import backpressure
from app.campaigns import fanout, queries
from app.queueing import fanout_job, get_queue
from tests.support.backpressure import forget_measurements, queued_job


@pytest.fixture(autouse=True)
def lagging_threshold(app, monkeypatch):
    forget_measurements(monkeypatch)
    monkeypatch.setattr(backpressure, "CACHE_SECONDS", 0.0)  # each check measures anew
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    monkeypatch.setitem(app.config, "FANOUT_BATCH_SIZE", 4)


def test_the_fanout_stops_after_its_batch_while_high_work_lags_and_the_sweeper_restarts_it(make_users, launch):
    make_users(9)  # with the operator: 10 recipients, 3 batches of 4
    campaign_id = launch()
    queued_job("high", waited=10)

    with backpressure.running_job_from("low"):
        assert fanout.run(campaign_id, 4)["batches"] == 1
    campaign = queries.campaign(campaign_id)
    assert (campaign.status, campaign.done) == ("running", 4)

    # The sweeper's step gives the running campaign a new job, on low, behind the interactive work.
    assert fanout.start_due() == 1
    assert get_queue("low").get_job_ids()[-1] == fanout_job(campaign_id).job_id  # behind the batch's deliveries

    get_queue("high").empty()  # the lag falls
    with backpressure.running_job_from("low"):
        assert fanout.run(campaign_id, 4)["batches"] == 2
    campaign = queries.campaign(campaign_id)
    assert (campaign.status, campaign.done) == ("done", 10)


def test_a_fanout_outside_the_low_queue_never_stops_early(make_users, launch):
    make_users(9)
    campaign_id = launch()
    queued_job("high", waited=10)

    assert fanout.run(campaign_id, 4)["batches"] == 3
    assert queries.campaign(campaign_id).status == "done"
