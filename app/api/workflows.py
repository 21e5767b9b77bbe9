"""The API's workflows: GET and PUT /v1/workflows/<type> (the draft, as JSON), POST …/publish, GET …/versions.

The same document the console edits (app/workflows/definition.py). app/api/views.py adds ROUTES to the API
blueprint, so they share its key check, rate limit, body limit and problem documents. A change is audited with
the key's name.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from flask import request
from flask_babel import gettext
from pydantic import BaseModel, Field

from app.api import auth
from app.api.idempotency import idempotent, json_response, store
from app.api.schemas import ApiError
from app.notification_types import queries as types
from app.refusal import Refused
from app.unitofwork import commit
from app.web import bodies
from app.web.bodies import BadInput, JsonBody, absent_by_default, text
from app.web.documented import documented
from app.workflows import queries, service
from app.workflows.definition import (
    BATCH_MAX_SECONDS,
    DELAY_MAX_SECONDS,
    DIGEST_FREQUENCIES,
    KINDS,
    MAX_STEPS,
    ONLY_IF,
    THROTTLE_MAX_COUNT,
    WorkflowInvalid,
)

CHANNELS = Literal["in_app", "email", "push", "sms", "chat"]
TYPE_KEY_PATTERN = r"^[a-z][a-z0-9_]{1,62}$"
_absent = {"json_schema_extra": absent_by_default}


class StepIn(JsonBody):
    """One step: `kind` and the fields of that kind (the others are refused)."""

    kind: Literal[KINDS] = Field(description="channel, delay, batch, digest, throttle or exit.")
    channel: CHANNELS = Field(None, description="channel: where it sends.", **_absent)
    only_if: list[Literal[ONLY_IF]] = Field(
        None, max_length=3, description="channel, digest: sent only if the notification is still unread (or unseen) "
        "and/or no tab of the member is open (offline).", **_absent,
    )  # fmt: skip
    condition: text(1, 500) = Field(
        None, description="channel, digest, exit: a CEL expression over data, recipient, notification and tenant.",
        **_absent,
    )  # fmt: skip
    wait_for_tab: bool = Field(None, description="push: wait for the in-app frame's ack; skipped if a tab showed "
                               "the notification.", **_absent)  # fmt: skip
    seconds: int = Field(None, ge=1, le=DELAY_MAX_SECONDS, description="delay: how long.", **_absent)
    until: text(6, 600, r"^data(\.[A-Za-z_][A-Za-z0-9_]{0,63}){1,8}$") = Field(
        None, description="delay: until the time (ISO 8601) at this path of the payload, such as data.remind_at.",
        **_absent,
    )  # fmt: skip
    local_time: text(5, 5, r"^([01][0-9]|2[0-3]):[0-5][0-9]$") = Field(
        None, description="delay: until the member's next local HH:MM.", **_absent
    )
    window: int = Field(None, ge=1, le=DELAY_MAX_SECONDS,
                        description=f"batch (at most {BATCH_MAX_SECONDS}), throttle: seconds.", **_absent)  # fmt: skip
    count: int = Field(None, ge=1, le=THROTTLE_MAX_COUNT, description="throttle: messages per window.", **_absent)
    frequency: Literal[DIGEST_FREQUENCIES] = Field(None, description="digest: hourly or daily.", **_absent)


class WorkflowIn(JsonBody):
    """A workflow: its steps in order."""

    steps: list[StepIn] = Field(min_length=1, max_length=MAX_STEPS)


class WorkflowOut(BaseModel):
    """A type's workflow as the API edits it: the draft when there is one, else the version in force."""

    type: str
    steps: list[dict] = Field(description="The steps (the draft's when `draft` is true).")
    draft: bool = Field(description="Whether `steps` is an unpublished draft.")
    published_version: int | None = Field(description="The version new notifications run.")
    draft_updated_at: datetime | None = None


class VersionOut(BaseModel):
    """One published version."""

    type: str
    version: int
    steps: list[dict]
    note: str
    restored_from: int | None
    published_at: datetime


class VersionsOut(BaseModel):
    """A type's published versions, newest first."""

    versions: list[VersionOut]


class PublishIn(JsonBody):
    """What to say about the version (shown in its history)."""

    note: text(0, service.NOTE_MAX) = ""


def _type(type_: str) -> str:
    if not re.match(TYPE_KEY_PATTERN, type_) or types.notification_type(type_) is None:
        raise ApiError(404, gettext("There is no notification type called %(type)s.", type=repr(type_[:63])))
    return type_


