"""Notification type writes: create, edit (wording, defaults, timing and routing), rename while unused,
confirm before going mandatory; audited."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import sqlalchemy as sa
from flask_babel import format_number, gettext, lazy_gettext

from app.audit import service as audit
from app.delivery.channels import member_channels, routable_names
from app.extensions import db
from app.limits import DESCRIPTION_MAX, TITLE_MAX
from app.locales import Variants, clean_variants
from app.models import CHANNEL_MODES, PRIORITIES, NotificationType
from app.notification_types import queries
from app.notification_types.builtin import BUILTIN_TYPES
from app.preferences.rules import SEED_DEFAULT_COLUMNS
from app.refusal import Refused
from app.workflows import service as workflows

TYPE_KEY_RE = re.compile(r"^[a-z][a-z0-9_]{1,62}$")
TYPE_FIELDS = (
    "type",
    "label",
    "description",
    "default_in_app",
    "default_email",
    "default_push",
    "mandatory",
    "priority",
    "escalate_after",
    "escalate_unless",
    "skip_when_online",
    "cap_count",
    "cap_window",
    "aggregation_window",
    "email_frequency",
    "channels",
    "channel_mode",
    "default_channels",
    "bypass_quiet_hours",
    "push_when_offline",
    "sms_max_segments",
    "locales",
)
# What an escalation waits for, and how the console says it.
ESCALATE_UNLESS = {"read": "unread", "seen": "unseen"}
ESCALATE_UNLESS_LABELS = {"read": lazy_gettext("unread"), "seen": lazy_gettext("unseen")}
TIMING_MAX_SECONDS = 30 * 86400  # escalation delay and cap window: up to 30 days
CAP_MAX = 10000
# A type's default e-mail frequency (users may choose another), and how the console says it.
EMAIL_FREQUENCIES = {"immediate": "immediately", "hourly": "in the hourly digest", "daily": "in the daily digest"}
EMAIL_FREQUENCY_LABELS = {
    "immediate": lazy_gettext("immediately"),
    "hourly": lazy_gettext("in the hourly digest"),
    "daily": lazy_gettext("in the daily digest"),
}
AGGREGATION_MAX_SECONDS = 86400  # a window longer than a day would hold e-mail back too long
SMS_MAX_SEGMENTS = (1, 10)  # the parts an SMS of the type may take (the table's check constraint)


@dataclass(frozen=True)
class Timing:
    """A type's timing and routing; the defaults keep "send at once on every enabled channel"."""

    escalate_after: int | None = None  # seconds e-mail/push wait; sent only if still unread/unseen
    escalate_unless: str = "read"  # read | seen
    skip_when_online: bool = False  # skip e-mail/push while the user has a live socket
    cap_count: int | None = None  # at most cap_count e-mails (and pushes) per cap_window seconds per user
    cap_window: int | None = None
    aggregation_window: int | None = None  # seconds: events of one group_key collapse into one row
    email_frequency: str = "immediate"  # the default for users: immediate | hourly | daily digest (app/digests)
    channels: tuple[str, ...] | None = None  # the order notifications go out in; None: every channel, registry order
    channel_mode: str = "all"  # all: every listed channel the member has on; first: the first that reaches them
    default_channels: tuple[str, ...] = ()  # on by default, for channels without a seed column (default_email…)
    bypass_quiet_hours: bool = False  # sent during the member's quiet hours on every channel (sign-in codes)
    push_when_offline: bool = False  # push only when no tab of the member acked the frame that showed it


@dataclass(frozen=True)
class Routing:
    """What the type form edits of a type's sending besides its workflow (the steps have their own page)."""

    channel_mode: str = "all"
    default_channels: tuple[str, ...] = ()
    bypass_quiet_hours: bool = False


class NeedsConfirmation(Refused):
    """Turning a type mandatory overrides users' choices: the operator must confirm first."""

    def __init__(self, overrides: int) -> None:
        super().__init__(f"Making this type mandatory overrides the choices of {overrides} user(s).")
        self.overrides = overrides


def _check_type(label: str, priority: str) -> None:
    if not label.strip() or len(label) > TITLE_MAX:
        raise Refused(gettext("The label must have 1 to %(max)s characters.", max=TITLE_MAX))
    if priority not in PRIORITIES:
        raise Refused(gettext("The priority must be one of %(choices)s.", choices=", ".join(PRIORITIES)))


