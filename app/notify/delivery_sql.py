"""SQL shared by the statements that write ledger rows: the ingest (app/notify/service.py), the aggregation's
(app/notify/aggregate.py) and the campaign fanout's (app/campaigns/fanout.py).

The channels come from the registry (app/delivery/channels), so these fragments are built on first use,
once per process: a channel module that declares `born_skip` adds its branch here by itself.
"""

from __future__ import annotations

from functools import cache

from app.delivery.channels import all_channels, routable_names

# Whether a notification goes in a "first" chain: the request's mode, else its type's.
CHAIN_SQL = "coalesce({mode}, t.channel_mode) = 'first'"


def muted_sql(group_key: str) -> str:
    """Whether recipient r muted the thread group_key (SQL text) names; a mandatory type t is never muted."""
    return f"""(NOT t.mandatory AND {group_key} IS NOT NULL AND EXISTS (
           SELECT 1 FROM notification_mutes m WHERE m.user_id = r.user_id AND m.group_key = {group_key}
         ))"""


def route_sql(route: str) -> str:
    """The channels a notification goes out on, in order: the request's (the SQL route, NULL when it gave none),
    else its type's, else every channel in the registry's order; in-app first (its cell is the notification)."""
    every = "ARRAY[" + ", ".join(f"'{name}'" for name in routable_names()) + "]"
    return f"ARRAY['in_app'] || coalesce({route}, t.channels, {every})"


@cache
def skip_reason_lateral() -> str:
    """Why a new ledger row is born skipped (NULL: it is pending), joined per (inserted row i, channel cell c).

    The thread is muted, or the channel's own born_skip holds (no e-mail address, no push subscription…).
    """
    branches = "\n".join(
        f"  WHEN c.channel = '{channel.name}' AND {channel.born_skip[0]} THEN '{channel.born_skip[1]}'"
        for channel in all_channels()
        if channel.born_skip
    )
    return f"""  CROSS JOIN LATERAL (
    SELECT CASE
  WHEN c.muted THEN 'muted'
{branches}
    END AS reason
  ) s
"""


# A delivery row's status, skip reason and place in a chain, from its cell `c` (c.chain: in a "first" chain;
# c.rank: the channel's place in the order, from 0) and its born-skip reason `s`. In a chain only the first
# channel is pending and the others wait (standby) for the engine to hand over; whether a channel reaches
# the member is its re-check's business then. A muted thread skips every channel either way.
CHAIN_STATUS_SQL = """CASE WHEN s.reason IS NOT NULL AND (NOT c.chain OR c.muted) THEN 'skipped'
WHEN c.chain AND c.rank > 0 THEN 'standby' ELSE 'pending' END"""
CHAIN_REASON_SQL = "CASE WHEN NOT c.chain OR c.muted THEN s.reason END"
CHAIN_RANK_SQL = "CASE WHEN c.chain THEN c.rank END"


def routable() -> list[str]:
    """The :routable parameter: every channel a notification may go out on, in order."""
    return list(routable_names())


# The ledger row's workflow step (migration 0032): the plan row of the type's published version for the row's
# channel. A channel the version has no step for (a request's own `channels`) goes at once, with no rule.
def step_join_sql(version: str, channel: str) -> str:
    """Join `ws`, the step of workflow version `version` for channel `channel` (SQL; NULL when there is none)."""
    return f"LEFT JOIN workflow_steps ws ON ws.version_id = {version} AND ws.channel = {channel}"


def step_due_sql(start: str, data: str, user_id: str) -> str:
    """When the step `ws` is due: its delays one after another from `start` (SQL), at once without any (migration
    0032's workflow_due, which the planner inlines)."""
    return f"workflow_due({start}, ws.waits, {data}, {user_id})"


# A cell is in-app when the type's workflow has an in-app step and the member has in-app on; the row is written
# either way (it anchors the deliveries), born read and hidden when not.
def in_app_send_sql(send: str, types: str = "t") -> str:
    """send (SQL) for every channel, and for in-app only where the workflow shows it in the inbox."""
    return f"({send} AND ({types}.in_app_step OR c.ord > 1))"  # in-app is the route's first cell
