"""The OpenAPI 3.1 document: built from the routes (every /v1 route, nothing else), the limits this server
enforces, and schemathesis fuzzing every operation against it (no 5xx, responses conform)."""

from __future__ import annotations

import re

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from app import create_app
from app.api import openapi, schemas
from app.links import SHAPE_PATTERN
from app.web.bodies import INVALID_FIELDS
from tests.conftest import TEST_CONFIG
from tests.factories import NotificationTypeFactory, UserFactory

REF = "#/components/schemas/"


def v1_routes(app):
    """(method, OpenAPI path, view) of every /v1 route in the app's url_map."""
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/v1/") or rule.rule == "/v1":
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
            for method in rule.methods - {"HEAD", "OPTIONS"}:
                yield method.lower(), path, app.view_functions[rule.endpoint]


def _refs(node) -> set[str]:
    """The component names a part of the document refers to."""
    if isinstance(node, dict):
        found = {node["$ref"].removeprefix(REF)} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(_refs(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(value) for value in node))
    return set()


def test_every_v1_route_is_in_the_document_with_its_models_and_nothing_else(app, client):
    spec = client.get("/v1/openapi.json").get_json()
    assert spec["openapi"] == "3.1.0"
    routes = {(method, path): view for method, path, view in v1_routes(app)}
    documented = {(method, path) for path, item in spec["paths"].items() for method in item}
    assert documented == set(routes)
    for (method, path), view in routes.items():
        operation = spec["paths"][path][method]
        body = getattr(view, "body_model", None)  # the model the view validates its body with
        if body is None:
            assert "requestBody" not in operation, (method, path)
        else:
            assert operation["requestBody"]["content"]["application/json"]["schema"] == {"$ref": REF + body.__name__}
        query = getattr(view, "query_model", None)
        in_query = {p["name"] for p in operation.get("parameters", ()) if p["in"] == "query"}
        assert in_query == (set(query.model_fields) if query else set()), (method, path)
        answers = {}
        for status, model in view.openapi.responses.items():
            models = model if isinstance(model, tuple) else (model,) if model else ()
            answers[str(status)] = {REF + m.__name__ for m in models}
        for status, response in operation["responses"].items():
            if int(status) < 400:
                assert _refs(response) == {ref.removeprefix(REF) for ref in answers.pop(status)}, (method, path)
            else:
                assert _refs(response) == {"Problem"}, (method, path, status)  # every refusal is problem+json
        assert answers == {}, (method, path)
    # Nothing else: every schema in the document is one an operation refers to (directly or through another).
    reachable, todo = set(), _refs(spec["paths"])
    while todo:
        name = todo.pop()
        reachable.add(name)
        todo |= _refs(spec["components"]["schemas"][name]) - reachable
    assert reachable == set(spec["components"]["schemas"])


def test_a_v1_route_without_its_documentation_stops_the_document():
    other = create_app(TEST_CONFIG)
    other.add_url_rule("/v1/undocumented", "undocumented", lambda: "")
    with pytest.raises(LookupError, match="/v1/undocumented"):
        openapi.spec(other)


def test_the_document_states_the_configured_limits(app, client, monkeypatch):
    def user_token_ttl() -> dict:
        spec = client.get("/v1/openapi.json").get_json()
        return spec["components"]["schemas"]["UserTokenIn"]["properties"]["ttl"]

    assert user_token_ttl()["maximum"] == app.config["USER_TOKEN_MAX_TTL"] == 86400
    monkeypatch.setitem(app.config, "USER_TOKEN_MAX_TTL", 600)
    monkeypatch.setitem(app.config, "API_MAX_BODY_BYTES", 4096)
    ttl = user_token_ttl()
    assert (ttl["minimum"], ttl["maximum"]) == (60, 600)
    spec = client.get("/v1/openapi.json").get_json()
    bodies = [op["requestBody"] for item in spec["paths"].values() for op in item.values() if "requestBody" in op]
    # Every body but the topic subscribers' (10,000 ids: TOPIC_SUBSCRIBERS_MAX_BODY_BYTES) has the common limit.
    subscribers = spec["paths"]["/v1/topics/{topic_key}/subscribers"]["post"]["requestBody"]
    assert subscribers["x-max-bytes"] == app.config["TOPIC_SUBSCRIBERS_MAX_BODY_BYTES"]
    bodies.remove(subscribers)
    assert len(bodies) == 16 and all(body["x-max-bytes"] == 4096 for body in bodies)
    assert spec["paths"]["/v1/notifications"]["post"]["responses"]["413"]["description"] == (
        "The body is larger than 4096 bytes."
    )
    assert app.config["API_RATE_LIMIT"] in spec["info"]["description"]


