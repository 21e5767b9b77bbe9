"""hato-client against the live app: send, idempotent retries, typed refusals, pages, the quota's 429, user tokens."""

from __future__ import annotations

import time

import pytest
from hato_client import (
    AsyncHato,
    AuthenticationError,
    Hato,
    NotFound,
    PermissionDenied,
    RateLimited,
    Retry,
    ValidationError,
    sign_user_token,
)

from tests.support import loops

pytestmark = pytest.mark.committed  # the live server commits on its own connections


def comment(recipient: str, **fields) -> dict:
    return {"type": "comment", "recipient": recipient, "title": "Ann replied", "body": "Great idea!", **fields}


def test_send_retry_with_the_same_key_read_back_and_refusals(live):
    with Hato(live.url, live.key) as hato:
        assert hato.put_user("sdk-ann", {"display_name": "Ann", "locale": "en"})["external_id"] == "sdk-ann"
        first = hato.create_notifications(comment("sdk-ann"), idempotency_key="order-1")
        again = hato.create_notifications(comment("sdk-ann"), idempotency_key="order-1")
        sent = first["results"][0]["notification_id"]
        assert again["results"][0]["notification_id"] == sent and again["created"] == first["created"] == 1
        assert hato.get_notification(sent)["id"] == sent
        assert hato.ping()["ok"] is True

        with pytest.raises(ValidationError) as refused:
            hato.create_notifications({"type": "comment", "recipient": "sdk-ann", "title": "", "colour": "red"})
        error = refused.value
        assert (error.status, error.type) == (422, error.problem["type"]) and error.detail
        assert {"title", "colour"} <= set(error.field_errors)
        with pytest.raises(ValidationError) as unknown:
            hato.create_notifications(comment("nobody-here"))
        assert "recipients" in unknown.value.field_errors
        with pytest.raises(NotFound):
            hato.get_notification(2**31)
    with pytest.raises(PermissionDenied) as denied, Hato(live.url, live.key_with("users:read")) as reader:
        reader.create_notifications(comment("sdk-ann"))
    assert denied.value.status == 403 and denied.value.scope == "notifications:write"
    with pytest.raises(AuthenticationError), Hato(live.url, "hato_wrong") as stranger:
        stranger.get_notification(1)


def test_pages_iterate_the_topic_followers_and_the_feed_with_a_signed_user_token(live):
    members = [f"sdk-m{n}" for n in range(5)]
    with Hato(live.url, live.key) as hato:
        for member in members:
            hato.put_user(member, {})
        hato.put_topic("sdk-project", {"name": "Project"})
        hato.change_topic_subscribers("sdk-project", {"add": members})
        followers = [row["external_id"] for row in hato.iter_topic_subscribers("sdk-project", limit=2)]
        assert sorted(followers) == members
        for n in range(5):
            hato.create_notifications(comment(members[0], title=f"Comment {n}"))
        secret = hato.get_user_token_signing_secret()
    token = sign_user_token(members[0], 300, secret)
    with Hato(live.url, user_token=token) as feed:
        titles = [row["title"] for row in feed.iter_feed(limit=2)]
        assert titles == [f"Comment {n}" for n in reversed(range(5))]
        assert feed.get_feed_counts()["unread"] == 5


def test_a_429_from_the_keys_rate_is_retried_after_its_retry_after(live, monkeypatch):
    waits = []
    monkeypatch.setattr(Hato, "_sleep", staticmethod(lambda s: waits.append(s) or time.sleep(s)))
    with Hato(live.url, live.key) as hato:
        hato.put_user("sdk-quota", {})
    with Hato(live.url, live.key_with(rate=1, burst=1)) as limited:
        for n in range(3):  # the second call is refused, unless a loaded machine took a second between them
            assert limited.create_notifications(comment("sdk-quota", title=f"Call {n}"))["created"] == 1
            if waits:
                break
    assert waits == [1.0]  # the server's Retry-After, not a backoff guess
    with Hato(live.url, live.key_with(rate=0.01, burst=1), retry=Retry(attempts=1)) as impatient:
        impatient.create_notifications(comment("sdk-quota", title="Once"))
        with pytest.raises(RateLimited) as refused:
            impatient.create_notifications(comment("sdk-quota", title="Too soon"))
    error = refused.value
    assert (error.status, error.problem["limit"]) == (429, "rate")
    assert 0 < error.retry_after <= 100 and error.retry_after == float(error.headers["retry-after"])


def test_the_async_client_sends_pages_and_raises_the_same(live):
    async def scenario():
        async with AsyncHato(live.url, live.key) as hato:
            await hato.put_user("sdk-async", {})
            first = await hato.create_notifications(comment("sdk-async"), idempotency_key="a-1")
            again = await hato.create_notifications(comment("sdk-async"), idempotency_key="a-1")
            assert first["results"] == again["results"]
            for n in range(3):
                await hato.create_notifications(comment("sdk-async", title=f"Async {n}"))
            with pytest.raises(ValidationError):
                await hato.create_notifications({"type": "comment"})
            token = (await hato.create_user_token({"user": "sdk-async", "ttl": 300}))["token"]
        async with AsyncHato(live.url, user_token=token) as feed:
            return [row["title"] async for row in feed.iter_feed(limit=2)]

    assert loops.run(scenario()) == ["Async 2", "Async 1", "Async 0", "Ann replied"]
