"""What a phone push carries, provider-neutral: the device it goes to and the alert it shows.

The push channel builds one MobilePush per message (the alert in each language its devices speak, the
badge, the link); the APNs and FCM providers (app/providers/apns.py, fcm.py) turn it into their own
payloads, one request per DeviceTarget. Tokens are secrets of the member's phone: they are never
logged whole (token_hint).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

PLATFORMS = ("ios", "android")


@dataclass(frozen=True)
class DeviceTarget:
    """One registered phone: its platform's token and the language it shows alerts in."""

    device_id: int
    platform: str  # ios (APNs) | android (FCM)
    token: str
    app_id: str | None = None  # the iOS bundle id (apns-topic) or the Android package name
    locale: str = ""


@dataclass(frozen=True)
class MobileAlert:
    """What the phone shows for one notification in one language."""

    title: str
    body: str
    subtitle: str = ""  # iOS only


@dataclass(frozen=True)
class MobilePush:
    """The phone part of a push message.

    alerts holds one alert per locale the message's devices speak, "" being the fallback every device
    without its own gets. background: a badge-only update (no alert; APNs push type background).
    """

    alerts: Mapping[str, MobileAlert] = field(default_factory=dict)
    notification_id: int | None = None
    link: str = ""
    group_key: str | None = None  # apns-collapse-id / android.collapse_key
    thread_id: str = ""  # aps.thread-id: the phone groups alerts of one thread
    priority: str = "high"  # high | normal
    ttl: int = 86_400  # seconds the push service keeps it for an offline device
    badge: int | None = None  # the member's unread count at send time (iOS)
    background: bool = False
    # The notification's buttons (issue 33): {action, title, url[, post]} each (app/actions/outbound.py); APNs
    # names their category (aps.category HATO_ACTIONS_<n>), FCM the activity that shows them (click_action).
    actions: tuple = ()

    def alert_for(self, locale: str) -> MobileAlert | None:
        """The alert in locale, else its language without region, else the fallback."""
        for key in (locale, locale.split("-")[0].split("_")[0], ""):
            if key in self.alerts:
                return self.alerts[key]
        return None


def token_hint(token: str) -> str:
    """The last 8 characters of a token: enough to tell devices apart in a log, not to send to one."""
    return f"…{token[-8:]}"
