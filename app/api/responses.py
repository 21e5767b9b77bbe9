"""Response models of the JSON API (what it answers); the views declare them, and openapi.py reads them there."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.notification_schemas import Actor
from app.delivery.channels import routable_names
from app.models import DELIVERY_STATUSES, PRIORITIES, PROVIDER_EVENTS, PROVIDER_STATUSES

# The channel names come from the registry (app/delivery/channels), so the spec's enums follow its modules.
DELIVERY_CHANNEL = Literal[routable_names()]


class RecipientResult(BaseModel):
    recipient: str
    notification_id: int
    status: Literal["created", "existing"]


class NotificationAccepted(BaseModel):
    type: str
    priority: Literal[PRIORITIES]
    dedupe_key: str
    created: int = Field(description="How many recipients got a new notification.")
    existing: int = Field(description="How many already had one under this dedupe key.")
    results: list[RecipientResult]

    @classmethod
    def of(cls, type_: str, dedupe_key: str, result) -> NotificationAccepted:
        """Build the 202 body from a notify.service.NotifyResult."""
        results = [
            RecipientResult(
                recipient=r.ref, notification_id=r.notification_id, status="created" if r.created else "existing"
            )
            for r in result.recipients
        ]
        created = sum(r.status == "created" for r in results)
        return cls(
            type=type_,
            priority=result.priority,
            dedupe_key=dedupe_key,
            created=created,
            existing=len(results) - created,
            results=results,
        )


class ScheduledResult(BaseModel):
    recipient: str
    status: Literal["scheduled", "existing"] = Field(
        description="existing: this recipient already has a notification, or one scheduled, under this dedupe key."
    )


class NotificationScheduled(BaseModel):
    """The 202 body of a request with a future send_at: nothing exists yet but the schedule."""

    status: Literal["scheduled"]
    type: str
    priority: Literal[PRIORITIES]
    dedupe_key: str
    send_at: datetime
    scheduled: int = Field(description="How many recipients got a scheduled notification.")
    existing: int = Field(description="How many already had one (sent or scheduled) under this dedupe key.")
    results: list[ScheduledResult]

    @classmethod
    def of(cls, type_: str, dedupe_key: str, send_at: datetime, result) -> NotificationScheduled:
        """Build the 202 body from a notify.schedule.ScheduleResult."""
        results = [
            ScheduledResult(recipient=ref, status="scheduled" if new else "existing") for ref, new in result.recipients
        ]
        scheduled = sum(r.status == "scheduled" for r in results)
        return cls(
            status="scheduled",
            type=type_,
            priority=result.priority,
            dedupe_key=dedupe_key,
            send_at=send_at,
            scheduled=scheduled,
            existing=len(results) - scheduled,
            results=results,
        )


class CancellationOut(BaseModel):
    cancellation_key: str
    scheduled: int = Field(description="Scheduled notifications removed before they were sent.")
    deliveries: int = Field(description="Pending e-mail/push deliveries now skipped (reason `cancelled`).")
    escalations: int = Field(description="Waiting escalations now skipped (reason `cancelled`).")


class ActionStateOut(BaseModel):
    notification_id: int
    name: str = Field(description="The named action.")
    state: str = Field(description="What its button shows now.")
    clicked_at: datetime | None = Field(description="When the member clicked it (null: not yet; it stays closed).")
    via: Literal["inbox", "feed", "email", "push"] | None = Field(description="Where they clicked it.")


class ProviderEventOut(BaseModel):
    provider: str = Field(description="The e-mail provider that reported it: sendgrid, mailgun or postmark.")
    event: Literal[PROVIDER_EVENTS] = Field(
        description="bounced: a hard bounce (the address is suppressed); soft_bounced: a temporary failure."
    )
    occurred_at: datetime = Field(description="When it happened, as the provider says.")
    received_at: datetime
    detail: dict[str, str] = Field(description="What the provider said: recipient, reason, bounce type, url …")


class DeliveryOut(BaseModel):
    channel: DELIVERY_CHANNEL
    status: Literal[DELIVERY_STATUSES] = Field(
        description='pending, sending, sent, skipped, failed (the DLQ); in a channel_mode "first" chain also '
        "passed (this channel could not reach the recipient: the next one took over) and standby (a later "
        "channel, not needed yet)."
    )
    route_rank: int | None = Field(
        description='Its place in a channel_mode "first" chain, from 0 (null: not in one). The chain\'s rows '
        "come in this order: the passed ones say why in skip_reason or error_kind and last_error."
    )
    attempts: int
    last_error: str | None = Field(
        description="Why the last try failed; on a sent (or again pending) row sent to several targets, the ones "
        "that did not take it and what their service said: `1/2 · slack:C0123 permanent: channel_not_found`."
    )
    error_kind: str | None
    skip_reason: str | None
    sent_at: datetime | None
    next_attempt_at: datetime
    updated_at: datetime
    provider_status: Literal[PROVIDER_STATUSES] | None = Field(
        description="What the e-mail provider reported after the send, the strongest so far "
        "(delivered < bounced < complained); null: nothing reported (yet)."
    )
    provider_status_at: datetime | None
    provider_events: list[ProviderEventOut] = Field(
        description="Every event the provider reported for this delivery, oldest first (at most 200 per notification)."
    )


class EventOut(BaseModel):
    dedupe_key: str
    actor: Actor | None
    data: dict[str, Any]
    created_at: datetime


class TraceStepOut(BaseModel):
    position: int = Field(description="The step's place in the workflow, from 1.")
    kind: Literal["channel", "delay", "batch", "digest", "throttle", "exit"]
    state: str = Field(
        description="shown / hidden (in-app); waited / waiting (a delay, until `at`); applied (batch, throttle); "
        "sent, skipped, failed, pending, sending, standby (a sending step, from its delivery); not_sent (the member "
        "had the channel off); exited / continued / pending (an exit); not_reached (after the exit that ended it)."
    )
    at: datetime | None = Field(description="When it happened, or is due.")
    channel: str | None
    reason: str | None = Field(description="Why skipped or failed: the rule (read, preference_off, condition…).")
    condition: str | None = Field(description="The condition that did not hold, when that is the reason.")
    delivery_id: int | None


class WorkflowTraceOut(BaseModel):
    version: int = Field(description="The workflow version the notification runs (the one in force when accepted).")
    steps: list[TraceStepOut]


class NotificationActionOut(BaseModel):
    label: str
    labels: dict[str, str] | None = None
    url: str | None = Field(None, description="A link button's path.")
    action: str | None = Field(None, description="A named action's name.")
    state: str | None = Field(None, description="What you answered (PATCH …/actions/{name}).")
    clicked_at: datetime | None = Field(None, description="When the member clicked it (null: not yet).")
    via: Literal["inbox", "feed", "email", "push"] | None = Field(None, description="Where they clicked it.")


class NotificationOut(BaseModel):
    id: int
    recipient: str | None
    type: str
    title: str
    body: str
    link: str | None
    data: dict[str, Any]
    dedupe_key: str
    in_app: bool = Field(
        description="false: the user turned in-app off for this type; the row only anchors deliveries."
    )
    read_at: datetime | None
    archived_at: datetime | None
    created_at: datetime
    deliveries: list[DeliveryOut]
    event_count: int = Field(description="How many events this notification holds (more than 1: aggregated).")
    actor_count: int = Field(description="How many distinct actors those events name.")
    window_ends_at: datetime | None = Field(description="Aggregated: when its window closes (then e-mail/push go).")
    events: list[EventOut] = Field(description="The events an aggregated notification holds, oldest first.")
    workflow: WorkflowTraceOut | None = Field(
        description="Its run through its type's workflow, step by step (null: accepted before workflows)."
    )
    actions: list[NotificationActionOut] = Field(
        default_factory=list, description="Its action buttons, each named action with its click and your answer."
    )


class UserOut(BaseModel):
    external_id: str
    email: str | None
    display_name: str
    locale: str | None
    timezone: str
    phone: str | None = Field(description="E.164.")
    phone_verified: bool = Field(description="Whether SMS may go to the number (verified, and not refused).")
    sms_opt_in: bool = Field(description="The member's consent to SMS in force.")
    properties: dict[str, Any] = Field(description="What the product said of the member (workflow conditions read "
                                       "them as recipient.properties).")  # fmt: skip
    tenants: list[str] = Field(default_factory=list, description="The keys of the member's tenants, sorted.")


class LoginLinkOut(BaseModel):
    url: str = Field(description="Open in the user's browser within 5 minutes; it works once.")
    expires_at: datetime


class CountsOut(BaseModel):
    unread: int = Field(
        ge=0, le=200, description="Unread notifications + unread active announcements; each part stops at 100."
    )
    unseen: int = Field(
        ge=0,
        le=200,
        description="Those of them newer than the user's last opening of the inbox; each part stops at 100.",
    )


class Ping(BaseModel):
    ok: bool


class OpenApiOut(BaseModel):
    """GET /v1/openapi.json: this OpenAPI 3.1 document (its other members as OpenAPI defines them)."""

    model_config = ConfigDict(extra="allow")

    openapi: Literal["3.1.0"]
    info: dict[str, Any]
    paths: dict[str, Any]
    components: dict[str, Any]


class FieldError(BaseModel):
    field: str
    message: str


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = None
    unknown_recipients: list[str] | None = None
    scope: str | None = Field(None, description="The scope the API key lacks (403 insufficient_scope).")
    code: str | None = Field(
        None,
        description="Why a user token was refused (401 on /v1/feed): malformed, expired (fetch a new token), "
        "audience, signature, claims or unknown_user.",
    )


class UserTokenOut(BaseModel):
    token: str = Field(description="A JWT (HS256) for `Authorization: Bearer …` on /v1/feed and the feed socket.")
    expires_at: datetime


class SigningSecretOut(BaseModel):
    kid: str = Field(description="Put in the JWT header as `kid` when the product signs its own tokens.")
    secret: str = Field(description="The HS256 secret, base64url without padding: decode it before signing.")
    algorithm: Literal["HS256"] = "HS256"
    audience: str = Field(description="The `aud` claim every token must carry (this Hato's BASE_URL).")
