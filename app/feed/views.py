"""The headless feed under /v1/feed: one member's inbox as JSON for the product's own pages (the bell).

Authenticated by a signed user token (app/user_tokens) as `Authorization: Bearer …`, never a cookie, so no
CSRF token either; cross-origin calls only from FEED_ALLOWED_ORIGINS. Every read and write is the inbox's own
(app/inbox/queries.py and service.py): the same IDOR-safe lookups by (user, id), the same idempotent updates
and the same badge events after the commit. A token scoped to a tenant (its `tenant` claim, issue 32) reads,
counts and touches only that tenant's notifications (plus announcements): any other row is a 404 through it; its
page carries that tenant's branding (name, logo, colour) for the bell's popover.
"""

from __future__ import annotations

import re

from flask import Blueprint, Response, abort, current_app, request
from flask_babel import gettext
from pydantic import BaseModel
from werkzeug.exceptions import HTTPException

from app import replicas, timezones, user_tokens
from app.actions import queries as action_queries
from app.actions import service as actions
from app.clock import db_now
from app.devices import queries as device_queries
from app.devices import service as device_service
from app.extensions import csrf, limiter
from app.feed.schemas import (
    AnnouncementTextOut,
    BulkIn,
    FeedActionOut,
    FeedAnnouncementOut,
    FeedBulkOut,
    FeedChangeOut,
    FeedCountsOut,
    FeedNotificationOut,
    FeedPageOut,
    FeedPageQuery,
    FeedPreferenceIn,
    FeedPreferenceOut,
    FeedPreferencesOut,
    FeedTenantOut,
    FeedUndoneOut,
    FeedUndoOut,
    SnoozeIn,
    TypeTextOut,
    UndoIn,
)
from app.inbox import bulk, queries, service
from app.inbox import snooze as snoozing
from app.pagination import Cursor
from app.preferences import queries as preference_queries
from app.preferences import service as preference_service
from app.tenants import queries as tenant_queries
from app.tenants.branding import COLOR_PATTERN, logo_url_ok
from app.unitofwork import commit
from app.users.queries import user_by_id
from app.web import bodies
from app.web.devices import DeviceIn, DeviceOut
from app.web.documented import documented
from app.web.errors import problem
from app.web.i18n import content_chain

bp = Blueprint("feed", __name__, url_prefix="/v1/feed")
csrf.exempt(bp)

CORS_METHODS = "GET, POST, PUT, DELETE, OPTIONS"
CORS_HEADERS = "Authorization, Content-Type, Accept-Language"
CORS_MAX_AGE = "600"
INVALID_USER_TOKEN = "urn:hato:problem:invalid_user_token"  # noqa: S105 - a problem type URI, not a secret


def _token_messages() -> dict[str, str]:
    return {
        "malformed": gettext("Send a user token as `Authorization: Bearer <token>`."),
        "expired": gettext("The user token has expired; fetch a new one from your backend."),
        "audience": gettext("The user token was made for another Hato (its aud is not this BASE_URL)."),
        "signature": gettext("The user token's signature does not match a live API key with the feed:issue scope."),
        "claims": gettext("The user token lacks a required claim (sub, exp or aud)."),
        "unknown_user": gettext("The user token names no member of this Hato."),
        "tenant": gettext("The user token's tenant does not exist, or the member no longer belongs to it."),
    }


def current_feed_user() -> user_tokens.FeedUser:
    """Return who the request's user token speaks for (verified once per request); TokenError otherwise."""
    if not hasattr(request, "hato_feed_user"):
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            raise user_tokens.TokenError("malformed")
        request.hato_feed_user = user_tokens.verify(token.strip())
    return request.hato_feed_user


def _limit_key() -> str:
    feed_user = getattr(request, "hato_feed_user", None)
    return f"feed-user:{feed_user.user_id}" if feed_user else f"feed-ip:{request.remote_addr}"


limiter.limit(lambda: current_app.config["API_RATE_LIMIT"], key_func=_limit_key)(bp)


@bp.before_request
def guard():
    """Answer a CORS preflight; refuse other origins; authenticate everything else by user token."""
    origin = request.headers.get("Origin")
    if origin is not None and not user_tokens.feed_origin_allowed(origin):
        # No Access-Control-Allow-Origin on the answer: the browser keeps it from the page.
        return problem(403, gettext("This origin is not in FEED_ALLOWED_ORIGINS."))
    if request.method == "OPTIONS":
        return "", 204
    current_feed_user()
    bodies.limit_body(current_app.config["API_MAX_BODY_BYTES"])
    return None


