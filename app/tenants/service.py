"""Tenant writes: create or update (name, branding), quotas, delete, a member's tenants, a tenant's default preferences.

Each checks everything before its first write (a refusal names every field or key at fault and changes
nothing) and is audited with its actor (an operator, or an API key by its name).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from flask_babel import gettext

from app.audit import service as audit
from app.delivery.channels import member_channels
from app.extensions import db
from app.models import Tenant
from app.notification_types import queries as types
from app.quotas import settings as quota_settings
from app.refusal import Refused
from app.tenants import branding, queries
from app.tenants.queries import TENANT_FIELDS

SETTINGS = TENANT_FIELDS[1:]  # what PUT and the console's editor set (the key is the tenant's name in URLs)


class TenantInvalid(Refused):
    """Some fields break their rule: problems lists (field, message); nothing was changed."""

    def __init__(self, problems: list[tuple[str, object]]) -> None:
        self.problems = problems
        super().__init__(gettext("These tenant settings cannot be saved: %(fields)s.",
                                 fields=", ".join(field for field, _ in problems)))  # fmt: skip


class UnknownTenants(Refused):
    """Keys that name no tenant; nothing was changed."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        super().__init__(gettext("There is no tenant called %(keys)s.", keys=", ".join(repr(k) for k in keys)))


class InvalidPreferences(Refused):
    """A default names an unknown type or channel: problems lists (field, message); nothing was changed."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(message for _, message in problems))


def _normal(fields: dict) -> dict:
    """Empty optional texts as None, the colour lower-case, texts stripped."""
    out = {}
    for name, value in fields.items():
        if isinstance(value, str):
            value = value.strip()
            if name != "name" and value == "":
                value = None
        if name == "primary_color" and value is not None:
            value = value.lower()
        out[name] = value
    return out


def put_tenant(actor, key: str, fields: dict) -> tuple[Tenant, bool]:
    """Create the tenant with this key (a name is then required) or update the fields given; return (it, created)."""
    fields = _normal({name: value for name, value in fields.items() if name in SETTINGS})
    found = [] if branding.key_ok(key) else [("key", branding.KEY_MESSAGE)]
    item = queries.tenant(key) if not found else None
    if item is None and "name" not in fields:
        found.append(("name", branding.NAME_MESSAGE))
    found += branding.problems(fields)
    if found:
        raise TenantInvalid(found)
    before = audit.snapshot(item, TENANT_FIELDS) if item is not None else None
    created = item is None
    if created:
        item = Tenant(key=key, name=fields["name"])
        db.session.add(item)
    for name, value in fields.items():
        setattr(item, name, value)
    item.updated_at = sa.func.now()
    db.session.flush()
    db.session.refresh(item)
    audit.record(actor, "tenant.create" if created else "tenant.update", "tenant", key,
                 before=before, after=audit.snapshot(item, TENANT_FIELDS))  # fmt: skip
    return item, created


def set_quota(actor, key: str, rate: float | None, burst: int | None, daily: int | None) -> bool:
    """Set the tenant's rate (requests/s, burst) and daily quota of notifications (None: no limit); audited.

    Return whether anything changed; the next request for the tenant counts against the new limits.
    """
    after = dict(zip(queries.QUOTA_FIELDS, quota_settings.checked(rate, burst, daily), strict=True))
    item = db.session.scalars(sa.select(Tenant).where(Tenant.key == key).with_for_update()).first()
    if item is None:
        raise Refused(gettext("There is no tenant called %(key)s.", key=key))
    before = audit.snapshot(item, queries.QUOTA_FIELDS)
    if before == after:
        return False
    for name, value in after.items():
        setattr(item, name, value)
    item.updated_at = sa.func.now()
    db.session.flush()
    audit.record(actor, "tenant.quota", "tenant", key, before=before, after=after)
    return True


def delete_tenant(actor, key: str) -> bool:
    """Delete the tenant, its memberships and defaults; its notifications keep their tenant id. False: no such."""
    item = queries.tenant(key)
    if item is None:
        return False
    before = audit.snapshot(item, TENANT_FIELDS)
    db.session.delete(item)
    db.session.flush()
    audit.record(actor, "tenant.delete", "tenant", key, before=before)
    return True


SET_MEMBERS_SQL = sa.text(
    """
