"""PUT, GET and DELETE /v1/users/<id>/channel-data/<provider>: scopes, other users, validation, the document."""

from __future__ import annotations

import pytest

from app.users import chat_accounts
from tests.api.conftest import count
from tests.factories import UserFactory
from tests.feed.test_feed_api import _key

LINE_USER = "U" + "0123456789abcdef" * 2
DISCORD = "https://discord.com/api/webhooks/123456789012345678/a-secret-token"
TEAMS = "https://prod-23.westeurope.logic.azure.com/workflows/abc/triggers/manual/paths/invoke?sig=x"
SLACK_HOOK = "https://hooks.slack.com/services/T000/B000/secret"


@pytest.fixture
def ann():
    return UserFactory(external_id="ann")


@pytest.fixture
def tokens(app, monkeypatch):
    """The installation's Slack bot token and LINE channel access token (validation needs them for some data)."""
    monkeypatch.setitem(app.config, "SLACK_BOT_TOKEN", "xoxb-1-2-test")
    monkeypatch.setitem(app.config, "LINE_CHANNEL_ACCESS_TOKEN", "line-token")


def path(provider: str, user: str = "ann") -> str:
    return f"/v1/users/{user}/channel-data/{provider}"


@pytest.mark.parametrize(
    "provider, data",
    [("slack", {"channel": "U024BE7LH"}), ("slack", {"webhook_url": SLACK_HOOK}), ("msteams", {"webhook_url": TEAMS}),
     ("discord", {"webhook_url": DISCORD}), ("line", {"user_id": LINE_USER})],
)  # fmt: skip
def test_each_providers_data_is_stored_read_back_and_unlinked(api, ann, tokens, provider, data):
    created = api.put(path(provider), data)
    assert created.status_code == 201, created.get_json()
    body = created.get_json()
    assert body["provider"] == provider and {k: body[k] for k in data} == data and body["invalidated_at"] is None
    assert api.put(path(provider), data).status_code == 200
    assert api.get(path(provider)).get_json() == {
        **body,
        "updated_at": api.get(path(provider)).get_json()["updated_at"],
    }
    assert api.delete(path(provider)).status_code == 204
    assert api.get(path(provider)).status_code == 404
    assert api.delete(path(provider)).status_code == 404


def test_setting_it_again_replaces_it_and_clears_an_invalidation(api, ann, tokens, app):
    api.put(path("discord"), {"webhook_url": DISCORD})
    from app.extensions import db

    chat_accounts.invalidate(db.session, ann.id, "discord", {"webhook_url": DISCORD}, "Unknown Webhook")
    stale = api.get(path("discord")).get_json()
    assert stale["invalidated_at"] is not None and stale["invalid_reason"] == "Unknown Webhook"
    fresh = api.put(path("discord"), {"webhook_url": DISCORD + "2"}).get_json()
    assert fresh["invalidated_at"] is None and fresh["webhook_url"] == DISCORD + "2"


@pytest.mark.parametrize(
    "provider, data, field",
    [
        ("msteams", {"channel": "C0123ABCD"}, "channel"),  # Teams takes a webhook only
        ("line", {"webhook_url": DISCORD}, "webhook_url"),
        ("slack", {"user_id": LINE_USER}, "user_id"),
        ("discord", {"webhook_url": "http://discord.com/api/webhooks/1/x"}, "webhook_url"),  # not https
        ("discord", {"webhook_url": "https://discord.com:8443/api/webhooks/1/x"}, "webhook_url"),  # another port
        ("discord", {"webhook_url": "https://evil.example/api/webhooks/1/x"}, "webhook_url"),  # not allowed
        ("msteams", {"webhook_url": "https://10.0.0.5/hook"}, "webhook_url"),  # an address, a private one
        ("msteams", {"webhook_url": "https://user:pw@x.webhook.office.com/hook"}, "webhook_url"),
        ("slack", {"webhook_url": "https://webhook.office.com.evil.example/x"}, "webhook_url"),
    ],
)
def test_data_the_provider_does_not_take_or_an_unsafe_webhook_is_422_naming_the_field(api, ann, tokens, provider,
                                                                                     data, field):  # fmt: skip
    response = api.put(path(provider), data)
    assert response.status_code == 422
    assert response.headers["Content-Type"].startswith("application/problem+json")
    assert [e["field"] for e in response.get_json()["errors"]] == [field]
    assert count("chat_accounts") == 0


@pytest.mark.parametrize(
    "body, field",
    [({}, "body"), ({"channel": "U024BE7LH", "webhook_url": DISCORD}, "body"), ({"channel": "not a channel"},
     "channel"), ({"user_id": "U123"}, "user_id"), ({"webhook_url": "ftp://discord.com/x"}, "webhook_url"),
     ({"channel": "U024BE7LH", "extra": 1}, "extra")],
)  # fmt: skip
def test_a_body_outside_the_schema_is_422_naming_the_field(api, ann, tokens, body, field):
    response = api.put(path("slack"), body)
    assert response.status_code == 422
    assert field in [e["field"] for e in response.get_json()["errors"]] and count("chat_accounts") == 0


