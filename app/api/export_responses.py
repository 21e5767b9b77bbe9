"""What GET /v1/users/<external_id>/export answers: everything Hato keeps about one member (the right of access)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.api.responses import DELIVERY_CHANNEL
from app.models import DELIVERY_STATUSES, PROVIDER_STATUSES


class ExportProfileOut(BaseModel):
    external_id: str | None
    email: str | None
    display_name: str
    locale: str | None
    timezone: str
    quiet_hours_start: str | None
    quiet_hours_end: str | None
    digest_time: str | None
    created_at: datetime
    phone: str | None = None
    phone_verified_at: datetime | None = None
    sms_opt_in: bool = False
    sms_opt_in_at: datetime | None = None
    sms_consent_source: str | None = None


class ExportConsentOut(BaseModel):
    phone: str | None
    opted_in: bool
    source: str
    detail: str
    created_at: datetime


class ExportDeviceOut(BaseModel):
    platform: str
    app_id: str | None
    app_version: str | None
    locale: str | None
    timezone: str | None
    created_at: datetime
    last_seen_at: datetime
    disabled: bool


class ExportPreferenceOut(BaseModel):
    type: str
    channel: str
    enabled: bool


class ExportDigestPreferenceOut(BaseModel):
    type: str
    frequency: str


class ExportAnnouncementReadOut(BaseModel):
    announcement_id: int
    read_at: datetime


class ExportDeliveryOut(BaseModel):
    channel: DELIVERY_CHANNEL
    status: Literal[DELIVERY_STATUSES]
    attempts: int
    provider: str | None
    sent_at: datetime | None
    skip_reason: str | None
    error_kind: str | None
    provider_status: Literal[PROVIDER_STATUSES] | None
    provider_status_at: datetime | None
    created_at: datetime
    updated_at: datetime


class ExportNotificationOut(BaseModel):
    id: int
    type: str
    title: str
    body: str
    link: str | None
    data: dict[str, Any]
    dedupe_key: str
    in_app: bool
    read_at: datetime | None
    archived_at: datetime | None
    created_at: datetime
    event_count: int
    actor_count: int
    deliveries: list[ExportDeliveryOut]


class ExportChatAccountOut(BaseModel):
    provider: Literal["slack", "msteams", "discord", "line"]
    channel: str | None = Field(description="Slack: the channel or member id posted to.")
    line_user_id: str | None = Field(description="LINE: the member's user id.")
    webhook_host: str | None = Field(description="The webhook's host (the URL itself is a secret and left out).")
    created_at: datetime
    updated_at: datetime
    invalidated_at: datetime | None = Field(description="When the provider refused it for good; null: it did not.")
    invalid_reason: str | None


class ExportTopicOut(BaseModel):
    key: str
    name: str
    followed_at: datetime


class ExportTenantOut(BaseModel):
    key: str
    name: str


class ExportOut(BaseModel):
    format: Literal[1] = Field(description="The document's version; fields are only ever added.")
    user: ExportProfileOut
    preferences: list[ExportPreferenceOut] = Field(description="Only the user's deviations from the types' defaults.")
    digest_preferences: list[ExportDigestPreferenceOut]
    announcement_reads: list[ExportAnnouncementReadOut]
    sms_consents: list[ExportConsentOut] = Field(
        default_factory=list, description="Every change of the SMS consent, oldest first."
    )
    devices: list[ExportDeviceOut] = Field(
        default_factory=list, description="The member's phones (their push tokens are left out: secrets of the phone)."
    )
    chat_accounts: list[ExportChatAccountOut] = Field(
        default_factory=list, description="The member's chat accounts (channel data), without webhook URLs."
    )
    topics: list[ExportTopicOut] = Field(default_factory=list, description="The topics the member follows.")
    tenants: list[ExportTenantOut] = Field(default_factory=list, description="The tenants the member belongs to.")
    notifications: list[ExportNotificationOut] = Field(description="Newest first, each with its deliveries.")
