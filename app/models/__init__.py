"""Tables, one module per area; import them from here."""

from app.models.aggregation import NotificationEvent
from app.models.api import ApiKey, IdempotencyKey, LoginLink
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
    SUPPRESSION_REASONS,
    DeliveryAttempt,
    EmailSuppression,
    MessageTemplate,
    PushSubscription,
)
from app.models.digests import DIGEST_KINDS, FREQUENCIES, DigestPreference, DigestRun, DigestTemplate
from app.models.notifications import (
    CHANNELS,
    DELIVERY_CHANNELS,
    DELIVERY_STATUSES,
    PRIORITIES,
    Announcement,
    AnnouncementRead,
    Notification,
    NotificationDelivery,
    NotificationLastSeen,
    NotificationMute,
    NotificationPreference,
    NotificationType,
    ScheduledNotification,
)
from app.models.users import ROLES, User

__all__ = [
    "DIGEST_KINDS",
    "FREQUENCIES",
    "DigestPreference",
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
    "ATTEMPT_OUTCOMES",
    "SUPPRESSION_REASONS",
    "DeliveryAttempt",
    "EmailSuppression",
    "MessageTemplate",
    "PushSubscription",
    "ROLES",
    "User",
    "CHANNELS",
    "DELIVERY_CHANNELS",
    "DELIVERY_STATUSES",
    "PRIORITIES",
    "Announcement",
    "AnnouncementRead",
    "Notification",
    "NotificationLastSeen",
    "NotificationMute",
    "ScheduledNotification",
    "NotificationDelivery",
    "NotificationEvent",
    "NotificationPreference",
    "NotificationType",
]
