"""Which language and zone a request is served in: Flask-Babel's selectors and the template's view of them.

The signed-in user's saved language wins, then the browser's Accept-Language, then DEFAULT_LOCALE.
Outside a request (workers, CLI, the socket hub) code chooses explicitly with flask_babel.force_locale.
"""

from __future__ import annotations

from flask import Flask, current_app, has_request_context, request
from flask_babel import get_locale, refresh
from flask_login import current_user

from app.extensions import babel
from app.i18n import LANGUAGE_NAMES, LANGUAGES, TRANSLATIONS_DIR, language_or_default, ui_language
from app.locales import locale_chain
from app.timezones import user_zone


def select_locale() -> str:
    """The request's UI language: the user's saved one, else Accept-Language's best, else DEFAULT_LOCALE's."""
    default = current_app.config["DEFAULT_LOCALE"]
    if not has_request_context():
        return language_or_default(None, default)
    # The JSON API authenticates by key, never by cookie: a session riding along must not choose its language.
    if request.blueprint != "api" and current_user.is_authenticated and (saved := ui_language(current_user.locale)):
        return saved
    return request.accept_languages.best_match(LANGUAGES) or language_or_default(None, default)


def select_timezone() -> str:
    """The reader's zone: the signed-in user's, else DEFAULT_TIMEZONE."""
    signed_in = has_request_context() and current_user.is_authenticated
    return user_zone(current_user if signed_in else None, current_app.config["DEFAULT_TIMEZONE"]).key


def current_language() -> str:
    """The language being rendered now (a request's, or the one force_locale chose)."""
    locale = get_locale()
    return locale.language if locale is not None else language_or_default(None, current_app.config["DEFAULT_LOCALE"])


def content_chain(locale: str | None) -> list[str]:
    """Where a reader's operator content (type labels, announcements) is looked up: their saved locale (ja-jp, then
    ja), else the language this answer is in, then DEFAULT_LOCALE; the base text is the last fallback."""
    return locale_chain(locale or current_language(), current_app.config["DEFAULT_LOCALE"])


def language_globals() -> dict:
    """What templates need to speak the reader's language: <html lang> and the language picker's names."""
    return {"lang": current_language(), "language_names": LANGUAGE_NAMES}


def init_app(app: Flask) -> None:
    """Bind Flask-Babel to the catalogs in translations/ and the selectors above."""
    app.config.setdefault("BABEL_TRANSLATION_DIRECTORIES", str(TRANSLATIONS_DIR))
    app.config.setdefault("BABEL_DEFAULT_LOCALE", language_or_default(None, app.config["DEFAULT_LOCALE"]))
    babel.init_app(app, locale_selector=select_locale, timezone_selector=select_timezone)
    app.jinja_env.policies["ext.i18n.trimmed"] = True  # {% trans %} blocks as `make i18n` extracts them
    # Flask-Babel caches the choice on g, which outlives a request wherever an outer app context is
    # pushed (tests, the socket hub's batches): choose afresh for every request.
    app.before_request(refresh)
    app.context_processor(language_globals)
