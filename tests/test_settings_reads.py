"""Every setting is read as app/config.py SETTINGS declares it, with its default written there and nowhere else.

The code is parsed (ast), not searched: a read is a subscript or .get/.setdefault with a literal key on
something called `config` (current_app.config, self.app.config, a `config` mapping). A read may not
restate a default (`config.get("X", 5)`, `config.get("X") or 5`), may not name a key that nothing
declares, and settings never come from os.environ outside app/config.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from flask import Flask

from app.config import SETTINGS, Config

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "app", ROOT / "jobs", ROOT / "wsgi.py")
KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")

# Keys read from a config mapping that are not Hato's settings, each with the reason it is not declared.
NOT_SETTINGS = {
    "RATELIMIT_STORAGE_URI": "Flask-Limiter's storage: app/extensions.py derives it from the final REDIS_URL",
    "RATELIMIT_KEY_PREFIX": "Flask-Limiter's key prefix: app/extensions.py derives it from the final REDIS_NAMESPACE",
    "BABEL_DEFAULT_LOCALE": "Flask-Babel's; app/web/i18n.py sets it from DEFAULT_LOCALE",
    "BABEL_TRANSLATION_DIRECTORIES": "Flask-Babel's; app/web/i18n.py points it at translations/",
    "SOCK_SERVER_OPTIONS": "flask-sock's; app/realtime/hub.py sets the ping interval and the shared reader thread",
    "DEMO_TENANT": "the demo host page's own little Flask app (app/devstack/demo_host.py), not Hato's",
    "DEMO_USER": "the demo host page's own little Flask app (app/devstack/demo_host.py), not Hato's",
    "MINT_MODE": "the demo host page's own little Flask app (app/devstack/demo_host.py), not Hato's",
    "TOKENS_ISSUED": "the demo host page's own little Flask app (app/devstack/demo_host.py), not Hato's",
    "TOKEN_TTL": "the demo host page's own little Flask app (app/devstack/demo_host.py), not Hato's",
}
# Where os.environ may be read: the settings themselves, and the dev supervisor, which prepares the
# environment of the processes it starts (DATABASE_URL, HATO_TEST_DB, …) before any app exists.
ENVIRON_READERS = (ROOT / "app" / "config.py", ROOT / "app" / "devstack")


def declared_keys() -> set[str]:
    """Every key Hato's config holds on purpose: SETTINGS, Config._derive's, Flask's own, the listed ones."""
    return {s.config_key for s in SETTINGS} | set(vars(Config({}))) | set(Flask.default_config) | set(NOT_SETTINGS)


def _is_config(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "config") or (
        isinstance(node, ast.Attribute) and node.attr == "config"
    )


def _is_os(node: ast.AST, name: str) -> bool:
    """os.<name> (or <name> imported from os); request.environ, the WSGI environment, is not the process's."""
    if isinstance(node, ast.Name):
        return node.id == name
    return (
        isinstance(node, ast.Attribute)
        and node.attr == name
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _literal_key(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and KEY.match(node.value):
        return node.value
    return None


def _config_call(node: ast.AST, method: str) -> str | None:
    """The literal key of `<config>.method("KEY", …)`, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and _is_config(node.func.value)
        and node.args
    ):
        return _literal_key(node.args[0])
    return None


def _environ_read(node: ast.AST) -> str | None:
    """The variable of os.environ["X"], os.environ.get("X", …) or os.getenv("X", …), else None."""
    if isinstance(node, ast.Subscript) and _is_os(node.value, "environ"):
        return _literal_key(node.slice)
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "get" and _is_os(func.value, "environ")) or _is_os(
            func, "getenv"
        ):
            return _literal_key(node.args[0])
    return None


def findings(source: str, where: str, known: set[str], environ_allowed: bool = False) -> list[str]:
    """What source does against the rule, one line each (where: the file and line prefix)."""
    found = []
    declared = {s.config_key for s in SETTINGS} | set(vars(Config({})))
    for node in ast.walk(ast.parse(source)):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        key = None
        if isinstance(node, ast.Subscript) and _is_config(node.value):
            key = _literal_key(node.slice)
        elif (key := _config_call(node, "get")) is not None:
            if len(node.args) > 1 or node.keywords:
                found.append(f"{line}: config.get({key!r}, …) restates a default; read config[{key!r}]")
        elif (key := _config_call(node, "setdefault")) is not None and key in declared:
            found.append(f"{line}: config.setdefault({key!r}, …) defaults a setting outside app/config.py")
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            first = _config_call(node.values[0], "get")
            if first is not None:
                found.append(f"{line}: config.get({first!r}) or … restates a default; read config[{first!r}]")
        if key is not None and key not in known:
            found.append(f"{line}: {key} is read but not declared in app/config.py SETTINGS")
        if not environ_allowed and (variable := _environ_read(node)):
            found.append(f"{line}: {variable} read from the environment; read it through Config")
    return found


def python_files() -> list[Path]:
    files: list[Path] = []
    for source in SOURCES:
        files += [source] if source.is_file() else sorted(source.rglob("*.py"))
    return files


def test_no_read_restates_a_default_or_names_an_undeclared_setting():
    known = declared_keys()
    found = []
    for path in python_files():
        environ_allowed = any(path == p or p in path.parents for p in ENVIRON_READERS)
        found += findings(path.read_text(), str(path.relative_to(ROOT)), known, environ_allowed)
    assert found == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('n = int(config.get("DELIVERY_SEND_CONCURRENCY", 1))', "restates a default"),
        ('n = current_app.config.get("BADGE_COUNTS", DEFAULT)', "restates a default"),
        ('s = self.app.config.get("VAPID_SUBJECT") or "mailto:ops@localhost"', "restates a default"),
        ('app.config.setdefault("REALTIME_FLUSH_THREADS", 2)', "defaults a setting outside app/config.py"),
        ('limit = current_app.config["WS_CONNECT_RATE_LIMT"]', "WS_CONNECT_RATE_LIMT is read but not declared"),
        ('ttl = config.get("PRESENCE_TTL")', "PRESENCE_TTL is read but not declared"),
        ('workers = int(os.environ.get("WEB_WORKERS", "2"))', "WEB_WORKERS read from the environment"),
    ],
)
def test_the_rule_catches_each_kind_of_read(source, expected):
    found = findings(source, "x.py", declared_keys())
    assert len(found) == 1 and expected in found[0], found


def test_plain_reads_of_declared_settings_pass():
    source = (
        'a = config["DELIVERY_SEND_CONCURRENCY"]\nb = current_app.config.get("METRICS_TOKEN")\nc = config["TESTING"]'
    )
    assert findings(source, "x.py", declared_keys()) == []


def test_every_listed_exception_is_still_read_somewhere():
    """An entry of NOT_SETTINGS that nothing reads any more is dead weight; drop it."""
    text = "\n".join(path.read_text() for path in python_files())
    assert [key for key in NOT_SETTINGS if f'"{key}"' not in text] == []


def test_nothing_after_config_changes_a_setting(monkeypatch):
    """No extension or blueprint sets a declared setting again (as realtime's own defaults once did)."""
    from app import create_app

    for setting in SETTINGS:
        monkeypatch.delenv(setting.name, raising=False)
    expected = vars(Config({}))
    config = create_app().config
    assert {s.config_key: config[s.config_key] for s in SETTINGS} == {
        s.config_key: expected[s.config_key] for s in SETTINGS
    }
