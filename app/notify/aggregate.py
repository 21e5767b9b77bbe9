"""Aggregation writes: an event of a type with an aggregation window joins its recipient's open row.

Exactly once under concurrency, by the database alone: a transaction-scoped advisory lock per
(user, type, group_key), taken by the ingest's own first statement (app/notify/service.py, which
finds the type aggregating and writes nothing), makes concurrent events of one
thread queue up; the upsert (one statement, taking its snapshot after the lock) then sees every
committed event, so it either joins the open row (count + 1, unread again, back on top) or opens a
new window (a new row whose e-mail/push wait until window_ends_at, when the sweeper's due pass
enqueues them: one e-mail per window, rendered from the row's final title). Each accepted event is
kept in notification_events with its own dedupe key; a repeated key changes nothing. The row's
title/body are then re-rendered from the type's in-app template (sandboxed) with count and actors;
without one, the plain wording ("Alice and 3 others: …") is written in the recipient's language.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from flask import current_app
from flask_babel import force_locale, gettext, ngettext

from app.delivery.rendering import RenderError, render_string
from app.extensions import db
from app.i18n import language_or_default
from app.locales import locale_chain, pick_for_chain
from app.notify.delivery_sql import (
    CHAIN_RANK_SQL,
    CHAIN_REASON_SQL,
    CHAIN_SQL,
    CHAIN_STATUS_SQL,
    in_app_send_sql,
    muted_sql,
    route_sql,
    skip_reason_lateral,
    step_due_sql,
    step_join_sql,
)
from app.preferences.rules import effective_send_sql, member_then_tenant_sql, tenant_prefs_sql

ACTOR_NAMES_SHOWN = 3  # the first few distinct actors kept on the row (with the total)

# One transaction-scoped lock per recipient's thread (user, type, group_key); app/notify/service.py
# takes them in its first statement, in user-id order, when it finds the type aggregating.
THREAD_LOCK_SQL = "pg_advisory_xact_lock(hashtextextended(:type || chr(31) || :group_key, l.user_id))"


def upsert_statement(wanted_sql: str) -> sa.TextClause:
    """The aggregate ingest for recipients named as wanted_sql names them (external ids or user ids)."""
    return sa.text(
        f"""
