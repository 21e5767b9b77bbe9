"""/healthz reports each dependency; errors render the app's own pages, never a traceback."""

from flask import abort

from app import create_app
from tests.conftest import TEST_CONFIG
from tests.support.waiting import free_port


def test_healthz_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.get_json()
    assert body["status"] == "ok"
    assert body["checks"]["postgres"]["ok"] and body["checks"]["redis"]["ok"]


def test_healthz_503_names_redis_when_it_is_unreachable():
    application = create_app(dict(TEST_CONFIG, REDIS_URL=f"redis://127.0.0.1:{free_port()}/15"))
    response = application.test_client().get("/healthz")
    assert response.status_code == 503
    body = response.get_json()
    assert body["failing"] == ["redis"]
    assert body["checks"]["postgres"]["ok"] is True
    assert body["checks"]["redis"]["ok"] is False and body["checks"]["redis"]["error"]


def test_healthz_503_names_postgres_when_it_is_unreachable():
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing"
    application = create_app(dict(TEST_CONFIG, SQLALCHEMY_DATABASE_URI=url))
    response = application.test_client().get("/healthz")
    assert response.status_code == 503
    assert response.get_json()["failing"] == ["postgres"]


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
