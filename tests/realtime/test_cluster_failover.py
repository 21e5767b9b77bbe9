"""The realtime tier on a real Redis Cluster (3 masters, 3 replicas): badges across two web processes, then kill -9
the master that holds one node's channel. After the replica's failover every socket is served again (registered,
resubscribed, recounted), the counts are right, and no accepted notification is lost."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.live import registry
from tests.realtime.helpers import (
    Gunicorn,
    ack,
    api_notify,
    close_quietly,
    connect,
    create_api_key,
    frame_count,
    is_ping,
)
from tests.support.redis_cluster import RedisCluster, missing_binaries
from tests.support.waiting import free_port, wait_for

pytestmark = [
    pytest.mark.committed,
    pytest.mark.skipif(
        bool(missing_binaries()),
        reason=f"{', '.join(missing_binaries())} not installed: a Redis Cluster needs Debian's redis-server",
    ),
]

USERS_PER_PROCESS = 3


class Tab:
    """One member's socket, read (and acked) by a thread of its own, as a browser tab does; keeps the last count."""

    def __init__(self, base_url: str, cookie: str) -> None:
        self.ws = connect(base_url, cookie)
        self.count: int | None = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                frame = self.ws.receive()
                if frame is None:
                    return
                ack(self.ws, frame)
                if not is_ping(frame):
                    self.count = frame_count(frame)
        except Exception:  # noqa: BLE001 - the socket closed: the test sees the stale count
            return

    def close(self) -> None:
        close_quietly(self.ws)


def unread(user_id: int) -> int:
    db.session.remove()
    return db.session.execute(
        sa.text("SELECT count(*) FROM notifications WHERE user_id = :u AND read_at IS NULL"), {"u": user_id}
    ).scalar_one()


def test_a_master_killed_under_two_web_processes_loses_no_notification_and_every_count_comes_right(
    app, live_server, make_user, tmp_path
):
    with RedisCluster(tmp_path / "cluster") as cluster:
        env = {"REALTIME_REDIS_URL": cluster.url, "REALTIME_REDIS_CLUSTER": "1", "PRESENCE_TTL_SECONDS": "6"}
        web = [Gunicorn(free_port(), env=env, log_path=tmp_path / f"web{n}.log").start() for n in (1, 2)]
        key = create_api_key(live_server)
        members = [(server, *make_user()) for server in web for _ in range(USERS_PER_PROCESS)]
        with live_server.app_context():
            externals = {
                user_id: db.session.execute(
                    sa.text("SELECT external_id FROM users WHERE id = :u"), {"u": user_id}
                ).scalar_one()
                for _, user_id, _ in members
            }
        tabs = {user_id: Tab(server.base_url, cookie) for server, user_id, cookie in members}
        accepted = dict.fromkeys(tabs, 0)

        def notify_everyone(round_: str) -> None:
            for n, user_id in enumerate(tabs):
                server = web[n % 2]  # either process's API takes any member's notification
                try:
                    api_notify(server.base_url, key, externals[user_id], f"{round_} {user_id}")
                except OSError:
                    continue  # not accepted: the API answered an error (none expected), so not counted
                accepted[user_id] += 1

        try:
            wait_for(lambda: all(tab.count == 0 for tab in tabs.values()), 15, "every tab's first count")
            client = cluster.client()
            wait_for(lambda: sum(map(len, registry.nodes_of(client, tabs, app.config).values())) == len(tabs), 10,
                     "every socket in the cluster's registry")  # fmt: skip
            notify_everyone("before")
            wait_for(lambda: all(tab.count == accepted[u] for u, tab in tabs.items()), 10, "the counts before")

            # kill -9 the master that holds the first process's node channel (its sharded subscription dies).
            node_a = next(node for node, users in registry.nodes_of(client, tabs, app.config).items())
            master = cluster.master_of(registry.node_channel(node_a, app.config))
            replica = cluster.replica_of(master)
            cluster.kill(master)
            notify_everyone("during")  # accepted into PostgreSQL; their badge events may be lost with the master
            cluster.wait_promoted(replica)
            notify_everyone("after")

            with live_server.app_context():
                assert {u: unread(u) for u in tabs} == accepted  # nothing accepted was lost
            wait_for(lambda: all(tab.count == accepted[u] for u, tab in tabs.items()), 30,
                     "every tab's count after the failover")  # fmt: skip
            # the client that knew the old layout finds the new master itself (the killed node was its seed)
            wait_for(lambda: sum(map(len, registry.nodes_of(client, tabs, app.config).values())) == len(tabs), 15,
                     "every socket registered again on the new master")  # fmt: skip
            assert all(tab.ws.connected for tab in tabs.values())
            assert [node.client().execute_command("PUBSUB", "NUMPAT") for node in cluster.nodes if node.running] == [
                0
            ] * 5  # nobody listens by pattern on any node
        finally:
            for tab in tabs.values():
                tab.close()
            for server in web:
                server.stop()