@bp.after_request
def cors_headers(response):
    """Let allowed origins read the answer (bearer tokens only: credentials are never allowed)."""
    origin = request.headers.get("Origin")
    response.headers.add("Vary", "Origin")
    response.headers.setdefault("Cache-Control", "no-store")
    if origin is not None and user_tokens.feed_origin_allowed(origin):
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Allow-Methods"] = CORS_METHODS
        response.headers["Access-Control-Allow-Headers"] = CORS_HEADERS
        response.headers["Access-Control-Max-Age"] = CORS_MAX_AGE
    return response


@bp.errorhandler(user_tokens.TokenError)
def invalid_token(error: user_tokens.TokenError):
    """401 with the reason as a problem document; `code: expired` tells the client to fetch a new token."""
    response = problem(401, _token_messages()[error.code], type=INVALID_USER_TOKEN, code=error.code)
    response.headers["WWW-Authenticate"] = f'Bearer realm="hato-feed", error="invalid_token", code="{error.code}"'
    return response


bp.register_error_handler(bodies.BadInput, bodies.refused)


@bp.errorhandler(HTTPException)
def http_error(error: HTTPException):
    """Every other error of the feed is a problem document too (never an HTML page)."""
    own = error.code in (400, 404, 422) and error.description != type(error).description
    detail = error.description if own else None
    response = problem(error.code or 500, detail or error.name)
    for name, value in error.get_headers() or ():
        if name.lower() == "retry-after":
            response.headers[name] = value
    return response


def _user_id() -> int:
    return current_feed_user().user_id


def _tenant_id() -> int | None:
    """The tenant the token is scoped to (issue 32): only its notifications are seen or touched, or None."""
    return current_feed_user().tenant_id


def _refuse(status: int, detail: str, field: str | None = None):
    """Stop with a problem document (400, 404, 422) whose detail says why (naming the field at fault)."""
    if field is not None:
        raise bodies.BadInput(status, detail, [{"field": field, "message": detail}])
    abort(status, detail)


def _json(model: BaseModel) -> Response:
    return Response(model.model_dump_json(exclude_unset=True), mimetype="application/json")


def _link(path: str | None) -> str | None:
    return current_app.config["BASE_URL"].rstrip("/") + path if path else None


def _notification(row) -> FeedNotificationOut:
    """One notification as the feed shows it (its link and its link buttons' made absolute)."""
    fields = {name: row[name] for name in FeedNotificationOut.model_fields if name not in ("link", "actions")}
    buttons = [FeedActionOut(label=b.label, url=_link(b.url), name=b.name, state=b.state, clicked=b.clicked)
               for b in action_queries.row_buttons(row, current_app.config["DEFAULT_LOCALE"])]  # fmt: skip
    return FeedNotificationOut(**fields, link=_link(row["link_path"]), actions=buttons)


def _chain() -> list[str]:
    """The member's locale chain for operator content (their saved locale, else the request's language)."""
    user = user_by_id(_user_id())
    return content_chain(user.locale if user is not None else None)


def _announcement(row) -> FeedAnnouncementOut:
    """One active announcement as the feed shows it (row from active_announcements, words along the chain)."""
    fields = {name: row[name] for name in FeedAnnouncementOut.model_fields if name != "locales"}
    locales = {tag: AnnouncementTextOut(**text) for tag, text in (row["locales"] or {}).items()}
    return FeedAnnouncementOut(**fields, locales=locales)


def _tenant() -> FeedTenantOut | None:
    """The branding of the token's own tenant (never another's), or None for an unscoped token.

    The logo is only ever the tenant's stored URL, and only while it passes the logo rule (https on a public
    host); the colour only as #rrggbb: a row written around the rules shows neither.
    """
    tenant_id = _tenant_id()
    brand = tenant_queries.brandings([tenant_id]).get(tenant_id) if tenant_id is not None else None
    if brand is None:
        return None
    logo = brand.logo_url if brand.logo_url and logo_url_ok(brand.logo_url) else None
    color = brand.primary_color if brand.primary_color and re.fullmatch(COLOR_PATTERN, brand.primary_color) else None
    return FeedTenantOut(key=brand.key, name=brand.name, logo_url=logo, primary_color=color and color.lower())


