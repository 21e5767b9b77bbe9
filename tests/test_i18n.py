"""The catalogs are complete in both languages, no user-visible English bypasses them, and none is served silently."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.checkers import checkers
from babel.support import Translations

from app.devstack import catalogs
from app.i18n import (
    CATALOGS_COMMAND,
    LANGUAGES,
    TRANSLATIONS_DIR,
    catalog_problems,
    compile_stale_catalogs,
    stale_catalogs,
)
from tests.support import i18n_scan

ROOT = TRANSLATIONS_DIR.parent


def test_no_user_visible_english_outside_the_catalogs():
    findings = i18n_scan.scan()
    assert not findings, "translatable text outside the catalogs:\n" + "\n".join(map(str, findings[:80]))


def test_both_catalogs_are_complete_and_match_the_code():
    problems = catalogs.problems()
    assert not problems, "\n".join(problems[:80])


@pytest.mark.parametrize("language", LANGUAGES)
def test_translations_keep_every_placeholder_and_plural_form(language):
    catalog = catalogs.read(language)
    expected_forms = {"en": 2, "ja": 1}[language]
    assert catalog.num_plurals == expected_forms
    errors = []
    for message in catalog:
        if not message.id:
            continue
        if message.pluralizable:
            assert len(message.string) == expected_forms, message.id
        for checker in checkers:
            try:
                checker(catalog, message)
            except Exception as exc:  # babel's TranslationError, with the message's own words
                errors.append(f"{message.id!r}: {exc}")
    assert not errors, "\n".join(errors)


def test_the_scanner_catches_english_in_each_kind_of_file(tmp_path, monkeypatch):
    monkeypatch.setattr(i18n_scan, "ROOT", tmp_path)
    (tmp_path / "page.html").write_text(
        '<h1>Mark all read</h1><h2>{{ _("Fine") }}</h2><button aria-label="Close it">×</button>'
        '{{ macro("Save changes") }}{{ _("Also fine %(n)s", n=count) }}<p>{{ value }} · 42</p>',
        encoding="utf-8",
    )
    (tmp_path / "mod.py").write_text(
        "from flask import flash\nfrom flask_babel import gettext\n"
        'LABELS = {"email": "E-mail address"}\n'
        'def view():\n    flash("Saved your changes.")\n    flash(gettext("Fine."))\n'
        '    raise Refused(f"Too many {n} items")\n',
        encoding="utf-8",
    )
    (tmp_path / "app.js").write_text('el.textContent = "Sign in again";\nel.className = "toast toast--x";\n')
    found = {f.text for f in i18n_scan.scan([tmp_path / "page.html", tmp_path / "mod.py", tmp_path / "app.js"])}
    assert found == {
        "Mark all read",
        "Close it",
        "Save changes",
        "E-mail address",
        "Saved your changes.",
        "Too many \x00 items",
        "Sign in again",
    }


def _translations(tmp_path: Path, compiled: bool) -> Path:
    """A copy of the catalogs under tmp_path/translations; compiled: with fresh .mo files beside them."""
    directory = tmp_path / "translations"
    for language in LANGUAGES:
        target = directory / language / "LC_MESSAGES" / "messages.po"
        target.parent.mkdir(parents=True)
        shutil.copyfile(TRANSLATIONS_DIR / language / "LC_MESSAGES" / "messages.po", target)
    if compiled:
        assert len(compile_stale_catalogs(directory)) == len(LANGUAGES)
    return directory


def _age(path: Path, seconds: float) -> None:
    then = path.stat().st_mtime - seconds
    os.utime(path, (then, then))


# The real start-up (wsgi.py: the web app's, and the worker's and sweeper's through `flask --app wsgi`), with
# the catalogs read from a copy whose state each test sets.
START = "import pathlib, sys, app.i18n; app.i18n.TRANSLATIONS_DIR = pathlib.Path(sys.argv.pop()); "


def _start(directory: Path, code: str = "import wsgi", dev: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "HATO_DEV", "HATO_TEST")}
    env.update(SECRET_KEY="r" * 48, HATO_DEV="1" if dev else "0")
    argv = [sys.executable, "-c", START + code, str(directory)]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_a_start_without_compiled_catalogs_refuses_and_names_the_command(tmp_path):
    directory = _translations(tmp_path, compiled=False)
    started = _start(directory)
    assert started.returncode == 3, started.stderr
    assert "Hato is refusing to start" in started.stderr
    assert (
        "translations/ja/LC_MESSAGES/messages.mo is missing: pages, e-mail and messages for users who read "
        "Japanese would be in English" in started.stderr
    )
    assert f"`{CATALOGS_COMMAND}`" in started.stderr
    assert "translations/en/" not in started.stderr  # English needs no catalog: the msgids are its text
    assert list(directory.rglob("*.mo")) == []  # a production process never writes into its code


def test_a_start_with_a_catalog_older_than_its_po_refuses(tmp_path):
    directory = _translations(tmp_path, compiled=True)
    _age(directory / "ja" / "LC_MESSAGES" / "messages.mo", 60)  # the .po changed (a deploy) since it was compiled
    started = _start(directory)
    assert started.returncode == 3, started.stderr
    assert "translations/ja/LC_MESSAGES/messages.mo is older than messages.po" in started.stderr
    assert "translations/en/" not in started.stderr


def test_a_start_with_fresh_catalogs_goes_ahead(tmp_path):
    started = _start(_translations(tmp_path, compiled=True))
    assert started.returncode == 0, started.stderr
    assert "refusing" not in started.stderr


@pytest.mark.parametrize("command", [["worker", "--burst"], ["sweep", "--once"]])
def test_the_worker_and_the_sweeper_refuse_without_compiled_catalogs_too(tmp_path, command):
    code = f"from flask.cli import main; sys.argv = ['flask', '--app', 'wsgi', *{command!r}]; main()"
    started = _start(_translations(tmp_path, compiled=False), code)
    assert started.returncode == 3, started.stderr[-2000:]
    assert "translations/ja/LC_MESSAGES/messages.mo is missing" in started.stderr


def test_dev_mode_compiles_missing_and_stale_catalogs_at_start(tmp_path):
    directory = _translations(tmp_path, compiled=True)
    (directory / "en" / "LC_MESSAGES" / "messages.mo").unlink()
    _age(directory / "ja" / "LC_MESSAGES" / "messages.mo", 60)
    started = _start(directory, dev=True)
    assert started.returncode == 0, started.stderr
    assert stale_catalogs(directory) == {}
    ja = catalogs.read("ja")
    message = next(m for m in ja if m.id and isinstance(m.id, str) and m.string)
    assert Translations.load(str(directory), ["ja"]).gettext(message.id) == message.string


def test_dev_mode_still_refuses_when_it_cannot_compile(tmp_path):
    directory = _translations(tmp_path, compiled=False)
    for language in LANGUAGES:  # where the new file would be written is taken
        (directory / language / "LC_MESSAGES" / f".{os.getpid()}.messages.mo").mkdir()
    [found] = catalog_problems(dev_mode=True, directory=directory)
    assert found.startswith("translations/ja/LC_MESSAGES/messages.mo is missing and cannot be compiled here")
    assert CATALOGS_COMMAND in found


def test_make_i18n_compiles_only_catalogs_newer_than_their_binary(tmp_path):
    directory = _translations(tmp_path, compiled=True)
    assert compile_stale_catalogs(directory) == []  # fresh binaries are left alone
    _age(directory / "en" / "LC_MESSAGES" / "messages.mo", 60)
    assert compile_stale_catalogs(directory) == [directory / "en" / "LC_MESSAGES" / "messages.mo"]
    assert catalogs.compile_all() == []  # make test compiled the real ones before the run


def test_the_deploy_compiles_the_catalogs_before_anything_starts_the_app():
    unit = (ROOT / "deploy" / "systemd" / "hato-migrate.service").read_text(encoding="utf-8")
    commands = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert CATALOGS_COMMAND in commands[0], commands  # `db upgrade` imports wsgi, which would refuse without them
