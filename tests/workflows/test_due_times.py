"""The engine's due times (SQL workflow_due, written by the ingest) and the test run's and trace's (Python) agree."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.workflows.definition import Step
from app.workflows.simulate import after_delay
from tests.factories import UserFactory

START = datetime(2026, 3, 14, 23, 30, tzinfo=UTC)  # 08:30 the next morning in Tokyo


@pytest.mark.parametrize(
    "waits, data",
    [
        ([{"seconds": 90}], {}),
        ([{"local_time": "09:00"}], {}),  # later the same local day
        ([{"local_time": "08:00"}], {}),  # passed today: tomorrow
        ([{"seconds": 3600}, {"local_time": "09:00"}], {}),  # 09:30 local by then: the next day's 09:00
        ([{"until": "data.at"}], {"at": "2026-03-15T12:00:00+09:00"}),
        ([{"until": "data.at"}], {"at": "2026-03-14T00:00:00Z"}),  # in the past: no wait
        ([{"until": "data.at"}], {}),  # missing: no wait
        ([{"until": "data.at"}], {"at": "soon"}),  # not a time: no wait
        ([{"until": "data.order.due"}], {"order": {"due": "2026-03-16T00:00:00Z"}}),
    ],
)
def test_sql_and_python_give_the_same_due_time(app, waits, data):
    member = UserFactory(timezone="Asia/Tokyo")
    in_sql = db.session.execute(
        sa.text("SELECT workflow_due(:start, CAST(:waits AS jsonb), CAST(:data AS jsonb), :member)"),
        {"start": START, "waits": json.dumps(waits), "data": json.dumps(data), "member": member.id},
    ).scalar_one()
    at = START
    for wait in waits:
        at = after_delay(at, Step("delay", **wait), data, "Asia/Tokyo")
    assert in_sql == at
