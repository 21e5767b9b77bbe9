"""deploy/: the environment file names only real settings, and the units run the production page's commands."""

from __future__ import annotations

import re

from app.config import SETTINGS
from tests.support.docs import doc_page
from tests.support.processes import ROOT

DEPLOY = ROOT / "deploy"


def _directives(unit: str, name: str) -> list[str]:
    """Every value of one directive in a unit file (ExecStart may repeat, so no configparser)."""
    text = (DEPLOY / "systemd" / unit).read_text(encoding="utf-8")
    return re.findall(rf"^{name}=(.*)$", text, flags=re.MULTILINE)


def test_every_variable_in_the_example_environment_is_a_setting():
    names = {setting.name for setting in SETTINGS}
    text = (DEPLOY / "hato.env.example").read_text(encoding="utf-8")
    variables = re.findall(r"^([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE)
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "BASE_URL", "TRUSTED_PROXY_HOPS"} <= set(variables)
    assert set(variables) <= names, set(variables) - names


def test_units_run_the_production_commands_with_the_environment_file():
    commands = {
        "hato-web@.service": "gunicorn -c python:app.realtime.gunicorn_conf wsgi:app --bind 127.0.0.1:%i",
        "hato-worker@.service": "flask --app wsgi worker",
        "hato-sweeper@.service": "flask --app wsgi sweep",
        "hato-migrate.service": "flask --app wsgi db upgrade",
    }
    production = doc_page("production.md")
    for unit, command in commands.items():
        assert _directives(unit, "EnvironmentFile") == ["/etc/hato/hato.env"], unit
        assert any(command in line for line in _directives(unit, "ExecStart")), unit
        assert command.split(" --bind")[0] in production, f"docs/production.md lost {command!r}"


def test_the_nginx_upstreams_are_the_web_units_ports():
    site = (DEPLOY / "nginx" / "hato.conf").read_text(encoding="utf-8")
    assert re.findall(r"server 127\.0\.0\.1:(\d+);", site) == ["8000", "8001"]
    assert "proxy_read_timeout 75s" in site  # above the server's 25 s ping, so only dead sockets time out
