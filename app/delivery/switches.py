"""Kill switches (seed 004): an operator pauses a channel, or one provider of a channel, with a reason.

While a channel is paused its rows wait: the engine claims them and holds them "until resumed"
(policy.UNTIL_RESUMED) without a try, so they are neither skipped, failed nor retried. A paused provider
drops out of its channel's failover order; when every provider of a channel is paused the channel's
rows wait the same way. DELIVERY_MAX_AGE still expires rows that wait too long (the sweeper's expiry
counts from held_since). Resuming makes the waiting rows due again at the sweeper's next pass
(release_resumed). Every pause and resume is an audit row.

The switches live in PostgreSQL (they must hold whatever Redis forgets); each process reads them at most
once per CACHE_SECONDS, so a pause reaches every worker within about a second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from flask_babel import gettext

from app.audit import service as audit
from app.delivery.channels import all_channels, channel_names
from app.delivery.policy import UNTIL_PART_RESUMED, UNTIL_RESUMED
from app.extensions import db
from app.providers import provider_names
from app.refusal import Refused
from app.unitofwork import commit
from app.webhooks.events import CHANNEL as WEBHOOK

CACHE_SECONDS = 1.0
REASON_MAX_CHARS = 500

SWITCHES_SQL = sa.text(
    """
SELECT s.channel, s.provider, s.reason, s.paused_at, u.email AS paused_by
FROM channel_switches s LEFT JOIN users u ON u.id = s.paused_by
ORDER BY s.channel, s.provider
"""
)

PAUSE_SQL = sa.text(
    """
INSERT INTO channel_switches (channel, provider, reason, paused_by)
VALUES (:channel, :provider, :reason, :actor)
ON CONFLICT (channel, provider) DO UPDATE SET reason = EXCLUDED.reason, paused_by = EXCLUDED.paused_by
RETURNING (xmax = 0) AS new
"""
)

# What waits on each channel's switch: rows held "until resumed" (the ledger by channel; digests are e-mail,
# the outbox is the webhook channel). The partial indexes on pending rows' next_attempt_at serve each count.
WAITING_SQL = sa.text(
    """