WITH gone AS (
  DELETE FROM tenant_members WHERE user_id = :user_id AND tenant_id <> ALL(CAST(:ids AS bigint[]))
)
INSERT INTO tenant_members (user_id, tenant_id)
SELECT :user_id, unnest(CAST(:ids AS bigint[]))
ON CONFLICT DO NOTHING
"""
)


def check_keys(keys: Sequence[str]) -> dict[str, int]:
    """key → id of every key; UnknownTenants naming the keys that name no tenant."""
    wanted = list(dict.fromkeys(keys))
    ids = queries.ids_of(wanted)
    unknown = [key for key in wanted if key not in ids]
    if unknown:
        raise UnknownTenants(unknown)
    return ids


def set_member_tenants(actor, user_id: int, keys: Sequence[str]) -> list[str]:
    """Replace the member's tenants by the ones keys name; UnknownTenants (nothing changed) for any unknown key."""
    wanted = list(dict.fromkeys(keys))
    ids = check_keys(wanted)
    before = queries.member_tenant_keys(user_id)
    db.session.execute(SET_MEMBERS_SQL, {"user_id": user_id, "ids": list(ids.values())})
    after = sorted(wanted)
    if before != after:
        audit.record(actor, "tenant.members", "user", user_id, before={"tenants": before}, after={"tenants": after})
    return after


def preference_problems(defaults: Iterable[tuple[str, str, bool]]) -> list[tuple[str, str]]:
    """(field, message) for each default naming an unknown type or a channel members cannot choose."""
    channels = {c.name for c in member_channels()}
    known_types = {row["type"] for row in types.notification_types()}
    problems = []
    for type_, channel, _ in defaults:
        if type_ not in known_types:
            problems.append((f"preferences.{type_}",
                             gettext("there is no notification type %(type)s", type=repr(type_))))  # fmt: skip
        elif channel not in channels:
            problems.append((f"preferences.{type_}.{channel}",
                             gettext("there is no channel %(channel)s", channel=repr(channel))))  # fmt: skip
    return problems


def set_preferences(actor, tenant: Tenant, defaults: Iterable[tuple[str, str, bool]]) -> dict:
    """Replace the tenant's defaults by (type, channel, enabled) triples; InvalidPreferences names any unknown one.

    A default equal to the type's own is still stored: it keeps its meaning if the type's default changes later.
    """
    wanted = {(type_, channel): bool(enabled) for type_, channel, enabled in defaults}
    problems = preference_problems((t, c, e) for (t, c), e in wanted.items())
    if problems:
        raise InvalidPreferences(problems)
    before = queries.preferences(tenant.id)
    # Two statements: in one (a DELETE in a CTE), the INSERT's unique check would still meet the rows deleted.
    db.session.execute(sa.text("DELETE FROM tenant_preferences WHERE tenant_id = :t"), {"t": tenant.id})
    db.session.execute(
        sa.text(
            "INSERT INTO tenant_preferences (tenant_id, type, channel, enabled) SELECT :t, p.type, p.channel, p.enabled"
            " FROM unnest(CAST(:types AS text[]), CAST(:channels AS text[]), CAST(:enabled AS boolean[]))"
            " AS p(type, channel, enabled)"
        ),
        {"t": tenant.id, "types": [t for t, _ in wanted], "channels": [c for _, c in wanted],
         "enabled": list(wanted.values())},
    )  # fmt: skip
    if before != wanted:
        audit.record(actor, "tenant.preferences", "tenant", tenant.key,
                     before=_listed(before), after=_listed(wanted))  # fmt: skip
    return wanted


def _listed(defaults: dict) -> dict:
    """Defaults as JSON for the audit log: {type: {channel: enabled}}."""
    out: dict = {}
    for (type_, channel), enabled in sorted(defaults.items()):
        out.setdefault(type_, {})[channel] = enabled
    return out