def _counts_out(counts: queries.BadgeCounts) -> FeedCountsOut:
    return FeedCountsOut(unread=counts.unread, unseen=counts.unseen, badge=counts.shown())


def _counts() -> FeedCountsOut:
    return _counts_out(queries.badge_counts(_user_id(), _tenant_id()))


def _own_notification(notification_id: int):
    return queries.notification_for(_user_id(), notification_id, _tenant_id()) or _refuse(
        404, gettext("There is no notification with this id.")
    )


def _done(notification_id: int | None = None):
    """Commit once (the user's tabs and bells hear of it after), then answer with the row and the counts."""
    commit()
    if notification_id is None:
        return _json(FeedChangeOut(counts=_counts()))
    row = queries.notification_for(_user_id(), notification_id, _tenant_id())
    return _json(FeedChangeOut(counts=_counts(), notification=_notification(row) if row is not None else None))


def _documented(operation_id: str, summary: str, answer: type[BaseModel], *errors: int, **details):
    """The feed's @documented: a user token's operation, under the feed tag."""
    return documented(operation_id, summary, {200: answer}, errors=errors, tags=("feed",), auth="userToken", **details)


# --- reads ----------------------------------------------------------------------------------------


@bp.get("")
@_documented(
    "getFeed",
    "One page of the member's notifications (and announcements)",
    FeedPageOut,
    description="Newest first, keyset-paged: pass `next_cursor` back as `cursor`. A cursor that does not "
    "read is a 422 naming it (start again from the first page).",
)
@bodies.takes_query(FeedPageQuery)
def page(query: FeedPageQuery):
    """One keyset page of notifications (newest first) and, on the first page, the active announcements."""
    if query.cursor and Cursor.decode(query.cursor) is None:
        message = gettext("That page link is not valid any more. Go back to the newest notifications.")
        _refuse(422, message, field="cursor")
    user_id, tenant_id, chain = _user_id(), _tenant_id(), _chain()
    first = query.cursor is None and query.filter != "archived"

    def listing():
        result = queries.notification_page(user_id, query.filter, query.cursor, query.limit, tenant_id)
        announcements = queries.active_announcements(user_id, chain=chain) if first else []
        return result, announcements, queries.badge_counts(user_id, tenant_id)

    # A replica may answer (app/replicas.py): this member's own last write is seen either way.
    result, announcements, counts = replicas.read(user_id, listing)
    return _json(
        FeedPageOut(
            notifications=[_notification(row) for row in result.rows],
            announcements=[_announcement(row) for row in announcements],
            next_cursor=result.next_cursor,
            counts=_counts_out(counts),
            tenant=_tenant(),
        )
    )


@bp.get("/counts")
@_documented("getFeedCounts", "The member's unread and unseen counts", FeedCountsOut)
def counts():
    """The member's two badges, unread and unseen, and the one BADGE_COUNTS shows."""
    user_id, tenant_id = _user_id(), _tenant_id()
    # What a client asks on (re)connect: a replica may answer (app/replicas.py), the member's own writes seen.
    return _json(_counts_out(replicas.read(user_id, lambda: queries.badge_counts(user_id, tenant_id))))


# --- writes (each idempotent: a repeat changes nothing and answers the same) ---------------------


def _act(action: str, notification_id: int):
    """Read, archive or unarchive one of the member's notifications (the inbox's one handler for them)."""
    if service.act_on(_user_id(), notification_id, action, _tenant_id()) is None:
        _refuse(404, gettext("There is no notification with this id."))
    return _done(notification_id)


@bp.post("/notifications/<int:notification_id>/read")
@_documented("feedMarkRead", "Mark a notification read (idempotent)", FeedChangeOut, 404)
def mark_read(notification_id: int):
    """Mark one notification read (the first read_at stays)."""
    return _act("read", notification_id)


@bp.post("/notifications/<int:notification_id>/archive")
@_documented("feedArchive", "Archive a notification (idempotent)", FeedChangeOut, 404)
def archive(notification_id: int):
    """Archive one notification (it becomes read)."""
    return _act("archive", notification_id)


@bp.post("/notifications/<int:notification_id>/unarchive")
@_documented("feedUnarchive", "Move it back to the inbox", FeedChangeOut, 404)
def unarchive(notification_id: int):
    """Move an archived notification back to the inbox."""
    return _act("unarchive", notification_id)


