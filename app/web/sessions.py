"""The signed-cookie session, left alone by blueprints that authenticate otherwise (the JSON API's bearer keys)."""

from __future__ import annotations

from flask import Flask, Request, Response, request
from flask.sessions import SecureCookieSessionInterface, SessionMixin


class CookieSessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie session; a sessionless blueprint's requests get an empty one, and no cookie back.

    The API never accepts the cookie (app/api/views.py), so reading and verifying one it happens to carry,
    and refreshing it on every answer, was work for nothing on its hottest path.
    """

    def __init__(self, sessionless: frozenset[str]) -> None:
        self.sessionless = sessionless

    def open_session(self, app: Flask, request: Request) -> SessionMixin | None:
        """An empty session for a sessionless blueprint's request; the cookie's otherwise."""
        if request.blueprint in self.sessionless:
            return self.session_class()
        return super().open_session(app, request)

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        """Flask's cookie, except for a sessionless request (its session never held the browser's cookie)."""
        # Saving what such a request wrote would replace the browser's whole session with it: nothing is saved.
        if request.blueprint in self.sessionless:
            return
        super().save_session(app, session, response)


def init_app(app: Flask, sessionless: tuple[str, ...]) -> None:
    """Use the cookie session everywhere but in the sessionless blueprints."""
    app.session_interface = CookieSessionInterface(frozenset(sessionless))
