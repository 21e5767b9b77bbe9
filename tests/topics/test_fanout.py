"""A notification to a topic: 202 with a fanout, keyset batches on the campaign statement, the ingest's rows exactly,
actor and exclude left out, mutes and preferences honoured, idempotent, resumed from its cursor, 100,000 followers."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.api_keys.service import create_api_key
from app.extensions import db
from app.models import PushSubscription, TopicFanout
from app.notify.service import notify
from app.queueing import get_queue, topic_fanout_job
from app.topics import fanout
from jobs.fanout import fanout_topic
from tests.api.conftest import Api, count, new_key
from tests.factories import NotificationTypeFactory, PreferenceFactory
from tests.topics.conftest import counts

BODY = {"type": "comment", "topic": "project:42", "title": "Ann commented", "body": "Looks good"}


@pytest.fixture
def small_batches(app, monkeypatch):
    monkeypatch.setitem(app.config, "FANOUT_BATCH_SIZE", 4)


def _post(api, **fields):
    response = api.post("/v1/notifications", {**BODY, **fields})
    assert response.status_code == 202, response.get_json()
    return response.get_json()


def _rows(key: str) -> list:
    return db.session.execute(
        sa.text(
            "SELECT n.user_id, n.in_app, n.read_at IS NOT NULL AS born_read, n.topic_id, "
            "array_remove(array_agg(d.channel || ':' || d.status || ':' || coalesce(d.skip_reason, '') "
            "ORDER BY d.channel), NULL) AS deliveries "
            "FROM notifications n LEFT JOIN notification_deliveries d ON d.notification_id = n.id "
            "WHERE n.dedupe_key = :key GROUP BY n.id, n.user_id ORDER BY n.user_id"
        ),
        {"key": key},
    ).all()


def test_a_topic_notification_answers_202_with_a_fanout_to_poll(api, comment_type, make_topic, small_batches):
    topic_id, ids = make_topic(10)

    body = _post(api, dedupe_key="c:1")

    fan = body["fanout"]
    assert (body["topic"], body["type"], body["dedupe_key"]) == ("project:42", "comment", "c:1")
    assert (fan["status"], fan["total"], fan["done"]) == ("running", 10, 0)
    assert fan["url"].endswith(f"/v1/fanouts/{fan['id']}")
    # The job follows the commit, on the default queue (a topic's notification is live traffic, not a campaign).
    assert get_queue("default").get_job_ids() == [topic_fanout_job(fan["id"]).job_id]
    assert counts()["notifications"] == 0

    result = fanout_topic(fan["id"])

    assert result["batches"] == 3 and result["users"] == 10 and result["created"] == 10
    polled = api.get(f"/v1/fanouts/{fan['id']}").get_json()
    assert (polled["status"], polled["total"], polled["done"], polled["created"]) == ("done", 10, 10, 10)
    rows = _rows("c:1")
    assert [row.user_id for row in rows] == ids and {row.topic_id for row in rows} == {topic_id}
    assert all(row.deliveries == ["email:pending:"] for row in rows)
    # Deliveries go on the type's queue, as the ingest's (here `default`), never on the campaigns' `low`.
    assert get_queue("default").count > 1 and get_queue("low").count == 0


def test_the_actor_and_the_excluded_are_left_out(api, comment_type, make_topic, small_batches):
    _, ids = make_topic(8)

    body = _post(api, dedupe_key="c:2", actor={"id": "t-1", "name": "Ann"}, exclude=["t-3", "t-5", "nobody"])
    fanout_topic(body["fanout"]["id"])
    again = _post(api, dedupe_key="c:3", actor={"id": "t-8", "name": "Tom"})
    fanout_topic(again["fanout"]["id"])

    assert body["fanout"]["total"] == 5
    assert [row.user_id for row in _rows("c:2")] == [ids[1], ids[3], ids[5], ids[6], ids[7]]
    assert [row.user_id for row in _rows("c:3")] == ids[:7]


def test_preferences_and_mutes_are_honoured(api, comment_type, make_topic):
    _, ids = make_topic(4)
    PreferenceFactory(user_id=ids[0], type="comment", channel="email", enabled=False)
    PreferenceFactory(user_id=ids[1], type="comment", channel="in_app", enabled=False)
    db.session.execute(sa.text("INSERT INTO notification_mutes (user_id, group_key) VALUES (:u, 'post:7')"),
                       {"u": ids[2]})  # fmt: skip
    db.session.flush()

    body = _post(api, dedupe_key="c:4", group_key="post:7")
    fanout_topic(body["fanout"]["id"])

    rows = {row.user_id: row for row in _rows("c:4")}
    assert rows[ids[0]].in_app and rows[ids[0]].deliveries == []
    assert not rows[ids[1]].in_app and rows[ids[1]].born_read and rows[ids[1]].deliveries == ["email:pending:"]
    assert not rows[ids[2]].in_app and rows[ids[2]].born_read and rows[ids[2]].deliveries == ["email:skipped:muted"]
    assert rows[ids[3]].in_app and rows[ids[3]].deliveries == ["email:pending:"]


@pytest.mark.parametrize(
    "mandatory, escalate_after, extra",
    [
        (False, None, {}),
        (True, None, {"group_key": "post:7"}),
        (False, 3600, {"group_key": "post:7"}),
        (False, None, {"channels": ["push", "email"], "channel_mode": "first"}),
    ],
)
def test_the_fanout_writes_exactly_the_rows_the_ingest_writes(api, make_topic, mandatory, escalate_after, extra):
    kind = NotificationTypeFactory(type="notice", default_in_app=True, default_email=True, default_push=False,
                                   mandatory=mandatory, escalate_after=escalate_after)  # fmt: skip
    topic_id, ids = make_topic(7, prefix="eq")
    db.session.execute(sa.text("UPDATE users SET email = NULL WHERE id = :id"), {"id": ids[0]})
    db.session.add(PushSubscription(user_id=ids[1], endpoint="https://push.example/1", p256dh="k", auth="a"))
    for user_id, channel, enabled in [
        (ids[1], "push", True),
        (ids[2], "push", True),
        (ids[3], "email", False),
        (ids[4], "in_app", False),
        (ids[5], "email", False),
        (ids[5], "in_app", False),
    ]:
        PreferenceFactory(user_id=user_id, type=kind.type, channel=channel, enabled=enabled)
    db.session.execute(sa.text("INSERT INTO notification_mutes (user_id, group_key) VALUES (:u, 'post:7')"),
                       {"u": ids[6]})  # fmt: skip
    db.session.flush()
    route = [c for c in extra.get("channels", [])] or None
    notify(ids, type_=kind.type, title="t", body="b", dedupe_key="ingest:1", by="user_id",
           group_key=extra.get("group_key"), channels=route, channel_mode=extra.get("channel_mode"))  # fmt: skip

    body = _post(api, type=kind.type, title="t", body="b", dedupe_key="topic:1", **extra)
    fanout_topic(body["fanout"]["id"])

    shape = sa.text("""SELECT n.user_id, n.in_app, n.read_at IS NOT NULL AS born_read, n.group_key,
        array_remove(array_agg(d.channel || ':' || d.status || ':' || coalesce(d.skip_reason, '') || ':'
                               || coalesce(d.escalation, '') || ':' || coalesce(d.route_rank::text, '') || ':'
                               || (d.next_attempt_at > now() + interval '1 minute')
                               ORDER BY d.channel), NULL)
        FROM notifications n LEFT JOIN notification_deliveries d ON d.notification_id = n.id
        WHERE n.dedupe_key = :key GROUP BY n.id, n.user_id ORDER BY n.user_id""")
    ingest = db.session.execute(shape, {"key": "ingest:1"}).all()
    assert db.session.execute(shape, {"key": "topic:1"}).all() == ingest
    assert len({(row[1], row[2], tuple(row[4])) for row in ingest}) >= 2  # the cases differ


def test_a_topic_notification_for_a_tenant_reaches_its_members_with_its_defaults_as_the_ingest(api, make_topic):
    from app.tenants import service as tenants

    kind = NotificationTypeFactory(type="notice", default_in_app=True, default_email=True, default_push=False)
    _, ids = make_topic(6, prefix="tn")
    tenant, _ = tenants.put_tenant(None, "acme", {"name": "Acme"})
    members = ids[:4]  # tn-5 and tn-6 follow the topic but are not acme's members
    for user_id in members:
        tenants.set_member_tenants(None, user_id, ["acme"])
    tenants.set_preferences(None, tenant, [("notice", "email", False)])  # acme's default: no e-mail …
    PreferenceFactory(user_id=members[0], type="notice", channel="email", enabled=True)  # … but tn-1 chose it
    db.session.flush()
    notify(members, type_=kind.type, title="t", body="b", dedupe_key="ingest:t", by="user_id", tenant_id=tenant.id)

    body = _post(api, type=kind.type, title="t", body="b", dedupe_key="topic:t", tenant="acme")
    assert body["fanout"]["total"] == 4  # counted (and charged) as the members who follow
    fanout_topic(body["fanout"]["id"])

    shape = sa.text("""SELECT n.user_id, n.tenant_id, n.in_app,
        array_remove(array_agg(d.channel || ':' || d.status ORDER BY d.channel), NULL)
        FROM notifications n LEFT JOIN notification_deliveries d ON d.notification_id = n.id
        WHERE n.dedupe_key = :key GROUP BY n.id, n.user_id, n.tenant_id, n.in_app ORDER BY n.user_id""")
    rows = db.session.execute(shape, {"key": "topic:t"}).all()
    assert rows == db.session.execute(shape, {"key": "ingest:t"}).all()
    assert [row.user_id for row in rows] == members and {row.tenant_id for row in rows} == {tenant.id}
    assert [row[3] for row in rows] == [["email:pending"], [], [], []]  # the tenant's default, tn-1's own choice


def test_the_same_idempotency_key_never_fans_out_twice(api, comment_type, make_topic):
    make_topic(3)
    key = new_key()

    first = api.post("/v1/notifications", BODY, idempotency_key=key)
    again = api.post("/v1/notifications", BODY, idempotency_key=key)

    assert first.status_code == again.status_code == 202
    assert again.get_json()["fanout"]["id"] == first.get_json()["fanout"]["id"]
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert count("topic_fanouts") == 1
    fanout_topic(first.get_json()["fanout"]["id"])
    # Without the key a repeat is a second fanout, and the dedupe key writes nobody's row twice.
    repeat = _post(api)
    assert fanout_topic(repeat["fanout"]["id"])["created"] == 0 and counts()["notifications"] == 3


def test_a_killed_fanout_resumes_from_its_cursor_and_writes_nothing_twice(api, comment_type, make_topic, small_batches):
    _, ids = make_topic(10)
    fan = _post(api, dedupe_key="c:5")["fanout"]
    get_queue("default").empty()
    first = fanout.run_batch(fan["id"], 4)
    db.session.commit()  # the worker died after its first batch, and its job with it
    assert first.users == 4 and db.session.get(TopicFanout, fan["id"]).cursor_user_id == ids[3]

    get_queue("default").empty()  # (the batch's delivery jobs; they are not what this test follows)
    assert fanout.start_due() == 1  # the sweeper gives the running fanout a new job
    assert get_queue("default").get_job_ids() == [topic_fanout_job(fan["id"]).job_id]
    assert fanout.start_due() == 1 and get_queue("default").count == 1  # already queued: not twice
    result = fanout_topic(fan["id"])

    assert result["users"] == 6 and result["created"] == 6
    assert [row.user_id for row in _rows("c:5")] == ids and counts() == {"notifications": 10, "deliveries": 10}
    # A crash that lost the cursor too: the dedupe key alone stops duplicates.
    db.session.execute(sa.text("UPDATE topic_fanouts SET status = 'running', cursor_user_id = 0, done = 0"))
    db.session.commit()
    assert fanout_topic(fan["id"])["created"] == 0 and counts() == {"notifications": 10, "deliveries": 10}
    assert fanout.start_due() == 0


def test_an_unknown_topic_or_type_is_422_and_writes_nothing(api, comment_type, make_topic):
    make_topic(2)
    unknown_topic = api.post("/v1/notifications", {**BODY, "topic": "nope"})
    unknown_type = api.post("/v1/notifications", {**BODY, "type": "nope"})
    assert unknown_topic.status_code == 422 and unknown_topic.get_json()["errors"][0]["field"] == "topic"
    assert unknown_type.status_code == 422 and unknown_type.get_json()["errors"][0]["field"] == "type"
    assert count("topic_fanouts") == 0 and get_queue("default").count == 0


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"recipients": ["t-1"]}, "topic"),
        ({"send_at": "2030-01-01T00:00:00Z"}, "send_at"),
        ({"exclude": ["x"] * 1001}, "exclude"),
        ({"topic": "a/b"}, "topic"),
        ({"actor": 3}, "actor"),
    ],
)
def test_bad_topic_requests_are_422_and_write_nothing(api, comment_type, make_topic, extra, field):
    make_topic(2)
    response = api.post("/v1/notifications", {**BODY, **extra})
    assert response.status_code == 422
    assert field in {e["field"].split(".")[0] for e in response.get_json()["errors"]}
    assert count("topic_fanouts") == 0


def test_a_fanout_is_read_only_by_its_key_with_the_read_scope(client, api, comment_type, make_topic):
    make_topic(1)
    fan = _post(api)["fanout"]
    other = Api(client, create_api_key(None, "other", ["notifications:read"]))
    writer = Api(client, create_api_key(None, "writer", ["notifications:write"]))
    assert other.get(f"/v1/fanouts/{fan['id']}").status_code == 404
    assert writer.get(f"/v1/fanouts/{fan['id']}").status_code == 403
    topics_only = Api(client, create_api_key(None, "topics", ["topics:write", "topics:read"]))
    assert topics_only.post("/v1/notifications", BODY).status_code == 403


def test_a_deleted_topic_ends_its_running_fanout(api, comment_type, make_topic, small_batches):
    make_topic(6)
    fan = _post(api, dedupe_key="c:6")["fanout"]
    fanout.run_batch(fan["id"], 4)
    db.session.commit()
    assert api.delete("/v1/topics/project:42").status_code == 204

    fanout_topic(fan["id"])

    assert db.session.get(TopicFanout, fan["id"]).status == "done" and counts()["notifications"] == 4


def test_a_fanout_of_100000_followers(api, comment_type, make_topic):
    topic_id, ids = make_topic(100_000)
    db.session.execute(
        sa.text("INSERT INTO notification_preferences (user_id, type, channel, enabled) "
                "SELECT unnest(CAST(:ids AS bigint[])), 'comment', 'email', false"),
        {"ids": ids[::10]},
    )  # fmt: skip
    fan = _post(api, dedupe_key="big:1", actor={"id": "t-1", "name": "Ann"}, exclude=["t-2", "t-3"])["fanout"]
    assert fan["total"] == 99_997

    result = fanout_topic(fan["id"])

    assert result["users"] == result["created"] == 99_997
    assert result["email"] == 99_997 - 10_000 + 1  # t-1 (ids[0]) was the actor, and had e-mail off
    assert counts() == {"notifications": 99_997, "deliveries": 89_998}
    done = db.session.get(TopicFanout, fan["id"])
    assert (done.status, done.total, done.done, done.created) == ("done", 99_997, 99_997, 99_997)


def _scans_of(plan: dict, relation: str) -> list[dict]:
    """Every node of an EXPLAIN (FORMAT JSON) plan that reads relation."""
    found = [plan] if plan.get("Relation Name") == relation else []
    for child in plan.get("Plans", ()):
        found += _scans_of(child, relation)
    return found


def test_a_late_batch_reads_users_from_the_cursor_not_from_the_first_id(api, comment_type, make_topic):
    # A merge join once read users' key from its first id on every batch: 17,000 pages for a batch at 900,000.
    topic_id, ids = make_topic(100_000)
    db.session.execute(sa.text("ANALYZE users, topic_subscriptions"))
    fan = _post(api, dedupe_key="late:1")["fanout"]
    row = db.session.get(TopicFanout, fan["id"])
    params = {name: None for name in ("campaign_id", "group_key", "route", "mode", "api_key_id", "cancellation_key")}
    params |= {"after": ids[90_000], "size": 10_000, "topic_id": topic_id, "excluded": [], "type": "comment",
               "title": row.title, "body": row.body, "link_path": None, "dedupe_key": row.dedupe_key, "data": "{}",
               "tenant": None}  # fmt: skip

    plan = db.session.execute(sa.text("EXPLAIN (FORMAT JSON) " + fanout.batch_sql().text), params).scalar_one()

    scans = _scans_of(plan[0]["Plan"], "users")
    assert scans and all("Index Cond" in scan for scan in scans), scans
    assert all("id >" in scan["Index Cond"] or "id =" in scan["Index Cond"] for scan in scans), scans
