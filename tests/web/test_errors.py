"""The app's own error pages, and problem+json under /v1."""

from flask import abort

from app import create_app
from tests.conftest import TEST_CONFIG


def test_404_is_the_apps_own_page(client):
    response = client.get("/definitely/not/here")
    assert response.status_code == 404
    assert b"There is nothing here" in response.data
    assert b"Hato" in response.data


def test_404_under_v1_is_problem_json(client):
    response = client.get("/v1/definitely-not-here")
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["status"] == 404


def _app_with_failing_route():
    application = create_app(dict(TEST_CONFIG, TESTING=False, PROPAGATE_EXCEPTIONS=False))

    @application.get("/boom")
    def boom():
        raise RuntimeError("secret internal detail")

    @application.get("/forbidden")
    def forbidden():
        abort(403)

    return application


def test_500_is_the_apps_own_page_without_traceback():
    response = _app_with_failing_route().test_client().get("/boom")
    assert response.status_code == 500
    assert b"Something went wrong" in response.data
    assert b"secret internal detail" not in response.data and b"Traceback" not in response.data


def test_403_page():
    response = _app_with_failing_route().test_client().get("/forbidden")
    assert response.status_code == 403
    assert b"You do not have access" in response.data
