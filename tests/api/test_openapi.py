"""The OpenAPI 3.1 document, and schemathesis fuzzing every operation against it (no 5xx, responses conform)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from app.api import openapi, schemas
from app.links import SHAPE_PATTERN
from tests.factories import NotificationTypeFactory, UserFactory

# The headless feed (issue 19), authenticated by user tokens.
FEED_OPERATIONS = {
    ("get", "/v1/feed"),
    ("get", "/v1/feed/counts"),
    *(
        ("post", f"/v1/feed/notifications/{{notification_id}}/{action}")
        for action in ("read", "archive", "unarchive", "snooze", "unsnooze", "mute")
    ),
    ("post", "/v1/feed/announcements/{announcement_id}/read"),
    ("post", "/v1/feed/read-all"),
    ("post", "/v1/feed/seen"),
    ("get", "/v1/feed/preferences"),
    ("put", "/v1/feed/preferences"),
}


def test_spec_is_openapi_31_and_lists_every_endpoint(client):
    spec = client.get("/v1/openapi.json").get_json()
    assert spec["openapi"] == "3.1.0"
    operations = {(method, path) for path, item in spec["paths"].items() for method in item}
    assert operations == {
        ("post", "/v1/notifications"),
        ("get", "/v1/notifications/{notification_id}"),
        ("put", "/v1/users/{external_id}"),
        ("delete", "/v1/users/{external_id}"),
        ("post", "/v1/users/{external_id}/login-links"),
        ("get", "/v1/users/{external_id}/counts"),
        ("get", "/v1/users/{external_id}/export"),
        ("delete", "/v1/cancellations/{cancellation_key}"),
        ("get", "/v1/ping"),
        ("post", "/v1/user-tokens"),
        ("get", "/v1/user-tokens/signing-secret"),
        *FEED_OPERATIONS,
    }
    assert spec["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["bearerAuth"]["description"],
    }


def test_request_schemas_are_the_validation_models(client):
    spec = client.get("/v1/openapi.json").get_json()
    body = spec["components"]["schemas"]["NotificationIn"]
    assert body["additionalProperties"] is False
    assert body["properties"]["recipients"]["maxItems"] == schemas.MAX_RECIPIENTS
    assert body["properties"]["link"]["anyOf"][0]["pattern"] == SHAPE_PATTERN  # the link rule's own shape
    assert body["oneOf"] == [{"required": ["recipients"]}, {"required": ["recipient"]}]
    post = spec["paths"]["/v1/notifications"]["post"]
    assert "Idempotency-Key" in [p["name"] for p in post["parameters"]]
    assert set(post["responses"]) >= {"202", "400", "401", "409", "413", "415", "422", "429"}


# Built from the same function that serves /v1/openapi.json (it needs no app), so tests collect eagerly.
fuzzed = schemathesis.openapi.from_dict(openapi.spec("http://localhost"))


@pytest.fixture
def fuzz_rows():
    """Some real rows, so the fuzzer's happy paths are reachable too."""
    NotificationTypeFactory(type="comment", default_email=True)
    UserFactory(external_id="user-42")  # the spec's examples name this user and type


def no_validation_drift(ctx, response, case):
    """A request the spec calls valid must never fail *validation* (400/415/422 "invalid fields").

    It replaces schemathesis' positive_data_acceptance, which also counts business answers as failures:
    random recipients are unknown (422, nothing written) and a fuzzed Idempotency-Key repeats with
    another body (422), both as the spec documents.
    """
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    body = response.json() if response.status_code in (400, 415, 422) else {}
    if response.status_code in (400, 415) or body.get("detail") == schemas.INVALID_FIELDS:
        raise AssertionError(f"schema-valid request rejected as invalid: {response.status_code} {body}")
    return None


@fuzzed.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_every_operation_survives_fuzzing_and_conforms(case, app, api_key, fuzz_rows):
    case.operation.schema.app = app  # probes the checks send themselves go to the app too
    case.call_and_validate(
        app=app,
        headers={"Authorization": f"Bearer {api_key}"},
        excluded_checks=[positive_data_acceptance],
        additional_checks=[no_validation_drift],
    )
