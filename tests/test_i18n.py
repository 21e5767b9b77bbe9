"""The catalogs are complete in both languages, and no user-visible English bypasses them."""

from __future__ import annotations

import pytest
from babel.messages.checkers import checkers

from app.devstack import catalogs
from app.i18n import LANGUAGES
from tests.support import i18n_scan


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


def test_make_i18n_compiles_a_catalog_newer_than_its_binary(tmp_path, monkeypatch):
    source = catalogs.po_path("ja")
    monkeypatch.setattr(catalogs, "po_path", lambda language: tmp_path / language / "messages.po")
    for language in LANGUAGES:
        (tmp_path / language).mkdir()
        (tmp_path / language / "messages.po").write_bytes(source.read_bytes() if language == "ja" else b"")
    written = catalogs.compile_all()
    assert {p.name for p in written} == {"messages.mo"} and len(written) == 2
    assert catalogs.compile_all() == []  # fresh binaries are left alone
