"""The feed socket of a tenant-scoped token (issue 32): its counts are the tenant's, and another tenant's toast never
reaches it, while an unscoped socket of the same member sees everything."""

from __future__ import annotations

import time

import jwt
import pytest
import sqlalchemy as sa

from app import user_tokens
from app.api_keys.service import create_api_key, key_prefix
from app.extensions import db
from app.live.publish import publish_badge
from tests.feed.test_feed_socket import HOST, authed, wait_for
from tests.realtime.helpers import close_quietly, insert_notification, server_thread
from tests.support.waiting import free_port

pytestmark = pytest.mark.committed


@pytest.fixture(scope="module")
def server(app):
    with server_thread(free_port(), FEED_ALLOWED_ORIGINS=[HOST]) as running:
        yield running


def test_a_scoped_socket_counts_its_tenant_and_gets_only_its_toasts(server):
    with server.app.app_context():
        external_id = f"scoped-{time.monotonic_ns()}"
        user_id = db.session.execute(
            sa.text("INSERT INTO users (email, external_id, role, password_hash) VALUES (:e, :x, 'member', '') "
                    "RETURNING id"), {"e": f"{external_id}@example.com", "x": external_id},
        ).scalar_one()  # fmt: skip
        ids = {}
        for key in (f"a{user_id}", f"g{user_id}"):
            ids[key] = db.session.execute(sa.text("INSERT INTO tenants (key, name) VALUES (:k, :k) RETURNING id"),
                                          {"k": key}).scalar_one()  # fmt: skip
            db.session.execute(sa.text("INSERT INTO tenant_members (user_id, tenant_id) VALUES (:u, :t)"),
                               {"u": user_id, "t": ids[key]})  # fmt: skip
        prefix = key_prefix(create_api_key(None, "scoped socket", ["feed:issue"]))
        db.session.commit()
        secret, audience = user_tokens.signing_secret(prefix), user_tokens.audience()
        db.session.remove()
    acme, globex = ids[f"a{user_id}"], ids[f"g{user_id}"]

    def token(tenant: str | None) -> str:
        claims = {"sub": external_id, "aud": audience, "exp": int(time.time() + 300)}
        claims |= {"tenant": tenant} if tenant else {}
        return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": prefix})

    scoped, everything = authed(server, token(f"a{user_id}")), authed(server, token(None))
    try:
        assert wait_for(scoped, lambda f: f["type"] == "counts")["unread"] == 0
        with server.app.app_context():
            theirs = insert_notification(user_id, "Globex news")
            db.session.execute(sa.text("UPDATE notifications SET tenant_id = :t WHERE id = :id"),
                               {"t": globex, "id": theirs})  # fmt: skip
            db.session.commit()
            publish_badge([user_id], {"title": "Globex news", "tenant": globex})
            db.session.remove()
        seen = wait_for(everything, lambda f: f.get("toasts"))
        assert seen["toasts"] == [{"title": "Globex news"}] and seen["unread"] == 1
        with server.app.app_context():
            ours = insert_notification(user_id, "Acme news")
            db.session.execute(sa.text("UPDATE notifications SET tenant_id = :t WHERE id = :id"),
                               {"t": acme, "id": ours})  # fmt: skip
            db.session.commit()
            publish_badge([user_id], {"title": "Acme news", "tenant": acme})
            db.session.remove()
        frame = wait_for(scoped, lambda f: f.get("toasts"))
        assert frame["toasts"] == [{"title": "Acme news"}] and frame["unread"] == 1  # never the Globex toast
        assert wait_for(everything, lambda f: f.get("toasts"))["unread"] == 2
    finally:
        close_quietly(scoped)
        close_quietly(everything)
