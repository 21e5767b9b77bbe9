"""The signed-cookie session, left alone by blueprints that authenticate otherwise (the JSON API's bearer keys)."""

from __future__ import annotations

from flask import Flask, Request, Response
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface, SessionMixin


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


class SessionlessSession(SecureCookieSession):
    """The empty session of a sessionless blueprint's request: never saved, so it never replaces the cookie."""


class CookieSessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie session; a sessionless blueprint's requests get an empty one, and no cookie back.

    The API never accepts the cookie (app/api/views.py), so reading and verifying one it happens to carry,
    and refreshing it on every answer, was work for nothing on its hottest path. The session is opened
    before Flask matches the URL (request.blueprint is still None then), so requests are told apart by the
    blueprints' URL prefixes: under a sessionless prefix and not under another blueprint's longer one
    (/v1/feed/… belongs to the feed; any other blueprint's route there, up to its first
    variable part, keeps the cookie). Saving follows what opening decided (a SessionlessSession is never
    saved), so an unknown /v1/ path's error page cannot replace the browser's session with an empty one either.
    """

    def __init__(self, sessionless: frozenset[str]) -> None:
        self.sessionless = sessionless
        self._prefixes: tuple[tuple[str, ...], tuple[str, ...]] | None = None

    def _is_sessionless(self, app: Flask, path: str) -> bool:
        if self._prefixes is None:  # the blueprints are registered after init_app: read the URL map on first use
            mine = tuple(
                bp.url_prefix for name, bp in app.blueprints.items() if name in self.sessionless and bp.url_prefix
            )
            # Any other blueprint's route under those prefixes, up to its first variable part (/v1/feed/…).
            others = tuple(
                {
                    rule.rule.split("<", 1)[0]
                    for rule in app.url_map.iter_rules()
                    if rule.endpoint.rpartition(".")[0] not in self.sessionless
                    and any(_under(rule.rule, p) for p in mine)
                }
            )
            self._prefixes = (mine, others)
        mine, others = self._prefixes
        return any(_under(path, p) for p in mine) and not any(
            path == p or path.startswith(p if p.endswith("/") else p + "/") for p in others
        )

    def open_session(self, app: Flask, request: Request) -> SessionMixin | None:
        """An empty session for a sessionless blueprint's request; the cookie's otherwise."""
        if self._is_sessionless(app, request.path):
            return SessionlessSession()
        return super().open_session(app, request)

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        """Flask's cookie, except for a sessionless request (its session never held the browser's cookie)."""
        # Saving what such a request wrote would replace the browser's whole session with it: nothing is saved.
        if isinstance(session, SessionlessSession):
            return
        super().save_session(app, session, response)


def init_app(app: Flask, sessionless: tuple[str, ...]) -> None:
    """Use the cookie session everywhere but in the sessionless blueprints."""
    app.session_interface = CookieSessionInterface(frozenset(sessionless))
