"""The preference screen: type × channel switches, language, e-mail frequency (digests), time zone and quiet hours,
muted threads, and the member's phone number for SMS (verified by a code) and their consent."""

from __future__ import annotations

from datetime import UTC, datetime

from flask import Blueprint, abort, current_app, make_response, redirect, render_template, request, url_for
from flask_babel import gettext, ngettext
from flask_login import current_user, login_required

from app import phones, timezones
from app.delivery.channels import channel_for, member_channels
from app.devices import queries as device_queries
from app.devices import service as device_service
from app.extensions import db
from app.i18n import LANGUAGES, language_or_default, ui_language
from app.preferences import chat_accounts as chat_places
from app.preferences import queries, service
from app.tenants import queries as tenant_queries
from app.topics import queries as topic_queries
from app.topics import service as topic_service
from app.unitofwork import commit
from app.users import chat_accounts, phone_verification
from app.web.htmx import is_htmx
from app.web.i18n import content_chain

bp = Blueprint("preferences", __name__)

RECEIVER_SAVED = ("receiver-off", "receiver-on", "receiver-remove")
_BOOLEANS = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}


def _schedule_values(user) -> dict:
    return {
        "timezone": user.timezone,
        "quiet": user.quiet_hours_start is not None,
        "quiet_start": user.quiet_hours_start.strftime("%H:%M") if user.quiet_hours_start else "",
        "quiet_end": user.quiet_hours_end.strftime("%H:%M") if user.quiet_hours_end else "",
    }


def _language_context(**extra) -> dict:
    """What the language section shows: the saved choice (None: the browser's) and what the browser asks for."""
    browser = request.accept_languages.best_match(LANGUAGES) or language_or_default(
        None, current_app.config["DEFAULT_LOCALE"]
    )
    context = {"saved_language": ui_language(current_user.locale), "browser_language": browser}
    context.update(extra)
    return context


def _page(status: int = 200, **schedule):
    context = {"values": _schedule_values(current_user), "errors": {}, "saved": False}
    context.update(_language_context(language_saved=False, language_error=None))
    context.update(_phone_context())
    context.update(_chat_context())
    context.update(schedule)
    return render_template(
        "preferences/index.html",
        rows=queries.matrix(current_user.id, content_chain(current_user.locale)),
        tenant_defaults=tenant_queries.member_defaults(current_user.id),
        mutes=queries.muted_threads(current_user.id),
        topics=topic_queries.user_topics(current_user.id).rows,
        receivers=device_queries.receivers(current_user.id),
        email_choices=queries.email_choices(current_user.id, content_chain(current_user.locale)),
        digest_time=queries.digest_time(current_user),
        frequency_labels=queries.FREQUENCY_LABELS,
        timezones=timezones.choices(),
        now=datetime.now(UTC),
        **context,
    ), status


def _chat_context() -> dict:
    """The member's chat accounts; the section shows where chat is configured or an account is linked."""
    accounts = chat_accounts.accounts_of(current_user.id)
    configured = any(c.name == "chat" for c in member_channels(current_app.config))
    return {
        "chat_accounts": accounts,
        "chat_shown": configured or bool(accounts),
        "chat_labels": chat_places.SERVICE_NAMES,
        "chat_place": chat_places.place,
    }


@bp.get("/preferences")
@login_required
def index():
    """Show the type × channel matrix and the quiet-hours form."""
    saved = request.args.get("saved")
    return _page(
        saved=saved == "schedule",
        email_saved=saved == "email",
        language_saved=saved == "language",
        receiver_saved=saved if saved in RECEIVER_SAVED else None,
        chat_saved=saved == "chat-unlinked",
    )


@bp.post("/preferences")
@login_required
def update():
    """Turn one (type, channel) on or off; mandatory types answer 422 and nothing changes."""
    type_, channel = request.form.get("type", ""), request.form.get("channel", "")
    enabled = _BOOLEANS.get(request.form.get("enabled", "").lower())
    if enabled is None:
        abort(422, gettext("Say whether the channel should be on or off."))
    try:
        service.set_preference(current_user.id, type_, channel, enabled)
    except service.PreferenceError as exc:
        db.session.rollback()
        abort(422, str(exc))
    commit()
    if not is_htmx():
        return redirect(url_for("preferences.index", _anchor=f"type-{type_}"), 303)
    kind = queries.notification_type(type_, content_chain(current_user.locale))
    return render_template(
        "preferences/_toggled.html",
        c=queries.cell(current_user.id, type_, channel),
        type_label=kind["label"],
        tenant_defaults=tenant_queries.member_defaults(current_user.id),
    )


