"""Read replicas with read-your-writes (issue 34 item 2), against a real streaming standby.

The module builds a private primary and a hot standby from the installed server binaries
(tests/support/pgcluster.py; never the machine's shared cluster), migrates the primary once and
points DATABASE_REPLICA_URLS at the standby. Which server answered a read is asked of the server
itself: a spy runs `SELECT pg_is_in_recovery()` on the session the routed query used.
"""

from __future__ import annotations

import re
import time

import psycopg
import pytest
import sqlalchemy as sa

from app import create_app, replicas
from app.api_keys import service as keys
from app.config import Config, check
from app.extensions import db
from app.realtime import hub
from tests.conftest import TEST_CONFIG, csrf_token_for
from tests.factories import NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support import pgcluster
from tests.support.waiting import free_port

pytestmark = [
    pytest.mark.committed,
    pytest.mark.skipif(
        not pgcluster.available(), reason="needs PostgreSQL 15's server binaries (initdb, pg_basebackup)"
    ),
]

DATABASE = "hato_replicas_rw"
DELAY_SECONDS = 3.0  # recovery_min_apply_delay while a test needs the standby behind


@pytest.fixture(scope="module")
def pair():
    with pgcluster.primary_with_replica() as servers:
        yield servers


@pytest.fixture(scope="module")
def replica_app(pair):
    """An app on the private primary's migrated database, reading from its standby; two members and an admin."""
    from flask_migrate import upgrade

    primary, standby = pair
    url = primary.create_database(DATABASE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DATABASE_URL", url)  # Config() reads it, so the Redis namespace follows it too
        config = {**TEST_CONFIG, "DATABASE_REPLICA_URLS": [standby.url(DATABASE)], "REPLICA_MAX_LAG_SECONDS": 60.0}
        application = create_app(config)
    with application.app_context():
        upgrade()
        NotificationTypeFactory(type="comment")
        alice, bob = UserFactory(external_id="alice"), UserFactory(external_id="bob")
        admin = UserFactory(role="admin", email="adam@example.com")
        carol = UserFactory(external_id="carol")
        note = NotificationFactory(user_id=alice.id, title="For Alice")
        NotificationFactory(user_id=bob.id, title="For Bob")
        carols = NotificationFactory(user_id=carol.id, title="For Carol")
        key = keys.create_api_key(None, "feed", scopes=["feed:issue"])
        db.session.commit()
        application.seed = {"alice": alice.id, "bob": bob.id, "admin": admin.id, "note": note.id, "carols": carols.id,
                            "key": key}  # fmt: skip
        db.session.remove()
    standby.wait_caught_up()
    yield application
    replicas.replica_set(application).replicas[0].engine.dispose()


@pytest.fixture
def rapp(replica_app, pair):
    """The replica app with fresh health, its standby caught up and replaying at once again afterwards."""
    _, standby = pair
    replicas.replica_set(replica_app).forget()
    yield replica_app  # no app context held here: each request pushes its own (g and current_user with it)
    standby.set_apply_delay(0)
    standby.wait_caught_up()
    replica_app.config["REPLICA_MAX_LAG_SECONDS"] = 60.0


@pytest.fixture
def answered(monkeypatch):
    """The servers (standby or primary) that answered the inbox's list and the delivery log, in order."""
    servers: list[str] = []

    def spy(module, name):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            standby = db.session.execute(sa.text("SELECT pg_is_in_recovery()")).scalar_one()
            servers.append("standby" if standby else "primary")
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    from app.analytics import queries as analytics
    from app.delivery import ledger_queries
    from app.inbox import queries

    spy(queries, "notification_page")
    spy(queries, "badge_counts")
    spy(analytics, "report")
    spy(ledger_queries, "delivery_page")
    return servers


def signed_in(app, user_id: int):
    client = app.test_client()
    with client.session_transaction() as sess:
        sess["_user_id"] = str(user_id)
        sess["_fresh"] = True
        from app.auth import sessions

        sess.update(sessions.stamp(user_id, 0))
    return client


def feed_token(app, external_id: str) -> str:
    """A user token for the feed, issued through the API as a customer's backend would."""
    answer = app.test_client().post(
        "/v1/user-tokens",
        json={"user": external_id, "ttl": 600},
        headers={"Authorization": f"Bearer {app.seed['key']}"},
    )
    assert answer.status_code == 201, answer.get_json()
    return answer.get_json()["token"]


def delay_replay(standby) -> None:
    standby.set_apply_delay(DELAY_SECONDS)
    time.sleep(0.2)  # the startup process rereads its settings on the reload signal


def test_own_write_is_read_from_the_primary_while_others_read_the_lagging_standby(rapp, pair, answered):
    _, standby = pair
    seed = rapp.seed
    alice, bob, admin = signed_in(rapp, seed["alice"]), signed_in(rapp, seed["bob"]), signed_in(rapp, seed["admin"])
    feed, carol = rapp.test_client(), {"Authorization": f"Bearer {feed_token(rapp, 'carol')}"}
    assert "item--unread" in alice.get("/inbox").get_data(as_text=True)
    assert feed.get("/v1/feed/counts", headers=carol).get_json()["unread"] == 1
    assert answered == ["standby", "standby"]  # nothing written by Alice or Carol lately: the standby answers
    standby.wait_caught_up()  # the page recorded Alice's last-seen time

    delay_replay(standby)
    marked = alice.post(
        f"/inbox/notifications/{seed['note']}/read", headers={"X-CSRFToken": csrf_token_for(rapp, alice)}
    )
    assert marked.status_code in (200, 204, 302, 303)
    assert feed.post(f"/v1/feed/notifications/{seed['carols']}/read", headers=carol).status_code == 200
    with psycopg.connect(standby.url(DATABASE)) as conn:  # the standby has not replayed them yet
        read_at = conn.execute("SELECT read_at FROM notifications WHERE id IN (%s, %s)", (seed["note"], seed["carols"]))
        assert [row[0] for row in read_at] == [None, None]
    del answered[:]

    page = alice.get("/inbox").get_data(as_text=True)
    assert "For Alice" in page and "item--unread" not in page  # her own mark-read, at once
    assert feed.get("/v1/feed/counts", headers=carol).get_json()["unread"] == 0  # Carol's too, by her token
    assert bob.get("/inbox").status_code == 200  # Bob wrote nothing: the standby, behind by a few seconds
    assert admin.get("/console/deliveries").status_code == 200
    assert admin.get("/console/analytics").status_code == 200
    # A socket's first frame: Alice's counts from the primary; the admin's (who wrote nothing) from the standby.
    # Bob's would come from the primary too: opening his inbox recorded his last-seen time, not yet replayed.
    with rapp.test_request_context():
        assert hub._first_counts(seed["alice"], None).unread == 0
        assert hub._first_counts(seed["admin"], None).unread == 0
    assert answered == ["primary", "primary", "standby", "standby", "standby", "primary", "standby"]

    metrics = admin.get("/metrics").get_data(as_text=True)
    reads = dict(re.findall(r'^hato_replica_reads_total\{server="(\w+)"\} ([\d.]+)$', metrics, re.M))
    assert float(reads["replica0"]) >= 6 and float(reads["primary"]) >= 3
    assert 'hato_replica_state{replica="replica0",state="ok"} 1.0' in metrics


def test_a_lagging_standby_is_skipped(rapp, pair, answered):
    _, standby = pair
    rapp.config["REPLICA_MAX_LAG_SECONDS"] = 1.0
    delay_replay(standby)
    with psycopg.connect(pair[0].url(DATABASE), autocommit=True) as conn:  # someone writes; the standby waits
        conn.execute("UPDATE users SET display_name = 'Robert' WHERE id = %s", (rapp.seed["bob"],))
    time.sleep(1.2)  # its last replayed commit is now older than the limit, and it is behind the primary
    reader = signed_in(rapp, rapp.seed["admin"])  # wrote nothing: only the lag keeps the standby out
    assert reader.get("/inbox").status_code == 200
    assert answered == ["primary"]
    assert replicas.replica_set(rapp).replicas[0].health.state == "lagging"


def test_an_idle_primary_does_not_make_the_standby_late(rapp, pair, answered):
    _, standby = pair
    rapp.config["REPLICA_MAX_LAG_SECONDS"] = 1.0
    standby.wait_caught_up()
    time.sleep(1.2)  # no commit for longer than the limit: the timestamp alone would call it late
    client = signed_in(rapp, rapp.seed["bob"])
    assert client.get("/inbox").status_code == 200
    assert answered == ["standby"]


def test_a_down_replica_is_skipped_and_the_page_answers(rapp, pair, answered):
    chosen = replicas.replica_set(rapp)
    dead = replicas.Replica("replica9", f"postgresql://postgres@127.0.0.1:{free_port()}/{DATABASE}", {})
    live = chosen.replicas
    chosen.replicas = [dead]
    try:
        client = signed_in(rapp, rapp.seed["bob"])
        assert client.get("/inbox").status_code == 200
        assert dead.health.state == "down"
        chosen.replicas = [dead, *live]  # the dead one is skipped, the live one answers
        pair[1].wait_caught_up()  # the page recorded Bob's last-seen time: his next read waits for its replay
        assert client.get("/inbox").status_code == 200
    finally:
        chosen.replicas = live
    assert answered == ["primary", "standby"]


def test_replica_urls_are_checked():
    config = vars(Config({"DATABASE_REPLICA_URLS": "postgresql://r1/hato, mysql://r2/hato", "SECRET_KEY": "x" * 40}))
    assert config["DATABASE_REPLICA_URLS"] == ["postgresql://r1/hato", "mysql://r2/hato"]
    problems = [p for p in check(config) if "REPLICA" in p]
    assert problems == [
        "DATABASE_REPLICA_URLS='mysql://r2/hato' is not a URL starting with postgresql:// or postgres://"
    ]


def test_a_read_cancelled_by_a_recovery_conflict_is_retried_on_the_primary(rapp):
    chosen = replicas.replica_set(rapp)
    calls = []

    def conflicted():
        standby = db.session.execute(sa.text("SELECT pg_is_in_recovery()")).scalar_one()
        calls.append(standby)
        if standby:  # what a standby raises when replay needs the rows this query still reads
            raise sa.exc.OperationalError("SELECT …", {}, psycopg.errors.SerializationFailure())
        return "answered"

    with rapp.test_request_context():
        assert replicas.read(rapp.seed["admin"], conflicted) == "answered"
    assert calls == [True, False]
    assert chosen.replicas[0].health.state == "ok"  # cancelled, not down: the next read may use it
