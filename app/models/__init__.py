"""Tables, one module per area; import them from here."""

from app.models.actions import NotificationActionClick
from app.models.aggregation import NotificationEvent
from app.models.analytics import ROLLUP_GRAINS, DeliveryRollup, DeliveryRollupChange
from app.models.api import ApiKey, IdempotencyKey, LoginLink
from app.models.chat import CHAT_PROVIDERS, ChatAccount
from app.models.console import (
    AUDIENCE_KINDS,
    CAMPAIGN_STATUSES,
    AuditEntry,
    BulkOperation,
    Campaign,
    CampaignRecipient,
    TemplateVersion,
)
from app.models.delivery import (
    ATTEMPT_OUTCOMES,
    PROVIDER_EVENTS,
    PROVIDER_STATUSES,
    SUPPRESSION_REASONS,
    ChannelSwitch,
    DeliveryAttempt,
    EmailSuppression,
    MessageTemplate,
    ProviderEvent,
    PushSubscription,
    SmsSuppression,
)
from app.models.devices import DEVICE_PLATFORMS, Device
from app.models.digests import DIGEST_KINDS, FREQUENCIES, DigestPreference, DigestRun, DigestTemplate
from app.models.notifications import (
    CHANNEL_MODES,
    DELIVERY_STATUSES,
    PRIORITIES,
    Announcement,
    AnnouncementRead,
    InboxUndo,
    Notification,
    NotificationDelivery,
    NotificationLastSeen,
    NotificationMute,
    NotificationPreference,
    NotificationType,
    ScheduledNotification,
    TenantLastSeen,
)
from app.models.phones import PhoneVerification
from app.models.tenants import Tenant, TenantMember, TenantPreference
from app.models.topics import FANOUT_STATUSES, Topic, TopicFanout, TopicSubscription
from app.models.users import CONSENT_SOURCES, ROLES, OidcAccount, SmsConsent, User
from app.models.webhooks import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from app.models.workflows import WorkflowDraft, WorkflowStep, WorkflowVersion

__all__ = [
    "OidcAccount",
    "NotificationActionClick",
    "InboxUndo",
    "ROLLUP_GRAINS",
    "DeliveryRollup",
    "DeliveryRollupChange",
    "FANOUT_STATUSES",
    "Topic",
    "TopicFanout",
    "TopicSubscription",
    "DIGEST_KINDS",
    "FREQUENCIES",
    "DigestPreference",
    "ChannelSwitch",
    "DigestRun",
    "DigestTemplate",
    "AUDIENCE_KINDS",
    "CAMPAIGN_STATUSES",
    "AuditEntry",
    "BulkOperation",
    "Campaign",
    "CampaignRecipient",
    "TemplateVersion",
    "ApiKey",
    "IdempotencyKey",
    "LoginLink",
    "CHAT_PROVIDERS",
    "ChatAccount",
    "ATTEMPT_OUTCOMES",
    "PROVIDER_EVENTS",
    "PROVIDER_STATUSES",
    "ProviderEvent",
    "SUPPRESSION_REASONS",
    "DeliveryAttempt",
    "EmailSuppression",
    "MessageTemplate",
    "PushSubscription",
    "SmsSuppression",
    "DEVICE_PLATFORMS",
    "Device",
    "ROLES",
    "User",
    "SmsConsent",
    "PhoneVerification",
    "CONSENT_SOURCES",
    "CHANNEL_MODES",
    "DELIVERY_STATUSES",
    "PRIORITIES",
    "Announcement",
    "AnnouncementRead",
    "Notification",
    "NotificationLastSeen",
    "TenantLastSeen",
    "NotificationMute",
    "ScheduledNotification",
    "NotificationDelivery",
    "NotificationEvent",
    "NotificationPreference",
    "NotificationType",
    "Tenant",
    "TenantMember",
    "TenantPreference",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WorkflowDraft",
    "WorkflowStep",
    "WorkflowVersion",
]
