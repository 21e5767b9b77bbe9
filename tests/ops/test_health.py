"""GET /healthz: each dependency checked; 503 names the one that is down."""

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
    assert body["checks"]["redis"] == {"ok": False, "status": "failing"}


def test_healthz_503_names_postgres_when_it_is_unreachable():
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing"
    application = create_app(dict(TEST_CONFIG, SQLALCHEMY_DATABASE_URI=url))
    response = application.test_client().get("/healthz")
    assert response.status_code == 503
    assert response.get_json()["failing"] == ["postgres"]