@bp.post("/notifications/<int:notification_id>/actions/<action_name>")
@_documented(
    "feedAct",
    "Click a named action button (once: a repeat sends nothing)",
    FeedChangeOut,
    404,
    description="The first click sends the product the webhook event `notification.action`; every click marks "
    "the notification read. `changed` is false for a repeat. The button shows the product's answer once it "
    "comes (the notification's `actions[].state`).",
)
def act(notification_id: int, action_name: str):
    """Act on one of the member's named actions (the inbox's one service)."""
    _own_notification(notification_id)  # 404 for a row outside this feed's scope (another tenant's)
    done = actions.click(_user_id(), notification_id, action_name, "feed")
    if done is None:
        _refuse(404, gettext("There is no notification with this id and action."))
    commit()
    row = queries.notification_for(_user_id(), notification_id, _tenant_id())
    return _json(FeedChangeOut(counts=_counts(), notification=_notification(row), changed=done.first))


@bp.post("/notifications/<int:notification_id>/snooze")
@_documented(
    "feedSnooze",
    'Snooze until {"choice": "hour"|"tomorrow"|"monday"} or {"until": a local date-time}',
    FeedChangeOut,
    404,
    422,
)
@bodies.takes_json(SnoozeIn)
def snooze(notification_id: int, payload: SnoozeIn):
    """Read and hide a notification until a menu choice or a local date-time (in the member's time zone)."""
    row = _own_notification(notification_id)
    if row["archived_at"]:
        _refuse(422, gettext("Move it back to the inbox before snoozing it."))
    try:
        until = snoozing.until_from_form(payload.model_dump(), db_now(), timezones.user_zone(user_by_id(_user_id())))
    except snoozing.SnoozeError as exc:
        _refuse(422, str(exc), field="until")
    service.snooze(_user_id(), notification_id, until)
    return _done(notification_id)


@bp.post("/notifications/<int:notification_id>/unsnooze")
@_documented("feedUnsnooze", "Wake a snoozed notification now", FeedChangeOut, 404)
def unsnooze(notification_id: int):
    """Wake a snoozed notification now."""
    _own_notification(notification_id)
    service.unsnooze(_user_id(), notification_id)
    return _done(notification_id)


@bp.post("/notifications/<int:notification_id>/mute")
@_documented("feedMute", "Mute the notification's thread", FeedChangeOut, 404, 422)
def mute(notification_id: int):
    """Mute the notification's thread (later ones arrive read and hidden)."""
    row = _own_notification(notification_id)
    if not row["mutable"]:
        _refuse(422, gettext("This notification is not part of a thread that can be muted."))
    service.mute(_user_id(), notification_id)
    return _done(notification_id)


@bp.post("/announcements/<int:announcement_id>/read")
@_documented("feedReadAnnouncement", "Mark an announcement read", FeedChangeOut, 404)
def read_announcement(announcement_id: int):
    """Mark one active announcement read."""
    if queries.announcement_for(_user_id(), announcement_id) is None:
        _refuse(404, gettext("There is no announcement with this id."))
    service.read_announcement(_user_id(), announcement_id)
    return _done()


@bp.post("/read-all")
@_documented("feedReadAll", "Mark everything read", FeedChangeOut)
def read_all():
    """Mark every notification and active announcement read."""
    result = service.read_all(_user_id(), _tenant_id())
    commit()
    return _json(FeedChangeOut(changed=result.changed, counts=_counts()))


def _too_many_ids() -> str:
    return gettext("Send at most %(max)d ids in one bulk request, or use `all` for a whole list.", max=bulk.max_ids())


@bp.post("/bulk")
@_documented(
    "feedBulk",
    "Mark read, archive or delete many notifications at once (by ids, or a whole list)",
    FeedBulkOut,
    422,
    description="One statement over the set. Ids that are not the member's are ignored (as if they did not exist). "
    "`delete` with `all` deletes only read rows. The answer's `undo.token` puts exactly the changed rows back "
    "(POST /v1/feed/undo) within `undo.expires_in` seconds; a deleted row is then removed for good unless the "
    "operator keeps deleted rows for the retention rules (INBOX_DELETE_KEEPS_FOR_RETENTION).",
)
@bodies.takes_json(BulkIn)
def bulk_action(payload: BulkIn):
    """One action on the member's rows among ids, or on a whole list (delete: its read rows)."""
    if (payload.ids is None) == (payload.all is None):
        _refuse(422, gettext("Send either `ids` or `all`, not both."), field="ids")
    if payload.ids is not None and not payload.ids:
        _refuse(422, gettext("Send at least one id."), field="ids")
    if payload.ids is not None and len(payload.ids) > bulk.max_ids():
        _refuse(422, _too_many_ids(), field="ids")
    try:
        if payload.all:
            result = bulk.act_on_all(_user_id(), payload.action, payload.filter, _tenant_id())
        else:
            result = bulk.act_on_ids(_user_id(), payload.action, payload.ids, _tenant_id())
    except bulk.TooManyIds:
        _refuse(422, _too_many_ids(), field="ids")
    commit()
    undo = FeedUndoOut(token=result.token, expires_in=bulk.undo_seconds()) if result.token else None
    return _json(FeedBulkOut(action=result.action, changed=result.count, ids=result.ids, undo=undo, counts=_counts()))


