"""Which requests open the signed-cookie session: not the JSON API's, whatever cookie rides along."""

from __future__ import annotations

import pytest
from flask import session

from tests.factories import UserFactory


@pytest.mark.parametrize(
    ("path", "sessionless"),
    [
        ("/v1/notifications", True),
        ("/v1/notifications/12", True),
        ("/v1/no-such-route", True),  # its 404 must not replace the browser's session either
        ("/v1", True),
        ("/v1/feed", False),  # the embedded bell's pages live under /v1/feed and keep the cookie
        ("/v1/feed/notifications/3/read", False),
        ("/v1/feed/socket", False),
        ("/v1x", False),
        ("/inbox", False),
        ("/console/campaigns", False),
    ],
)
def test_the_api_prefix_is_sessionless_and_the_feed_under_it_is_not(app, path, sessionless):
    assert app.session_interface._is_sessionless(app, path) is sessionless


def test_an_api_request_never_decodes_the_cookie_it_carries(app, client, login_as):
    """A browser signed in to Hato that also calls the API: the API sees an empty session, the pages the user."""
    user = login_as(UserFactory())
    cookie = {"Cookie": f"session={client.get_cookie('session').value}"}
    with app.test_request_context("/v1/notifications", headers=cookie):
        assert dict(session) == {}
    with app.test_request_context("/inbox", headers=cookie):
        assert session["_user_id"] == str(user.id)
