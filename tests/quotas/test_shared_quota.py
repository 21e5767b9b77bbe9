"""Two real gunicorn processes share one key's quota: the count is in Redis, not in either process."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.api_keys import service as keys
from app.extensions import db
from tests.factories import NotificationTypeFactory, UserFactory
from tests.realtime.helpers import Gunicorn
from tests.support.waiting import free_port

pytestmark = pytest.mark.committed

QUOTA = 12
CALLS = 15  # per process: 30 calls of one notification each against a quota of 12


def _post(base_url: str, key: str, n: int) -> int:
    body = {"type": "comment", "recipient": "shared-1", "title": f"Comment {n}"}
    request = urllib.request.Request(
        base_url + "/v1/notifications",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_two_web_processes_count_one_daily_quota(app, tmp_path):
    with app.app_context():
        NotificationTypeFactory(type="comment", default_email=False)
        UserFactory(external_id="shared-1")
        key = keys.create_api_key(None, "shared", ["notifications:write"])
        keys.set_quota(None, keys.key_prefix(key), None, None, QUOTA)
        db.session.commit()
    env = {"RATELIMIT_ENABLED": "0"}
    webs = [Gunicorn(free_port(), env=env, log_path=tmp_path / f"web-{n}.log") for n in range(2)]
    try:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(Gunicorn.start, webs))  # side by side: each start waits for its /healthz
            statuses = list(
                pool.map(lambda n: _post(webs[n % 2].base_url, key, n), range(2 * CALLS))
            )  # fmt: skip
    finally:
        for web in webs:
            web.kill()
    assert sorted(set(statuses)) == [202, 429]
    assert {statuses[n] for n in range(0, 2 * CALLS, 2)} & {statuses[n] for n in range(1, 2 * CALLS, 2)} == {202, 429}
    assert statuses.count(202) == QUOTA  # not 2 × 12: one count for both processes
    with app.app_context():
        written = db.session.execute(db.text("SELECT count(*) FROM notifications")).scalar_one()
    assert written == QUOTA
