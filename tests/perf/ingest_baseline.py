"""The ingest's honest ceiling: a bare WSGI app that does one ingest's database and Redis work, and nothing else.

    gunicorn -c python:app.realtime.gunicorn_conf tests.perf.ingest_baseline:app   (bench_ingest starts it)

`POST /` with the same JSON body as `POST /v1/notifications` (one `recipient`) and an Idempotency-Key:

- parses the body with json.loads and fingerprints it with SHA-256 (as the idempotency record needs);
- on its thread's own psycopg connection (one per thread, no pool, no SQLAlchemy), in ONE transaction
  with the server's default durability (synchronous_commit as configured, like the app), runs the
  three statements an ingest of one recipient sends, byte for byte (STATEMENTS below, taken from the
  app's modules): claim the Idempotency-Key, write the notification and its deliveries, store the
  response; then COMMIT;
- after the commit, on the request thread: one MULTI/EXEC pipeline that pushes the pending e-mail
  delivery on the drain list and sets the wake flag (SET NX EX, app/queueing.py coalesce_deliveries);
  when the flag was free, what RQ's enqueue of one drain job sends (SADD the queue, HSET the job's
  status and its fields, RPUSH its id); then one PUBLISH of a badge event on the recipient's channel;
- answers 202 with a small JSON body naming the notification.

It does NOT: authenticate (the API key id is read once at start), check scopes, rate-limit, validate
the body against a schema, negotiate a language, build the app's response model, log, or count metrics;
it never replays (every Idempotency-Key is new in the benchmark). The app also merges the Redis work of
many commits into one round in a background thread; the baseline pays one Redis round trip per request
in the request thread instead (a little more Redis work per request than the app, never less).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from datetime import UTC, datetime

import psycopg
from redis import Redis
from sqlalchemy.dialects.postgresql import psycopg as pg_psycopg

from app.api.idempotency import CLAIM_SQL, COMPLETE_SQL
from app.notify.statement import notify_sql


def _as_psycopg(statement) -> str:
    """The statement's text exactly as SQLAlchemy sends it through psycopg (%(name)s parameters)."""
    return str(statement.compile(dialect=pg_psycopg.dialect()))


# Every statement one ingest of one recipient sends, in order, within BEGIN … COMMIT (captured with
# SQLAlchemy's echo on POST /v1/notifications; the API key lookup is cached per process and the
# webhook outbox writes nothing while no endpoint subscribes, so neither sends a statement here).
# They are compiled from the app's own statement objects, so a change to the app's SQL (a new column,
# a changed ON CONFLICT) changes the baseline with it.
STATEMENTS = {
    # app/api/idempotency.py claim(): advisory lock + INSERT … ON CONFLICT (api_key_id, key) … RETURNING id
    "claim": _as_psycopg(CLAIM_SQL),
    # app/notify/service.py notify(): notify_sql("external_id"), the notification row
    # (ON CONFLICT (user_id, dedupe_key) DO NOTHING RETURNING) and its deliveries, one statement
    "notify": _as_psycopg(notify_sql("external_id")),
    # app/api/idempotency.py store(): the response kept for replays
    "complete": _as_psycopg(COMPLETE_SQL),
}
PATH = "/v1/notifications"  # what the claim records, as the app would
NAMESPACE = "hato-baseline"
QUEUE = f"rq:queue:{NAMESPACE}:default"
DRAIN_LIST, DRAIN_FLAG = f"hato:{NAMESPACE}:drain:default:email", f"hato:{NAMESPACE}:drain-wake:default:email"

_local = threading.local()
_redis = Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
_api_key_id: int | None = None


def _connection() -> psycopg.Connection:
    """This thread's own connection (opened on first use, kept for the process's life)."""
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        url = os.environ["DATABASE_URL"].replace("postgresql+psycopg://", "postgresql://")
        conn = _local.conn = psycopg.connect(url)
    return conn


def _key_id(conn: psycopg.Connection) -> int:
    global _api_key_id
    if _api_key_id is None:
        _api_key_id = conn.execute("SELECT min(id) FROM api_keys WHERE revoked_at IS NULL").fetchone()[0]
        conn.commit()
    return _api_key_id


def _ingest(raw: bytes, idempotency_key: str) -> tuple[int, bytes]:
    payload = json.loads(raw)
    conn = _connection()
    api_key_id = _key_id(conn)
    with conn.transaction():
        claim = {"api_key_id": api_key_id, "key": idempotency_key, "method": "POST", "path": PATH,
                 "request_hash": hashlib.sha256(b"POST " + PATH.encode() + b"\n" + raw).hexdigest()}  # fmt: skip
        held, claim_id = conn.execute(STATEMENTS["claim"], claim).fetchone()
        if not held or claim_id is None:
            return 409, b'{"status": 409}'
        params = {
            "refs": [payload["recipient"]],
            "strict": True,
            "type": payload["type"],
            "title": payload["title"],
            "body": payload["body"],
            "link_path": payload.get("link"),
            "dedupe_key": payload["dedupe_key"],
            "data": json.dumps(payload.get("data") or {}, separators=(",", ":")),
            "campaign_id": None,
            "api_key_id": api_key_id,
            "group_key": None,
            "cancellation_key": None,
            "route": None,
            "mode": None,
            "tenant": None,
        }
        rows = conn.execute(STATEMENTS["notify"], params).fetchall()
        notification_id = rows[0][4]
        pending = [row[4] for row in rows if row[0] == "delivery"]
        body = json.dumps({"dedupe_key": payload["dedupe_key"], "notification_id": notification_id}).encode()
        conn.execute(STATEMENTS["complete"], {"id": claim_id, "status": 202, "body": body.decode()})
    _after_commit(rows[0][3], payload["title"], pending)
    return 202, body


def _after_commit(user_id: int, title: str, pending: list[int]) -> None:
    """The pending rows on the drain list (and a drain job when none waits), then the badge event."""
    woken = False
    if pending:
        with _redis.pipeline(transaction=True) as pipe:
            pipe.rpush(DRAIN_LIST, *pending)
            pipe.set(DRAIN_FLAG, 1, nx=True, ex=60)
            woken = pipe.execute()[1]
    if woken:  # no worker runs in bench_ingest (for the app either): the flag expires, one enqueue a minute
        job = f"rq:job:{NAMESPACE}-{uuid.uuid4().hex}"
        with _redis.pipeline(transaction=True) as pipe:
            pipe.sadd("rq:queues", QUEUE)
            pipe.hset(job, "status", "queued")
            pipe.hset(job, mapping={"created_at": datetime.now(UTC).isoformat(),
                                    "data": json.dumps(["default", "email"]),
                                    "origin": QUEUE, "timeout": 600, "result_ttl": 60})  # fmt: skip
            pipe.rpush(QUEUE, job)
            pipe.execute()
    _redis.publish(f"hato:{NAMESPACE}:badge:user:{user_id}", json.dumps({"kind": "badge", "toast": {"title": title}}))


def app(environ, start_response):
    """WSGI entry point: POST / ingests one notification; GET / answers {"ok": true} (readiness)."""
    if environ["REQUEST_METHOD"] != "POST":
        status, body = 200, b'{"ok": true}'
    else:
        raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        status, body = _ingest(raw, environ.get("HTTP_IDEMPOTENCY_KEY") or str(uuid.uuid4()))
    start_response(f"{status} {'Accepted' if status == 202 else 'OK' if status == 200 else 'Conflict'}",
                   [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])  # fmt: skip
    return [body]
