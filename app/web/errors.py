"""The app's own error pages (HTML) and RFC 9457 problem documents (JSON API)."""

from __future__ import annotations

import logging

from flask import Flask, Response, g, jsonify, render_template, request
from flask_babel import gettext, lazy_gettext, refresh
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.exceptions import HTTPException, InternalServerError

from app import dbpool
from app.extensions import db, login

log = logging.getLogger(__name__)

# Lazy: each is translated when a response is built, into the reader's language (str() outside a request: English).
MESSAGES = {
    400: lazy_gettext("The request could not be understood."),
    401: lazy_gettext("You need to sign in to see this."),
    403: lazy_gettext("You do not have access to this page."),
    404: lazy_gettext("There is nothing here."),
    405: lazy_gettext("That action is not allowed here."),
    409: lazy_gettext("That conflicts with an earlier request."),
    410: lazy_gettext("This is no longer available."),
    413: lazy_gettext("The request is too large."),
    415: lazy_gettext("That content type is not supported."),
    422: lazy_gettext("The request could not be processed."),
    429: lazy_gettext("Too many attempts. Please wait a minute and try again."),
    500: lazy_gettext("Something went wrong on our side. It has been logged."),
    503: lazy_gettext("The service is temporarily unavailable."),
}


def wants_problem_json() -> bool:
    """API paths and clients asking for JSON get problem documents instead of HTML pages."""
    return request.path.startswith("/v1/") or request.accept_mimetypes.best == "application/json"


def title_for(status: int) -> str:
    """The short sentence that names an HTTP status, in the reader's language."""
    return str(MESSAGES[status]) if status in MESSAGES else gettext("Error")


def problem(status: int, detail: str, **extra) -> Response:
    """Return an RFC 9457 application/problem+json response."""
    body = {"type": "about:blank", "title": title_for(status), "status": status, "detail": str(detail)}
    body.update(extra)
    response = jsonify(body)
    response.status_code = status
    response.mimetype = "application/problem+json"
    return response


def render_error(status: int, detail: str | None = None) -> Response:
    """Render the error as a page or a problem document, whichever the client expects."""
    detail = str(detail or title_for(status))
    if wants_problem_json():
        return problem(status, detail)
    html = render_template("errors/error.html", status=status, title=title_for(status), detail=detail)
    return Response(html, status=status, mimetype="text/html")


def handle_http_exception(error: HTTPException) -> Response:
    """Turn any HTTP error into our own page; keep headers such as Retry-After."""
    if error.code is None:
        return error
    detail = error.description if error.code in (400, 405, 413, 415, 422) else None
    if detail == type(error).description:
        detail = None  # werkzeug's stock English sentence: ours says the same in the reader's language
    response = render_error(error.code, detail)
    if error.code == 429:
        retry_after = getattr(error, "retry_after", None)
        response.headers["Retry-After"] = str(retry_after or 60)
    if error.code == 405 and getattr(error, "valid_methods", None):
        response.headers["Allow"] = ", ".join(error.valid_methods)  # RFC 9110 requires it on a 405
    return response


def handle_csrf_error(error: CSRFError) -> Response:
    """A missing or stale CSRF token is a 400 with a sentence a person understands."""
    return render_error(
        400, gettext("Your session form expired or was not sent from this site. Reload the page and try again.")
    )


# A fast-shutdown restart is back within seconds; clients that honour Retry-After come back after it.
DATABASE_RETRY_AFTER_SECONDS = 5


def handle_database_unavailable(error: SQLAlchemyError) -> Response:
    """PostgreSQL is unreachable: 503 with Retry-After (a page or a problem document), never a 500."""
    log.warning("database unavailable on %s %s: %s", request.method, request.path, error)
    try:
        db.session.rollback()
    except SQLAlchemyError:
        pass  # the connection is gone; the session is removed at the end of the request anyway
    # The page's header, language and zone would ask the database for the signed-in user: render this
    # answer for a visitor (Flask-Login reads the request's user from g), in the browser's language.
    g._login_user = login.anonymous_user()
    refresh()
    response = render_error(503, gettext("The database is unavailable; retry shortly."))
    response.headers["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    return response


def handle_unexpected(error: Exception) -> Response:
    """Log the traceback and show the 500 page; never leak the traceback to the client."""
    if isinstance(error, HTTPException):
        return handle_http_exception(error)
    log.exception("unhandled error on %s %s", request.method, request.path)
    return render_error(InternalServerError.code)


def init_app(app: Flask) -> None:
    """Register the handlers."""
    app.register_error_handler(CSRFError, handle_csrf_error)
    app.register_error_handler(HTTPException, handle_http_exception)
    for error_class in dbpool.UNAVAILABLE:
        app.register_error_handler(error_class, handle_database_unavailable)
    app.register_error_handler(Exception, handle_unexpected)