SELECT channel, count(*) AS n FROM notification_deliveries
WHERE status = 'pending' AND next_attempt_at >= :until GROUP BY channel
UNION ALL
SELECT 'email', count(*) FROM digest_runs WHERE status = 'pending' AND next_attempt_at >= :until
UNION ALL
SELECT :webhook, count(*) FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at >= :until
"""
)

RESUME_SQL = sa.text("DELETE FROM channel_switches WHERE channel = :channel AND provider = :provider RETURNING reason")


@dataclass(frozen=True)
class Switch:
    """One pause: of a whole channel (provider '') or of one of its providers."""

    channel: str
    provider: str
    reason: str
    paused_at: datetime
    paused_by: str | None


@dataclass(frozen=True)
class Paused:
    """The switches thrown at one moment."""

    switches: tuple[Switch, ...] = ()

    def holds(self, channel: str, provider: str | None = None) -> bool:
        """Whether channel is paused (with provider: or that provider of it)."""
        return any(s.channel == channel and (not s.provider or s.provider == provider) for s in self.switches)

    def of(self, channel: str) -> list[Switch]:
        """The switches of one channel."""
        return [s for s in self.switches if s.channel == channel]


_cache: tuple[float, Paused] = (float("-inf"), Paused())
_cache_lock = threading.Lock()


def paused() -> Paused:
    """The switches now, read at most once per CACHE_SECONDS per process (in the session's transaction)."""
    global _cache
    at, value = _cache
    if time.monotonic() - at < CACHE_SECONDS:
        return value
    value = read()
    with _cache_lock:
        _cache = (time.monotonic(), value)
    return value


def read() -> Paused:
    """The switches as the database has them."""
    return Paused(tuple(Switch(**row._mapping) for row in db.session.execute(SWITCHES_SQL)))


def forget() -> None:
    """Drop the cache: this process sees its own pause or resume at once."""
    global _cache
    with _cache_lock:
        _cache = (float("-inf"), Paused())


def waiting() -> dict[str, int]:
    """How many rows wait on each channel until it (or a provider of it) is resumed."""
    counts: dict[str, int] = {}
    for channel, n in db.session.execute(WAITING_SQL, {"until": UNTIL_PART_RESUMED, "webhook": WEBHOOK}):
        counts[channel] = counts.get(channel, 0) + n
    return counts


def _checked(channel: str, provider: str, config: Mapping) -> tuple[str, str]:
    channel, provider = (channel or "").strip(), (provider or "").strip()
    if channel not in channel_names():
        raise Refused(gettext("There is no channel called %(name)s.", name=channel))
    if provider and provider not in provider_names(channel, config):
        choices = ", ".join(provider_names(channel, config)) or "—"
        raise Refused(gettext("The %(channel)s channel has no provider called %(name)s (it has: %(choices)s).",
                              channel=channel, name=provider, choices=choices))  # fmt: skip
    return channel, provider


def pause(actor, channel: str, provider: str, reason: str, config: Mapping) -> bool:
    """Pause channel (provider '') or one provider of it, saying why; False when it was paused already."""
    channel, provider = _checked(channel, provider, config)
    reason = " ".join((reason or "").split())
    if not reason:
        raise Refused(gettext("Say why you pause it: the other operators will see the reason."))
    if len(reason) > REASON_MAX_CHARS:
        raise Refused(gettext("Keep the reason under %(num)d characters.", num=REASON_MAX_CHARS))
    actor_id = getattr(actor, "id", None)
    new = db.session.execute(PAUSE_SQL, {"channel": channel, "provider": provider, "reason": reason,
                                         "actor": actor_id}).scalar_one()  # fmt: skip
    audit.record(actor, "channel.pause", "channel", _target(channel, provider), after={"reason": reason})
    forget()
    return bool(new)


def resume(actor, channel: str, provider: str, config: Mapping, reason: str = "") -> bool:
    """Resume channel (provider '') or one provider of it; False when it was not paused."""
    channel, provider = _checked(channel, provider, config)
    was = db.session.execute(RESUME_SQL, {"channel": channel, "provider": provider}).scalar()
    if was is None:
        return False
    after = {"reason": " ".join(reason.split())[:REASON_MAX_CHARS]} if reason and reason.strip() else None
    audit.record(actor, "channel.resume", "channel", _target(channel, provider), before={"reason": was}, after=after)
    forget()
    return True


def _target(channel: str, provider: str) -> str:
    return f"{channel}/{provider}" if provider else channel


def open_channels(config: Mapping) -> list[str]:
    """Channels whose rows may go now: not paused, and not every configured provider of them paused."""
    state = read()
    result = []
    for name in (c.name for c in all_channels() if c.delivers):
        names = provider_names(name, config)
        if not state.holds(name) and (not names or any(not state.holds(name, p) for p in names)):
            result.append(name)
    return result


def _release_sql(table: str, which: str = "true") -> sa.TextClause:
    # Rows a switch held "until resumed" made due now; updated_at stays as the hold left it, so the sweeper's
    # due-row steps (which take a row untouched since it fell due) enqueue them in the same pass.
    return sa.text(
        f"""
UPDATE {table} SET next_attempt_at = now()
WHERE id IN (SELECT id FROM {table} WHERE status = 'pending' AND next_attempt_at >= :until AND {which}
             LIMIT :limit FOR UPDATE SKIP LOCKED)
"""
    )


# Each source's table and which of its rows belong to a channel (the outbox is the webhook channel's, digest
# runs are e-mails).
RELEASE_SQL = {
    "ledger": _release_sql("notification_deliveries", "channel = ANY(CAST(:channels AS text[]))"),
    WEBHOOK: _release_sql("webhook_deliveries", f"'{WEBHOOK}' = ANY(CAST(:channels AS text[]))"),
    "digests": _release_sql("digest_runs", "'email' = ANY(CAST(:channels AS text[]))"),
}


def release_resumed(config: Mapping) -> int:
    """The sweeper's step: make every row held until resumed on an open channel due now; return how many.

    In committed batches of SWEEP_LIMIT, all of them in this pass (the sweeper's next step enqueues them).
    """
    channels, limit = open_channels(config), int(config["SWEEP_LIMIT"])
    state = read()
    # Rows held for a paused part (APNs within push) go once no provider of their channel is paused.
    whole = [c for c in channels if not any(s.provider for s in state.of(c))]
    total = 0
    for until, names in ((UNTIL_RESUMED, channels), (UNTIL_PART_RESUMED, whole)):
        params = {"channels": names, "until": until, "limit": limit}
        for statement in RELEASE_SQL.values():
            while True:
                done = db.session.execute(statement, params).rowcount
                commit()
                total += done
                if done < limit:
                    break
    return total


__all__ = ["UNTIL_RESUMED", "Paused", "Switch", "forget", "open_channels", "pause", "paused", "read", "resume"]