WITH wanted AS (
  {wanted_sql}
),
recipients AS (
  SELECT user_id, email FROM wanted
  WHERE user_id IS NOT NULL AND NOT (:strict AND EXISTS (SELECT 1 FROM wanted WHERE user_id IS NULL))
),
prefs AS (
  SELECT p.user_id, p.channel, p.enabled FROM notification_preferences p
  WHERE p.type = :type AND p.user_id IN (SELECT user_id FROM recipients)
),
cells AS (
  SELECT r.user_id, r.email, c.channel, c.ord - 2 AS rank, {CHAIN_SQL.format(mode="CAST(:mode AS text)")} AS chain,
         {in_app_send_sql(effective_send_sql(enabled=member_then_tenant_sql()))} AS send,
         {muted_sql("CAST(:group_key AS text)")} AS muted
  FROM recipients r
  JOIN notification_types t ON t.type = :type
  CROSS JOIN unnest({route_sql("CAST(:route AS text[])")}) WITH ORDINALITY AS c(channel, ord)
  LEFT JOIN prefs p ON p.user_id = r.user_id AND p.channel = c.channel
  {tenant_prefs_sql("CAST(:tenant AS bigint)")}
),
fresh AS (
  -- the event is new for this recipient: its dedupe key names no event and no row yet
  SELECT c.user_id, c.send AND NOT c.muted AS visible
  FROM cells c
  WHERE c.channel = 'in_app'
    AND NOT EXISTS (SELECT 1 FROM notification_events e WHERE e.user_id = c.user_id AND e.dedupe_key = :dedupe_key)
    AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.user_id = c.user_id AND n.dedupe_key = :dedupe_key)
),
open AS (
  SELECT DISTINCT ON (n.user_id) n.id, n.user_id, f.visible,
         (CAST(:actor_id AS text) IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM notification_events e WHERE e.notification_id = n.id AND e.actor_id = :actor_id
         )) AS new_actor
  FROM fresh f
  JOIN notifications n ON n.user_id = f.user_id AND n.type = :type AND n.group_key = :group_key
  WHERE n.window_ends_at > now() AND n.tenant_id IS NOT DISTINCT FROM CAST(:tenant AS bigint)
  ORDER BY n.user_id, n.window_ends_at DESC
),
joined AS (
  -- one more event (and actor); unread again and back on top (created_at is the list's order),
  -- unless this event is hidden (muted thread, in-app off)
  UPDATE notifications n
  SET event_count = n.event_count + 1,
      actor_count = n.actor_count + o.new_actor::int,
      actor_names = CASE WHEN o.new_actor AND jsonb_array_length(n.actor_names) < :shown
                         THEN n.actor_names || to_jsonb(CAST(:actor_name AS text)) ELSE n.actor_names END,
      read_at = CASE WHEN o.visible AND n.in_app THEN NULL ELSE n.read_at END,
      snoozed_until = CASE WHEN o.visible AND n.in_app THEN NULL ELSE n.snoozed_until END,
      created_at = CASE WHEN o.visible AND n.in_app THEN now() ELSE n.created_at END,
      link_path = coalesce(:link_path, n.link_path)
  FROM open o
  WHERE n.id = o.id
  RETURNING n.id, n.user_id, n.in_app, o.visible, n.event_count, n.actor_count, n.actor_names, n.title, n.body
),
inserted AS (
  INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, data, api_key_id, in_app, read_at,
                             group_key, cancellation_key, window_ends_at, actor_count, actor_names,
                             workflow_version_id, tenant_id)
  SELECT f.user_id, :type, :title, :body, :link_path, :dedupe_key, CAST(:data AS jsonb), :api_key_id, f.visible,
         CASE WHEN f.visible THEN NULL ELSE now() END, :group_key, CAST(:cancellation_key AS text),
         now() + make_interval(secs => :window),
         CASE WHEN CAST(:actor_id AS text) IS NULL THEN 0 ELSE 1 END,
         CASE WHEN CAST(:actor_id AS text) IS NULL THEN '[]'::jsonb
              ELSE jsonb_build_array(CAST(:actor_name AS text)) END,
         (SELECT workflow_version_id FROM notification_types WHERE type = :type), CAST(:tenant AS bigint)
  FROM fresh f
  WHERE NOT EXISTS (SELECT 1 FROM open o WHERE o.user_id = f.user_id)
  ON CONFLICT (user_id, dedupe_key) DO NOTHING
  RETURNING id, user_id, in_app, window_ends_at, event_count, actor_count, actor_names, title, body
),
deliveries AS (
  -- deliveries wait for the window's end (then their workflow step's delays, if any); the sweeper enqueues them
  INSERT INTO notification_deliveries (notification_id, user_id, channel, status, skip_reason, next_attempt_at,
                                       escalation, route_rank, workflow_step_id)
  SELECT i.id, i.user_id, c.channel, {CHAIN_STATUS_SQL}, {CHAIN_REASON_SQL},
         {step_due_sql("i.window_ends_at", "CAST(:data AS jsonb)", "i.user_id")}, ws.unless, {CHAIN_RANK_SQL}, ws.id
  FROM inserted i
  JOIN cells c ON c.user_id = i.user_id AND c.channel <> 'in_app' AND (c.send OR c.chain)
  JOIN notification_types t ON t.type = :type
  {step_join_sql("t.workflow_version_id", "c.channel")}
{skip_reason_lateral()}  RETURNING id
),
events AS (
  INSERT INTO notification_events (notification_id, user_id, dedupe_key, actor_id, actor_name, data)
  SELECT x.id, x.user_id, :dedupe_key, CAST(:actor_id AS text), CAST(:actor_name AS text), CAST(:data AS jsonb)
  FROM (SELECT id, user_id FROM joined UNION ALL SELECT id, user_id FROM inserted) x
  RETURNING notification_id
),
touched AS (
  SELECT id, user_id, in_app, visible, event_count, actor_count, actor_names, title, body FROM joined
  UNION ALL
  SELECT id, user_id, in_app, in_app, event_count, actor_count, actor_names, title, body FROM inserted
)
SELECT w.ord, w.ref, w.user_id, x.id, x.in_app, coalesce(x.visible, false) AS visible, x.event_count,
       x.actor_count, x.actor_names, x.title, x.body, u.locale,
       (SELECT count(*) FROM deliveries) + (SELECT count(*) FROM events) AS written,
       (SELECT priority FROM notification_types WHERE type = :type) AS priority,
       (SELECT jsonb_object_agg(lower(m.locale), jsonb_build_array(m.subject, m.body_text))
        FROM message_templates m WHERE m.type = :type AND m.channel = 'in_app') AS templates
FROM wanted w
LEFT JOIN touched x ON x.user_id = w.user_id
LEFT JOIN users u ON u.id = x.user_id
ORDER BY w.ord
"""
    )


RETITLE_SQL = sa.text(
    """