@bp.post("/preferences/schedule")
@login_required
def update_schedule():
    """Save the time zone and quiet hours; invalid values are shown again with the reason (422)."""
    form = request.form
    values = {
        "timezone": form.get("timezone", ""),
        "quiet": form.get("quiet") == "on",
        "quiet_start": form.get("quiet_start", ""),
        "quiet_end": form.get("quiet_end", ""),
    }
    try:
        schedule = service.parse_schedule(
            values["timezone"], values["quiet"], values["quiet_start"], values["quiet_end"]
        )
    except service.ScheduleError as exc:
        if is_htmx():
            return _schedule_fragment(values, exc.errors, saved=False), 422
        return _page(422, values=values, errors=exc.errors)
    service.set_schedule(current_user.id, schedule)
    commit()
    if not is_htmx():
        return redirect(url_for("preferences.index", saved="schedule", _anchor="schedule"), 303)
    return _schedule_fragment(_schedule_values(current_user), {}, saved=True)


def _schedule_fragment(values: dict, errors: dict, saved: bool) -> str:
    return render_template(
        "preferences/_schedule.html",
        values=values,
        errors=errors,
        saved=saved,
        timezones=timezones.choices(),
        now=datetime.now(UTC),
    )


@bp.post("/preferences/mutes/unmute")
@login_required
def unmute():
    """Unmute one of the user's threads (404 if they had not muted it); its next notifications arrive as usual."""
    group_key = request.form.get("group_key", "")
    if not service.unmute(current_user.id, group_key):
        abort(404)
    commit()
    if not is_htmx():
        return redirect(url_for("preferences.index", _anchor="muted"), 303)
    return render_template(
        "preferences/_unmuted.html", group_key=group_key, left=len(queries.muted_threads(current_user.id))
    )


@bp.post("/preferences/topics/unfollow")
@login_required
def unfollow_topic():
    """Stop following one of the user's topics (404 if they do not follow it); the product hears of it."""
    row = topic_service.unfollow(current_user.id, request.form.get("topic", "")[:200])
    if row is None:
        abort(404)
    commit()
    if not is_htmx():
        return redirect(url_for("preferences.index", _anchor="topics"), 303)
    left = len(topic_queries.user_topics(current_user.id, limit=1).rows)
    return render_template("preferences/_unfollowed.html", name=row["name"], left=left)


@bp.post("/preferences/receivers/<any(phone, browser):kind>/<int:receiver_id>")
@login_required
def change_receiver(kind: str, receiver_id: int):
    """Turn pushes to one of the user's phones or browsers off or on, or forget it (404 for anyone else's)."""
    action = request.form.get("action", "")
    if action == "remove":
        done = device_service.remove_by_id(current_user.id, receiver_id, kind)
    elif action in ("off", "on"):
        done = device_service.set_enabled(current_user.id, receiver_id, action == "on", kind)
    else:
        abort(422, gettext("Say whether to turn it off, turn it on or remove it."))
    if not done:
        abort(404)
    commit()
    return redirect(url_for("preferences.index", saved=f"receiver-{action}", _anchor="receivers"), 303)


@bp.post("/preferences/chat/<provider>/unlink")
@login_required
def unlink_chat(provider: str):
    """Unlink one of the member's chat accounts (404 when they have none for that service)."""
    if not chat_accounts.delete_account(current_user.id, provider):
        abort(404)
    commit()
    return redirect(url_for("preferences.index", saved="chat-unlinked", _anchor="chat-accounts"), 303)


@bp.post("/preferences/email-frequency")
@login_required
def update_email_frequency():
    """Save each type's e-mail frequency (immediately, hourly or daily digest, off) and the daily digest time.

    Only the types the form names change; mandatory types are always immediate (422 if asked otherwise).
    """
    try:
        at = service.parse_digest_time(request.form.get("digest_time", ""))
        for choice in queries.email_choices(current_user.id):
            wanted = request.form.get(f"frequency-{choice.type}")
            if wanted is None or wanted == choice.choice:
                continue
            service.set_email_frequency(current_user.id, choice.type, wanted)
        service.set_digest_time(current_user.id, at)
    except (service.PreferenceError, service.ScheduleError) as exc:
        db.session.rollback()
        abort(422, str(exc))
    commit()
    return redirect(url_for("preferences.index", saved="email", _anchor="email-frequency"), 303)


@bp.post("/preferences/language")
@login_required
def update_language():
    """Save the language Hato speaks to the user (empty: the browser's); the next page is already in it.

    Every word on the page changes, so htmx is told to load the page afresh (HX-Redirect) rather than swap a part.
    """
    try:
        language = service.parse_language(request.form.get("locale"))
    except service.PreferenceError as exc:
        if is_htmx():
            context = _language_context(language_saved=False, language_error=str(exc))
            return render_template("preferences/_language.html", **context), 422
        return _page(422, language_error=str(exc))
    service.set_language(current_user.id, language)
    commit()
    target = url_for("preferences.index", saved="language", _anchor="language")
    if not is_htmx():
        return redirect(target, 303)
    response = make_response("", 200)
    response.headers["HX-Redirect"] = target
    return response


