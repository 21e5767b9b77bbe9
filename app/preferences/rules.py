"""The seed's preference rule as SQL fragments, shared by the screen, the API, the ingest and the workers.

Kept apart from queries.py (and free of imports) so the statements of every layer that resolves a
preference can build on it, the delivery engine's included.
"""

from __future__ import annotations

# The seed's per-channel default columns of notification_types; any other channel is on by default when the
# type lists it in default_channels (a channel module adds no column). notification_types.default_on, a
# generated column (migration 0018), is the channels on by default: the seed's columns and default_channels.
SEED_DEFAULT_COLUMNS = {"in_app": "default_in_app", "email": "default_email", "push": "default_push"}

# The type's default for channel c (the seed's CASE over its columns, as one array).
TYPE_DEFAULT_SQL = "c.channel = ANY(t.default_on)"


def type_default_sql(channel: str) -> str:
    """The SQL of a type `t`'s default for one channel named in advance."""
    return f"'{channel}' = ANY(t.default_on)"


def effective_send_sql(default: str = TYPE_DEFAULT_SQL, enabled: str = "p.enabled") -> str:
    """The seed's rule as SQL: the type's row is `t`; default and the stored preference are SQL."""
    # Mandatory types ignore any stored deviation, so even a row written straight into the table cannot
    # turn them off: the rule lives in the SQL, not only in the UI. (The default is written once: the ingest's
    # statement must stay under psycopg's 4 KB parse cache, tests/notify/test_statement_size.py.)
    return f"COALESCE(CASE WHEN NOT t.mandatory THEN {enabled} END, {default})"


EFFECTIVE_SEND_SQL = effective_send_sql()


# A tenant's defaults (issue 32) sit between the type's default and the member's own choice: the member's stored
# row `p` if any, else the notification's tenant's `d`, else the type's; a mandatory type ignores both (the rule
# above). The join needs the type `t` and the channel cell `c`; {tenant} is the SQL of the tenant's id (NULL: no
# tenant, nothing joins). Written tight: the ingest statement is at psycopg's 4 KB parse cache.
def tenant_prefs_sql(tenant: str, alias: str = "d") -> str:
    """The LEFT JOIN of the tenant's default (as `alias`) for the type `t` and the channel cell `c`."""
    return (f"LEFT JOIN tenant_preferences {alias} ON {alias}.tenant_id={tenant} AND {alias}.type=t.type "
            f"AND {alias}.channel=c.channel")  # fmt: skip


def member_then_tenant_sql(alias: str = "d") -> str:
    """The stored preference `p`, else the tenant's default `alias` (NULL: the type's default decides)."""
    return f"coalesce(p.enabled,{alias}.enabled)"


SOURCE_SQL = """CASE WHEN t.mandatory THEN 'mandatory'
            WHEN p.enabled IS NULL THEN 'default'
            ELSE 'user' END"""