def test_the_server_enforces_what_the_document_states(app, api, monkeypatch):
    UserFactory(external_id="bell-user")
    monkeypatch.setitem(app.config, "USER_TOKEN_MAX_TTL", 600)
    maximum = api.get("/v1/openapi.json").get_json()["components"]["schemas"]["UserTokenIn"]["properties"]["ttl"]
    assert api.post("/v1/user-tokens", {"user": "bell-user", "ttl": maximum["maximum"]}).status_code == 201
    refused = api.post("/v1/user-tokens", {"user": "bell-user", "ttl": maximum["maximum"] + 1})
    assert refused.status_code == 422
    assert refused.get_json()["errors"] == [{"field": "ttl", "message": "Input should be less than or equal to 600"}]
    # The default (an hour) is over this server's maximum too: refused, never silently minted.
    assert api.post("/v1/user-tokens", {"user": "bell-user"}).status_code == 422


def test_request_schemas_are_the_validation_models(client):
    spec = client.get("/v1/openapi.json").get_json()
    body = spec["components"]["schemas"]["NotificationIn"]
    assert body["additionalProperties"] is False
    assert body["properties"]["recipients"]["maxItems"] == schemas.MAX_RECIPIENTS
    assert body["properties"]["link"]["anyOf"][0]["pattern"] == SHAPE_PATTERN  # the link rule's own shape
    assert body["oneOf"] == [{"required": ["recipients"]}, {"required": ["recipient"]}, {"required": ["topic"]}]
    assert body["not"] == {"required": ["topic", "send_at"]}
    post = spec["paths"]["/v1/notifications"]["post"]
    assert "Idempotency-Key" in [p["name"] for p in post["parameters"]]
    assert set(post["responses"]) >= {"202", "400", "401", "409", "413", "415", "422", "429"}
    feed = spec["components"]["schemas"]["FeedPreferenceIn"]
    assert feed["properties"]["channel"]["enum"] == ["in_app", "email", "push", "sms", "chat"]
    assert feed["properties"]["enabled"] == {"title": "Enabled", "type": "boolean"}


# Built from an app like the tests' (the routes and config are what the document states), so tests collect eagerly.
fuzzed = schemathesis.openapi.from_dict(openapi.spec(create_app(TEST_CONFIG)))


@pytest.fixture
def fuzz_rows():
    """Some real rows, so the fuzzer's happy paths are reachable too."""
    NotificationTypeFactory(type="comment", default_email=True)
    UserFactory(external_id="user-42")  # the spec's examples name this user and type


@pytest.fixture
def user_token(api, fuzz_rows) -> str:
    """A user token for user-42: the feed's operations are fuzzed as that member."""
    return api.post("/v1/user-tokens", {"user": "user-42"}).get_json()["token"]


def no_validation_drift(ctx, response, case):
    """A request the spec calls valid must never fail *validation* (400/415/422 "invalid fields").

    It replaces schemathesis' positive_data_acceptance, which also counts business answers as failures:
    random recipients are unknown (422, nothing written) and a fuzzed Idempotency-Key repeats with
    another body (422), both as the spec documents.
    """
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or case.path == "/v1/feed/socket":
        return None  # (the socket answers anything but a WebSocket upgrade with 400, as documented)
    body = response.json() if response.status_code in (400, 415, 422) else {}
    if response.status_code in (400, 415) or body.get("detail") == INVALID_FIELDS:
        raise AssertionError(f"schema-valid request rejected as invalid: {response.status_code} {body}")
    return None


@fuzzed.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_every_operation_survives_fuzzing_and_conforms(case, app, api_key, user_token):
    case.operation.schema.app = app  # probes the checks send themselves go to the app too
    token = user_token if case.path.startswith("/v1/feed") else api_key
    case.call_and_validate(
        app=app,
        headers={"Authorization": f"Bearer {token}"},
        excluded_checks=[positive_data_acceptance],
        additional_checks=[no_validation_drift],
    )