# --- the phone number for SMS (issue 29) ------------------------------------------------------------------------

CONSENT_SOURCE_LABELS = {
    "api": lambda: gettext("set by the service you use"),
    "member": lambda: gettext("your choice on this page"),
    "keyword": lambda: gettext("a text message reply"),
}


def _sms_on() -> bool:
    return channel_for("sms").configured(current_app.config)


def _phone_context(**extra) -> dict:
    """What the phone section shows: the member's own number, its state, any code in flight, their consent."""
    if not _sms_on():
        return {"sms_on": False}
    context = {
        "sms_on": True,
        "phone": phone_verification.state(current_user.id),
        "phone_value": "",
        "phone_errors": {},
        "phone_notice": None,
        "phone_region": current_app.config["DEFAULT_PHONE_REGION"],
        "mask_phone": phones.mask,
        "consent_source_labels": CONSENT_SOURCE_LABELS,
    }
    context.update(extra)
    return context


def _phone_answer(status: int = 200, anchor_notice: str | None = None, **extra):
    """The phone section again (htmx), or the whole page (a form without JavaScript: a redirect after a change)."""
    if is_htmx():
        context = _phone_context(**extra)
        return render_template("preferences/_phone.html", now=datetime.now(UTC), **context), status
    if status == 200:
        return redirect(url_for("preferences.index", _anchor="phone"), 303)
    return _page(status, **_phone_context(**extra))


def _require_sms() -> None:
    if not _sms_on():
        abort(404)


@bp.post("/preferences/phone/code")
@login_required
def send_phone_code():
    """Text a 6-digit code to the number typed (national numbers in DEFAULT_PHONE_REGION); a bad one changes nothing."""
    _require_sms()
    typed = request.form.get("phone", "")
    try:
        sent = phone_verification.send_code(current_user.id, typed, current_app.config["DEFAULT_PHONE_REGION"])
    except phones.InvalidPhone as exc:  # refused before anything was written
        return _phone_answer(422, phone_value=typed, phone_errors={"phone": str(exc.message)})
    except phone_verification.TooManyCodes as exc:  # refused before anything was written
        minutes = max(1, -(-exc.retry_after // 60))
        message = ngettext(
            "Too many codes were asked for. Try again in %(num)d minute.",
            "Too many codes were asked for. Try again in %(num)d minutes.",
            minutes,
        )
        response = _phone_answer(429, phone_value=typed, phone_errors={"phone": message})
        response = make_response(response)
        response.headers["Retry-After"] = str(exc.retry_after)
        return response
    commit()
    notice = gettext("We sent a code to %(number)s. It expires in 10 minutes.", number=phones.mask(sent.phone))
    return _phone_answer(phone_notice=notice)


@bp.post("/preferences/phone/verify")
@login_required
def verify_phone():
    """Check the code typed; the right one makes the number the member's, verified (5 wrong tries end the code)."""
    _require_sms()
    checked = phone_verification.check_code(current_user.id, request.form.get("code", ""),
                                            current_app.config["SECRET_KEY"])  # fmt: skip
    commit()  # a wrong try is spent even though the answer is a refusal
    if checked.outcome == "verified":
        return _phone_answer(phone_notice=gettext("Your number %(number)s is verified.",
                                                  number=phones.mask(checked.phone)))  # fmt: skip
    messages = {
        "wrong": lambda: ngettext(
            "That code is not right. %(num)d try left.",
            "That code is not right. %(num)d tries left.",
            checked.tries_left,
        ),  # fmt: skip
        "used_up": lambda: gettext("That code is not right, and no tries are left. Ask for a new code."),
        "expired": lambda: gettext("That code has expired. Ask for a new code."),
        "none": lambda: gettext("There is no code to check. Ask for a code first."),
        "malformed": lambda: gettext("Type the 6 digits of the code we sent."),
    }
    return _phone_answer(422, phone_errors={"code": messages[checked.outcome]()})


@bp.post("/preferences/phone/remove")
@login_required
def remove_phone():
    """Forget the member's number (and any code in flight): no SMS reaches them until they add one again."""
    _require_sms()
    phone_verification.remove_number(current_user.id)
    commit()
    return _phone_answer(phone_notice=gettext("Your number was removed."))


@bp.post("/preferences/phone/consent")
@login_required
def update_sms_consent():
    """Give or withdraw consent to SMS (recorded with source member); only a verified number with it gets SMS."""
    _require_sms()
    on = _BOOLEANS.get(request.form.get("sms_opt_in", "off").lower())
    if on is None:
        abort(422, gettext("Say whether you want text messages."))
    phone_verification.set_consent(current_user.id, on)
    commit()
    notice = gettext("You will get text messages.") if on else gettext("You will not get text messages.")
    return _phone_answer(phone_notice=notice)