def test_a_slack_channel_or_a_line_user_needs_the_installations_token(api, ann, app, monkeypatch):
    monkeypatch.setitem(app.config, "SLACK_BOT_TOKEN", "")
    monkeypatch.setitem(app.config, "LINE_CHANNEL_ACCESS_TOKEN", "")
    for provider, data in (("slack", {"channel": "U024BE7LH"}), ("line", {"user_id": LINE_USER})):
        response = api.put(path(provider), data)
        assert response.status_code == 422 and response.get_json()["errors"][0]["field"] == next(iter(data))
    assert api.put(path("slack"), {"webhook_url": SLACK_HOOK}).status_code == 201  # a webhook needs no token


def test_chat_allowed_hosts_decides_which_webhook_hosts_are_taken(api, ann, app, monkeypatch):
    monkeypatch.setitem(app.config, "CHAT_ALLOWED_HOSTS", "chat.example.com")
    assert api.put(path("discord"), {"webhook_url": DISCORD}).status_code == 422
    assert api.put(path("discord"), {"webhook_url": "https://chat.example.com/hook/1"}).status_code == 201


def test_unknown_provider_user_and_operator_accounts(api, ann):
    UserFactory(external_id="op", role="operator")
    assert api.put(path("telegram"), {"user_id": LINE_USER}).status_code == 404
    assert api.get(path("telegram")).status_code == 404
    assert api.put(path("discord", "nobody"), {"webhook_url": DISCORD}).status_code == 404
    assert api.get(path("discord", "nobody")).status_code == 404
    assert api.put(path("discord", "op"), {"webhook_url": DISCORD}).status_code == 403
    assert count("chat_accounts") == 0


def test_other_users_are_unaffected(api, ann, tokens):
    bob = UserFactory(external_id="bob")
    api.put(path("discord", "bob"), {"webhook_url": DISCORD})
    api.put(path("discord"), {"webhook_url": DISCORD + "-ann"})
    assert api.delete(path("discord")).status_code == 204
    assert [a.data["webhook_url"] for a in chat_accounts.accounts_of(bob.id)] == [DISCORD]
    assert api.get(path("line")).status_code == 404  # ann has none; bob's are not hers


def test_scopes_users_write_sets_and_unlinks_users_read_reads(client, ann, tokens):
    reader, writer = _key(client, "users:read"), _key(client, "users:write")
    assert reader.put(path("discord"), {"webhook_url": DISCORD}).status_code == 403
    assert writer.put(path("discord"), {"webhook_url": DISCORD}).status_code == 201
    assert writer.get(path("discord")).status_code == 403
    assert reader.get(path("discord")).get_json()["webhook_url"] == DISCORD
    assert reader.delete(path("discord")).status_code == 403
    assert count("chat_accounts") == 1


def test_the_export_lists_chat_accounts_without_webhook_urls(api, ann, tokens):
    api.put(path("discord"), {"webhook_url": DISCORD})
    api.put(path("slack"), {"channel": "U024BE7LH"})
    exported = api.get("/v1/users/ann/export")
    document = exported.get_json()
    assert "a-secret-token" not in exported.get_data(as_text=True)
    assert [(a["provider"], a["channel"], a["webhook_host"]) for a in document["chat_accounts"]] == [
        ("discord", None, "discord.com"), ("slack", "U024BE7LH", None)]  # fmt: skip


def test_the_document_covers_the_operations_and_their_schemas(client):
    spec = client.get("/v1/openapi.json").get_json()
    operations = spec["paths"]["/v1/users/{external_id}/channel-data/{provider}"]
    assert {m: operations[m]["security"] for m in operations} == {
        "put": [{"bearerAuth": ["users:write"]}], "get": [{"bearerAuth": ["users:read"]}],
        "delete": [{"bearerAuth": ["users:write"]}]}  # fmt: skip
    provider = next(p for p in operations["put"]["parameters"] if p["name"] == "provider")
    assert provider["schema"]["enum"] == ["slack", "msteams", "discord", "line"]
    schema = spec["components"]["schemas"]["ChannelDataIn"]
    assert (
        set(schema["properties"]) == {"channel", "webhook_url", "user_id"} and schema["additionalProperties"] is False
    )
    assert schema["oneOf"] == [{"required": ["channel"]}, {"required": ["webhook_url"]}, {"required": ["user_id"]}]
    assert "ChannelDataOut" in spec["components"]["schemas"]