def _workflow(type_: str) -> WorkflowOut:
    draft, published = queries.draft(type_), queries.published(type_)
    steps = (draft.steps if draft else published.steps if published else {"steps": []})["steps"]
    return WorkflowOut(type=type_, steps=steps, draft=draft is not None,
                       published_version=published.version if published else None,
                       draft_updated_at=draft.updated_at if draft else None)  # fmt: skip


def _version(row) -> VersionOut:
    return VersionOut(type=row.type, version=row.version, steps=row.steps["steps"], note=row.note,
                      restored_from=row.restored_from, published_at=row.published_at)  # fmt: skip


STEP_FIELD = re.compile(r"^steps\.(\d+)(\.|$)")


def refused(error: BadInput):
    """The API's problem document for a body it will not take; a workflow step's field also names the step (from
    1), as the checks after the schema's do, so a client reads one shape whichever found the problem."""
    for item in error.errors or ():
        found = STEP_FIELD.match(item.get("field", ""))
        if found and request.path.startswith("/v1/workflows/"):
            item["step"] = int(found.group(1)) + 1
    return bodies.refused(error)


def invalid(error: WorkflowInvalid) -> ApiError:
    """The 422 of a workflow that does not validate: each problem at its step (from 1) and field."""
    errors = [{"field": f"steps.{p.step - 1}.{p.field}" if p.step else p.field, "step": p.step, "message": p.message}
              for p in error.problems]  # fmt: skip
    return ApiError(422, gettext("This workflow cannot run."), errors=errors)


@documented(
    "getWorkflow",
    "A notification type's workflow",
    {200: WorkflowOut},
    errors=(404,),
    tags=("workflows",),
    description="The draft being edited, if any (draft: true), else the steps of the version in force.",
)
@auth.requires("workflows:read")
def get_workflow(type_key: str):
    """The type's draft or published steps."""
    return json_response(200, _workflow(_type(type_key)))


@documented(
    "putWorkflow",
    "Save a notification type's workflow draft",
    {200: WorkflowOut},
    errors=(404, 422),
    tags=("workflows",),
    description="Checked as a whole: a step that does not validate gets a 422 naming the step (from 1) and the "
    "field, with every problem at once, and nothing is stored. New notifications keep running the published "
    "version until POST /v1/workflows/{type}/publish.",
)
@auth.requires("workflows:write")
@idempotent(WorkflowIn)
def put_workflow(type_key: str, payload: WorkflowIn):
    """Store the draft."""
    type_ = _type(type_key)
    document = {"steps": [step.model_dump(exclude_none=True) for step in payload.steps]}
    try:
        service.save_draft(auth.current_key(), type_, document)
    except WorkflowInvalid as error:
        raise invalid(error) from None
    response = store(json_response(200, _workflow(type_)))
    commit()
    return response


@documented(
    "publishWorkflow",
    "Publish a notification type's workflow draft",
    {201: VersionOut},
    errors=(404, 409),
    tags=("workflows",),
    description="The draft becomes the next immutable version: notifications accepted from now on run it; those "
    "already waiting in a delay keep the version they were accepted under. 409 when there is no draft.",
)
@auth.requires("workflows:write")
@idempotent(PublishIn)
def publish_workflow(type_key: str, payload: PublishIn):
    """Publish the draft."""
    type_ = _type(type_key)
    try:
        row = service.publish(auth.current_key(), type_, payload.note)
    except Refused as refused:
        raise ApiError(409, str(refused)) from None
    except WorkflowInvalid as error:
        raise invalid(error) from None
    response = store(json_response(201, _version(row)))
    commit()
    return response


@documented(
    "listWorkflowVersions",
    "A notification type's published versions",
    {200: VersionsOut},
    errors=(404,),
    tags=("workflows",),
    description="Newest first (at most 200).",
)
@auth.requires("workflows:read")
def list_versions(type_key: str):
    """The type's versions."""
    return json_response(200, VersionsOut(versions=[_version(row) for row in queries.history(_type(type_key))]))


# (rule, method, view): the API blueprint adds each (app/api/views.py), in this order.
RULE = "/workflows/<type_key>"
ROUTES = (
    (RULE, "GET", get_workflow),
    (RULE, "PUT", put_workflow),
    (RULE + "/publish", "POST", publish_workflow),
    (RULE + "/versions", "GET", list_versions),
)