@bp.post("/undo")
@_documented(
    "feedUndo",
    "Undo one bulk action (its token, once, in time)",
    FeedUndoneOut,
    404,
    422,
    description="A token that is unknown, used, expired or another member's is a 404 and changes nothing.",
)
@bodies.takes_json(UndoIn)
def undo(payload: UndoIn):
    """Put back exactly the rows of one bulk action."""
    restored = bulk.undo(_user_id(), payload.token, _tenant_id())
    if not restored:
        _refuse(404, gettext("There is nothing to undo with this token (it was used, or its time has passed)."))
    commit()
    return _json(FeedUndoneOut(restored=restored, counts=_counts()))


@bp.post("/seen")
@_documented("feedSeen", "Record that the member looked (unseen back to 0)", FeedChangeOut)
def seen():
    """Record that the member looked at their feed now (the unseen badge goes back to 0); a scoped token's look
    sees only its tenant's part (and the announcements), leaving the member's other feeds' unseen rows alone."""
    service.record_seen(_user_id(), _tenant_id())
    return _done()


# --- preferences ------------------------------------------------------------------------------------


def _preferences() -> Response:
    rows = preference_queries.matrix(_user_id(), _chain())
    types = [
        FeedPreferenceOut(
            type=row.type,
            label=row.label,
            description=row.description,
            locales={tag: TypeTextOut(**text) for tag, text in row.locales.items()},
            mandatory=row.mandatory,
            channels={channel: cell.send for channel, cell in row.cells.items()},
        )
        for row in rows
    ]
    return _json(FeedPreferencesOut(types=types))


@bp.get("/preferences")
@_documented("getFeedPreferences", "The member's type × channel preferences", FeedPreferencesOut)
def preferences():
    """The member's type × channel matrix (mandatory types are shown, locked)."""
    return _preferences()


@bp.post("/devices")
@_documented(
    "feedRegisterDevice",
    "Register this phone for the member's pushes, or refresh it (at each start of the app)",
    DeviceOut,
    422,
    description="The same rules as PUT /v1/users/{external_id}/devices: a token another member registered "
    "moves to this one; registering again clears the push service's older verdict.",
)
@bodies.takes_json(DeviceIn)
def register_device(payload: DeviceIn):
    """Register or refresh the member's phone."""
    registered = device_service.register(_user_id(), payload.fields())
    commit()
    device = next(d for d in device_queries.for_user(_user_id()) if d.id == registered.device_id)
    return _json(DeviceOut.of(device))


@bp.delete("/devices/<token>")
@documented(
    "feedForgetDevice",
    "Forget this phone (when the member signs out in the app)",
    {204: None},
    errors=(404,),
    tags=("feed",),
    auth="userToken",
)
def forget_device(token: str):
    """Forget the member's phone with this token."""
    if not device_service.remove(_user_id(), token):
        _refuse(404, gettext("You have no device with this token."))
    commit()
    return Response(status=204)


@bp.put("/preferences")
@_documented("putFeedPreference", "Turn one type × channel on or off (mandatory: 422)", FeedPreferencesOut)
@bodies.takes_json(FeedPreferenceIn)
def set_preference(payload: FeedPreferenceIn):
    """Turn one (type, channel) on or off: {"type": …, "channel": …, "enabled": true|false}."""
    try:
        preference_service.set_preference(_user_id(), payload.type, payload.channel, payload.enabled)
    except preference_service.PreferenceError as exc:  # an unknown type, or a mandatory one
        _refuse(422, str(exc), field="type")
    commit()
    return _preferences()