def _check_timing(timing: Timing) -> None:
    if timing.escalate_after is not None and not 1 <= timing.escalate_after <= TIMING_MAX_SECONDS:
        raise Refused(
            gettext("Escalate after must be 1 to %(max)s seconds, or empty.", max=format_number(TIMING_MAX_SECONDS))
        )
    if timing.escalate_unless not in ESCALATE_UNLESS:
        raise Refused(gettext("An escalation waits for the notification to stay unread or unseen."))
    if (timing.cap_count is None) != (timing.cap_window is None):
        raise Refused(gettext("A frequency cap needs both its number and its window, or neither."))
    if timing.cap_count is not None and not 1 <= timing.cap_count <= CAP_MAX:
        raise Refused(gettext("The cap must be 1 to %(max)s messages.", max=format_number(CAP_MAX)))
    if timing.cap_window is not None and not 1 <= timing.cap_window <= TIMING_MAX_SECONDS:
        raise Refused(gettext("The cap window must be 1 to %(max)s seconds.", max=format_number(TIMING_MAX_SECONDS)))
    if timing.aggregation_window is not None and not 1 <= timing.aggregation_window <= AGGREGATION_MAX_SECONDS:
        raise Refused(
            gettext(
                "The aggregation window must be 1 to %(max)s seconds, or empty.",
                max=format_number(AGGREGATION_MAX_SECONDS),
            )
        )
    if timing.email_frequency not in EMAIL_FREQUENCIES:
        raise Refused(gettext("E-mail goes immediately, in the hourly digest or in the daily digest."))
    _check_routing(timing)


def _check_routing(timing: Timing) -> None:
    routable = routable_names()
    if timing.channels is not None:
        unknown = [name for name in timing.channels if name not in routable]
        if unknown or not timing.channels:
            raise Refused(gettext("Choose the channels among %(choices)s.", choices=", ".join(routable)))
        if len(set(timing.channels)) != len(timing.channels):
            raise Refused(gettext("Choose each channel once in the order."))
    if timing.channel_mode not in CHANNEL_MODES:
        raise Refused(gettext("Send on every listed channel, or only on the first that reaches the member."))
    extra = [c.name for c in member_channels() if c.name not in SEED_DEFAULT_COLUMNS]
    if any(name not in extra for name in timing.default_channels):
        raise Refused(gettext("Only %(choices)s take a default here.", choices=", ".join(extra) or "—"))


def _check_key(key: str) -> None:
    if not TYPE_KEY_RE.match(key):
        raise Refused(gettext("The key must be 2–63 characters: a lower-case letter, then letters, digits or _."))
    if key in BUILTIN_TYPES:
        raise Refused(gettext("The key %(key)s is reserved for the messages Hato sends itself.", key=repr(key)))
    if queries.notification_type(key) is not None:
        raise Refused(gettext("A type with the key %(key)s already exists.", key=repr(key)))


def create_type(
    actor,
    *,
    key: str,
    label: str,
    description: str = "",
    default_in_app: bool = True,
    default_email: bool = False,
    default_push: bool = False,
    mandatory: bool = False,
    priority: str = "default",
    timing: Timing = Timing(),
    sms_max_segments: int | None = None,
    locales: Variants | None = None,
) -> NotificationType:
    """Create a notification type (a new key has no preferences, so mandatory needs no confirmation).

    locales holds the label and description per locale ({"ja": {"label": …}}); label and description are the fallback.
    """
    _check_key(key)
    _check_type(label, priority)
    variants = _variants(locales)
    _check_timing(timing)
    _check_sms_segments(sms_max_segments)
    item = NotificationType(type=key, locales=variants)
    _set_fields(item, label, description, default_in_app, default_email, default_push, mandatory, priority)
    _set_timing(item, timing)
    if sms_max_segments is not None:
        item.sms_max_segments = sms_max_segments
    db.session.add(item)
    db.session.flush()
    audit.record(actor, "type.create", "notification_type", key, after=audit.snapshot(item, TYPE_FIELDS))
    workflows.publish_columns(actor, key)  # its first version: what the timing above means
    return item


def _variants(locales: Variants | None) -> dict:
    """The label and description per locale as stored (blanks dropped), or Refused."""
    return clean_variants(
        locales, {"label": (TITLE_MAX, gettext("label")), "description": (DESCRIPTION_MAX, gettext("description"))}
    )


def _check_sms_segments(value: int | None) -> None:
    """None keeps the type's limit; else it is a whole number of parts within SMS_MAX_SEGMENTS."""
    low, high = SMS_MAX_SEGMENTS
    if value is not None and not low <= value <= high:
        raise Refused(gettext("An SMS may take from %(low)s to %(high)s parts.", low=low, high=high))


