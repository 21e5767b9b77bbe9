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


def test_healthz_lists_the_providers_that_are_on_per_channel(client, app, monkeypatch, tmp_path):
    from tests.support.apns_server import make_key

    monkeypatch.setitem(app.config, "EMAIL_PROVIDER", "smtp")
    monkeypatch.setitem(app.config, "VAPID_PRIVATE_KEY", "")
    providers = client.get("/healthz").get_json()["providers"]
    assert providers["email"] == ["smtp", "smtp_fallback"] and "push" not in providers  # no VAPID, no phones

    key = tmp_path / "AuthKey.p8"
    make_key(key)
    for name, value in {"APNS_KEY_FILE": str(key), "APNS_KEY_ID": "KEY1234567", "APNS_TEAM_ID": "TEAM123456",
                        "APNS_TOPIC": "com.example.app"}.items():  # fmt: skip
        monkeypatch.setitem(app.config, name, value)
    assert client.get("/healthz").get_json()["providers"]["push"] == ["webpush", "apns"]


def test_healthz_names_providers_never_their_endpoints_or_keys(client, app, monkeypatch):
    monkeypatch.setitem(app.config, "SMTP_URL", "smtp://user:secret@mail.internal:2525")
    text = client.get("/healthz").get_data(as_text=True)
    for leaked in ("secret", "mail.internal", "2525", "user:"):
        assert leaked not in text
