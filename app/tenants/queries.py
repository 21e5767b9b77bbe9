"""Tenant reads: one tenant, the list with member counts, keys to ids, a sending tenant's quota, a member's tenants,
a tenant's defaults."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import sqlalchemy as sa

from app.extensions import db
from app.models import Tenant
from app.quotas.counter import Quota
from app.sqltext import like_prefix

TENANT_FIELDS = ("key", "name", "logo_url", "primary_color", "email_sender_name", "reply_to")
QUOTA_FIELDS = ("rate_per_second", "rate_burst", "daily_quota")


class Sending(NamedTuple):
    """The tenant a request sends for: its id, and its quota."""

    id: int
    quota: Quota


LIST_SQL = """
SELECT t.id, t.key, t.name, t.logo_url, t.primary_color, t.email_sender_name, t.reply_to, t.updated_at,
       (SELECT count(*) FROM tenant_members m WHERE m.tenant_id = t.id) AS members
FROM tenants t
{where}
ORDER BY t.key
LIMIT 1000
"""


def choices() -> list:
    """Every tenant's key and name (at most 1,000, by name), for a select."""
    return list(db.session.execute(sa.text("SELECT key, name FROM tenants ORDER BY name, key LIMIT 1000")))


def branding_of(key: str):
    """The branding (key, name, logo_url, primary_color, email_sender_name, reply_to) of the tenant key, or None."""
    return db.session.execute(
        sa.text("SELECT key, name, logo_url, primary_color, email_sender_name, reply_to FROM tenants WHERE key = :k"),
        {"k": key},
    ).first()


def tenant(key: str) -> Tenant | None:
    """The tenant with this key, if any."""
    return db.session.execute(sa.select(Tenant).where(Tenant.key == key)).scalar_one_or_none()


def tenant_by_id(tenant_id: int) -> Tenant | None:
    """The tenant with this id, if any."""
    return db.session.get(Tenant, tenant_id)


def tenants(q: str = "") -> list:
    """Every tenant (at most 1,000, by key) with its member count; q: key or name containing it."""
    where, params = "", {}
    if q.strip():
        where = "WHERE t.key ILIKE :contains ESCAPE '\\' OR t.name ILIKE :contains ESCAPE '\\'"
        params["contains"] = "%" + like_prefix(q.strip())
    return list(db.session.execute(sa.text(LIST_SQL.format(where=where)), params).mappings())


def member_count(tenant_id: int) -> int:
    """How many members the tenant has (its index, tenant_members_tenant_idx)."""
    return db.session.execute(
        sa.text("SELECT count(*) FROM tenant_members WHERE tenant_id = :t"), {"t": tenant_id}
    ).scalar_one()


def ids_of(keys: Sequence[str]) -> dict[str, int]:
    """key → id of the tenants among keys that exist."""
    rows = db.session.execute(
        sa.text("SELECT key, id FROM tenants WHERE key = ANY(CAST(:keys AS text[]))"), {"keys": list(keys)}
    )
    return {row.key: row.id for row in rows}


def sending_tenant(key: str) -> Sending | None:
    """The tenant a request sends for: its id and its quota (app/quotas), or None when there is no such tenant."""
    row = db.session.execute(
        sa.text("SELECT id, rate_per_second, rate_burst, daily_quota FROM tenants WHERE key = :key"), {"key": key}
    ).first()
    if row is None:
        return None
    return Sending(row.id, Quota(f"tenant:{key}", row.rate_per_second, row.rate_burst, row.daily_quota))


BRANDING_SQL = sa.text(
    "SELECT id, key, name, logo_url, primary_color, email_sender_name, reply_to FROM tenants "
    "WHERE id = ANY(CAST(:ids AS bigint[]))"
)


def brandings(tenant_ids: Sequence[int]) -> dict[int, sa.Row]:
    """id → the branding (key, name, logo_url, primary_color, email_sender_name, reply_to) of the tenants of ids."""
    if not tenant_ids:
        return {}
    return {row.id: row for row in db.session.execute(BRANDING_SQL, {"ids": sorted(set(tenant_ids))})}


def member_tenants(user_id: int) -> list:
    """The tenants a member belongs to (id, key, name), by name."""
    return list(
        db.session.execute(
            sa.text(
                "SELECT t.id, t.key, t.name FROM tenant_members m JOIN tenants t ON t.id = m.tenant_id "
                "WHERE m.user_id = :user_id ORDER BY t.name, t.key"
            ),
            {"user_id": user_id},
        )
    )


MEMBER_DEFAULTS_SQL = sa.text(
    """
SELECT tp.type, tp.channel, t.name, tp.enabled
FROM tenant_members m
JOIN tenants t ON t.id = m.tenant_id
JOIN tenant_preferences tp ON tp.tenant_id = m.tenant_id
WHERE m.user_id = :user_id
ORDER BY t.name, t.key
"""
)


def member_defaults(user_id: int) -> dict[tuple[str, str], list[tuple[str, bool]]]:
    """(type, channel) → [(tenant name, on)]: the defaults the member's tenants set, by tenant name."""
    found: dict[tuple[str, str], list[tuple[str, bool]]] = {}
    for row in db.session.execute(MEMBER_DEFAULTS_SQL, {"user_id": user_id}):
        found.setdefault((row.type, row.channel), []).append((row.name, row.enabled))
    return found


def member_tenant_keys(user_id: int) -> list[str]:
    """The keys of a member's tenants, sorted."""
    return sorted(row.key for row in member_tenants(user_id))


def is_member(user_id: int, tenant_id: int) -> bool:
    """Whether the member belongs to the tenant."""
    return db.session.execute(
        sa.text("SELECT EXISTS (SELECT 1 FROM tenant_members WHERE user_id = :u AND tenant_id = :t)"),
        {"u": user_id, "t": tenant_id},
    ).scalar_one()


def preferences(tenant_id: int) -> dict[tuple[str, str], bool]:
    """(type, channel) → enabled: the tenant's defaults (only the ones it set)."""
    rows = db.session.execute(
        sa.text("SELECT type, channel, enabled FROM tenant_preferences WHERE tenant_id = :t"), {"t": tenant_id}
    )
    return {(row.type, row.channel): row.enabled for row in rows}


# The ingest's tenant check (app/notify/service.py), one statement for every recipient: the ones that exist but
# are not members, in the request's order. It locks the members' rows (FOR KEY SHARE), so a removal waits for the
# ingest's commit: the check and the insert that follows see the same members.
OUTSIDERS_SQL = {
    by: sa.text(
        f"""
WITH wanted AS (
  SELECT e.ord, e.ref, u.id AS user_id
  FROM unnest(CAST(:refs AS {array})) WITH ORDINALITY AS e(ref, ord)
  JOIN users u ON u.{column} = e.ref
),
held AS (
  SELECT m.user_id FROM tenant_members m
  WHERE m.tenant_id = :tenant_id AND m.user_id IN (SELECT user_id FROM wanted)
  FOR KEY SHARE
)
SELECT ref FROM wanted WHERE user_id NOT IN (SELECT user_id FROM held) ORDER BY ord
"""
    )
    for by, array, column in (("external_id", "text[]", "external_id"), ("user_id", "bigint[]", "id"))
}


def outsiders(refs: Sequence, tenant_id: int, by: str = "external_id") -> list:
    """The refs of existing users who are not members of the tenant (unknown ones are the ingest's to name)."""
    return list(db.session.execute(OUTSIDERS_SQL[by], {"refs": list(refs), "tenant_id": tenant_id}).scalars())