def _set_fields(item: NotificationType, label: str, description: str, default_in_app: bool, default_email: bool,
                default_push: bool, mandatory: bool, priority: str) -> None:  # fmt: skip
    """Write the editable fields (trimmed) that create and update share."""
    item.label, item.description = label.strip(), description.strip()
    item.default_in_app, item.default_email, item.default_push = default_in_app, default_email, default_push
    item.mandatory, item.priority = mandatory, priority


def _set_timing(item: NotificationType, timing: Timing) -> None:
    for name, value in asdict(timing).items():
        setattr(item, name, list(value) if isinstance(value, tuple) else value)


def _referencing_columns() -> list[tuple[str, str]]:
    """(table, column) pairs whose foreign key points at notification_types, notifications excepted."""
    pairs = []
    for table in db.metadata.sorted_tables:
        for fk in table.foreign_keys:
            if fk.column.table.name == "notification_types" and table.name != "notifications":
                pairs.append((table.name, fk.parent.name))
    return pairs


def _rename_type(old: str, new: str) -> None:
    # The key is the primary key that other rows reference: copy the row, move the references, drop
    # the old row. Callers checked that no notification uses it (those rows are never rewritten).
    columns = ", ".join((*TYPE_FIELDS[1:], "workflow_version_id", "in_app_step"))
    db.session.execute(
        sa.text(
            f"INSERT INTO notification_types (type, {columns}) "
            f"SELECT :new, {columns} FROM notification_types WHERE type = :old"
        ),
        {"new": new, "old": old},
    )
    for table, column in _referencing_columns():
        db.session.execute(
            sa.text(f'UPDATE "{table}" SET "{column}" = :new WHERE "{column}" = :old'), {"new": new, "old": old}
        )
    db.session.execute(sa.text("DELETE FROM notification_types WHERE type = :old"), {"old": old})
    db.session.expire_all()


def update_type(
    actor,
    key: str,
    *,
    new_key: str,
    label: str,
    description: str,
    default_in_app: bool,
    default_email: bool,
    default_push: bool,
    mandatory: bool,
    priority: str,
    confirmed: bool = False,
    timing: Timing | None = None,
    sms_max_segments: int | None = None,
    routing: Routing | None = None,
    locales: Variants | None = None,
) -> str:
    """Edit a type (rename only while unused); raise NeedsConfirmation before overriding users' choices.

    timing=None keeps the type's timing and routing as they are (its workflow, edited on its own page, too),
    sms_max_segments=None its SMS part limit; routing (with timing=None) sets what the type form still edits;
    locales=None its label and description per locale (else they are replaced by these).
    """
    if timing is None and routing is not None:
        _check_routing(Timing(**asdict(routing)))
    item = db.session.get(NotificationType, key, with_for_update=True)
    if item is None:
        raise Refused(gettext("That notification type no longer exists."))
    if key in BUILTIN_TYPES and (
        new_key != key
        or not mandatory
        or any(r is not None and "sms" not in r.default_channels for r in (timing, routing))
    ):
        # Hato writes these rows itself (app/notification_types/builtin.py): a rename, an opt-out or SMS off by
        # default (the re-check would skip its rows as preference_off) would break it.
        raise Refused(gettext("Hato sends this type itself: it keeps its key, stays mandatory and stays on SMS."))
    _check_type(label, priority)
    if timing is not None:
        _check_timing(timing)
    _check_sms_segments(sms_max_segments)
    variants = None if locales is None else _variants(locales)
    if new_key != key:
        _check_key(new_key)
        # The row lock above conflicts with the KEY SHARE lock a new notification's foreign key
        # takes, so no notification can start using the key between this check and the rename.
        if queries.type_in_use(key):
            raise Refused(gettext("Notifications already use this key, so it can no longer be renamed."))
    if mandatory and not item.mandatory and not confirmed:
        overrides = queries.mandatory_overrides(key, default_in_app, default_email, default_push)
        if overrides:
            raise NeedsConfirmation(overrides)
    before = audit.snapshot(item, TYPE_FIELDS)
    _set_fields(item, label, description, default_in_app, default_email, default_push, mandatory, priority)
    if timing is not None:
        _set_timing(item, timing)
    elif routing is not None:
        _set_timing(item, routing)
    if sms_max_segments is not None:
        item.sms_max_segments = sms_max_segments
    if variants is not None:
        item.locales = variants
    db.session.flush()
    if new_key != key:
        _rename_type(key, new_key)
    after = audit.snapshot(db.session.get(NotificationType, new_key), TYPE_FIELDS)
    audit.record(actor, "type.update", "notification_type", new_key, before=before, after=after)
    if timing is not None:  # the older timing fields: published as the workflow's next version if they changed it
        workflows.publish_columns(actor, new_key)
    return new_key