UPDATE notifications n SET title = v.title, body = v.body
FROM unnest(CAST(:ids AS bigint[]), CAST(:titles AS text[]), CAST(:bodies AS text[])) AS v(id, title, body)
WHERE n.id = v.id
"""
)


def actors_phrase(names: list[str], actor_count: int, count: int) -> str:
    """The plain wording in the current language: "Alice", "Alice and Bob", "Alice and 3 others", "5 notifications"."""
    if not names:
        return ngettext("%(num)d notification", "%(num)d notifications", count)
    if actor_count == 1:
        return names[0]
    if actor_count == 2 and len(names) >= 2:
        return gettext("%(first)s and %(second)s", first=names[0], second=names[1])
    others = actor_count - 1
    return ngettext("%(first)s and %(num)d other", "%(first)s and %(num)d others", others, first=names[0])


def render_aggregate(template, context: dict, title: str, body: str) -> tuple[str, str]:
    """Title and body from the in-app template (subject, text body) in the sandbox; the plain fallback otherwise."""
    count = context["count"]
    phrase = actors_phrase(context["actors"], context["actor_count"], count)
    fallback_title = title if count == 1 else gettext("%(actors)s: %(title)s", actors=phrase, title=title)
    if template is None:
        return fallback_title, body
    subject, text = template
    try:
        new_title = render_string(subject, context).strip() if subject.strip() else fallback_title
        new_body = render_string(text, context).strip() if text.strip() else body
    except RenderError:
        current_app.logger.warning("in-app template of %s failed; plain wording used", context["type"])
        return fallback_title, body
    return new_title[:500] or fallback_title, new_body


def join_windows(statement: sa.TextClause, params: dict, *, window: int, actor: dict | None) -> list:
    """Join each recipient's open window of (type, group_key), or open one; return one row per recipient.

    The caller holds the recipients' thread locks (THREAD_LOCK_SQL). Each row: ord, ref, user_id
    (None: unknown), id (None: the event is a repeat), in_app, visible (a badge event is due),
    priority. The touched rows' titles are re-rendered before this returns.
    """
    actor = actor or {}
    values = params | {
        "window": window,
        "actor_id": actor.get("id"),
        "actor_name": actor.get("name"),
        "shown": ACTOR_NAMES_SHOWN,
    }
    rows = db.session.execute(statement, values).all()
    _retitle([row for row in rows if row.id is not None], params, rows[0].templates or {} if rows else {})
    return rows


# Where a repeated event (its dedupe key already accepted) went: the row holding it.
EXISTING_SQL = sa.text(
    """
SELECT e.user_id, e.notification_id AS id, n.in_app FROM notification_events e
JOIN notifications n ON n.id = e.notification_id
WHERE e.user_id = ANY(CAST(:user_ids AS bigint[])) AND e.dedupe_key = :dedupe_key
UNION ALL
SELECT n.user_id, n.id, n.in_app FROM notifications n
WHERE n.user_id = ANY(CAST(:user_ids AS bigint[])) AND n.dedupe_key = :dedupe_key
"""
)


def existing_events(user_ids: list[int], dedupe_key: str) -> dict[int, tuple[int, bool]]:
    """Return {user_id: (notification id, in_app)} for the rows already holding this event's dedupe key."""
    if not user_ids:
        return {}
    found = db.session.execute(EXISTING_SQL, {"user_ids": user_ids, "dedupe_key": dedupe_key})
    return {row.user_id: (row.id, row.in_app) for row in found}


def _retitle(rows: list, params: dict, templates: dict) -> None:
    default = current_app.config["DEFAULT_LOCALE"]
    data = json.loads(params["data"] or "{}")
    ids, titles, bodies = [], [], []
    for row in rows:
        template = pick_for_chain(templates, locale_chain(row.locale, default))
        names = list(row.actor_names or [])
        context = {
            "count": row.event_count,
            "actors": names,
            "actor_count": row.actor_count,
            "first_actor": names[0] if names else None,
            "title": params["title"],
            "body": params["body"],
            "data": data,
            "type": params["type"],
        }
        # The request is the product service's: the plain wording speaks the recipient's language.
        with force_locale(language_or_default(row.locale, default)):
            title, body = render_aggregate(template, context, params["title"], params["body"])
        if (title, body) != (row.title, row.body):  # a first event without a template keeps its words
            ids.append(row.id)
            titles.append(title)
            bodies.append(body)
    if ids:
        db.session.execute(RETITLE_SQL, {"ids": ids, "titles": titles, "bodies": bodies})
