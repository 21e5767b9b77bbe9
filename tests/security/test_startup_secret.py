"""Attack: forge an admin session with the secret every copy shipped with; run a worker that can never send."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from flask import Flask
from flask.sessions import SecureCookieSessionInterface

from app.config import Config, check

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = "dev-insecure-change-me"


def _env(**overrides) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "HATO_DEV", "HATO_TEST")}
    env.update({k: v for k, v in overrides.items() if v is not None})
    return env


def _start(args: list[str], **env) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, env=_env(**env), capture_output=True, text=True, timeout=60)


def _forged_admin_cookie(secret: str) -> str:
    forger = Flask("forger")
    forger.secret_key = secret
    serializer = SecureCookieSessionInterface().get_signing_serializer(forger)
    return serializer.dumps({"_user_id": "1", "_fresh": True})


@pytest.mark.parametrize(
    "secret",
    [None, "", PUBLISHED, "test-secret", "changeme", "short-but-not-published", " " + PUBLISHED.upper() + " "],
)
def test_no_secret_a_published_one_or_a_short_one_is_a_reason_to_refuse(secret):
    env = _env(SECRET_KEY=secret)
    problems = check(vars(Config(env)), ())
    assert [p for p in problems if p.startswith("SECRET_KEY")], problems


def test_the_web_app_refuses_to_start_without_a_real_secret():
    # One process for the whole path (import wsgi → check → refusal, exit code 3); the values above are the
    # same check in this process (each process costs 3-10 s of the suite).
    started = _start([sys.executable, "-c", "import wsgi"], SECRET_KEY=" " + PUBLISHED.upper() + " ")
    assert started.returncode == 3, started.stderr
    assert "Hato is refusing to start" in started.stderr
    assert "SECRET_KEY" in started.stderr


@pytest.mark.parametrize("command", [["worker", "--burst"], ["sweep", "--once"]])
def test_the_worker_and_the_sweeper_refuse_too(command):
    flask = str(Path(sys.executable).with_name("flask"))
    started = _start([flask, "--app", "wsgi", *command], SECRET_KEY=PUBLISHED)
    assert started.returncode == 3, (started.returncode, started.stderr[-2000:])
    assert "SECRET_KEY is a published default" in started.stderr


def test_gunicorn_stops_instead_of_restarting_a_refused_worker():
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    started = _start([gunicorn, "--bind", "127.0.0.1:0", "--workers", "1", "wsgi:app"], SECRET_KEY=PUBLISHED)
    assert started.returncode != 0
    assert "Hato is refusing to start" in started.stderr


def test_a_lease_inside_the_margin_is_refused_with_the_setting_named():
    started = _start([sys.executable, "-c", "import wsgi"], SECRET_KEY="x" * 40, DELIVERY_LEASE_SECONDS="5")
    assert started.returncode == 3
    assert "DELIVERY_LEASE_SECONDS=5 must be more than LEASE_MARGIN_SECONDS=5" in started.stderr


def test_a_real_secret_starts_and_the_published_one_forges_nothing(app, client):
    started = _start([sys.executable, "-c", "import wsgi"], SECRET_KEY="r" * 48)
    assert started.returncode == 0, started.stderr
    # The app under test signs with its own key: a cookie signed with the published default is ignored.
    client.set_cookie("session", _forged_admin_cookie(PUBLISHED))
    response = client.get("/console/")
    assert response.status_code in (302, 401, 403)


def test_dev_mode_accepts_the_dev_secrets_make_run_and_make_test_set():
    assert _start([sys.executable, "-c", "import wsgi"], SECRET_KEY="test-secret", HATO_DEV="1").returncode == 0
