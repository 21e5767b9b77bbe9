"""`make i18n`: extract every translatable string, update each language's catalog, compile them.

Only the .po files are committed; the .mo files are built by `make run/test/bench` (and
`python -m app.devstack catalogs` in production), so a binary can never be stale in git.
English is the source language: its catalog repeats each msgid, so "no missing entry" means the
same thing in both. New Japanese entries arrive empty; tests/test_i18n.py fails until they are filled.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.pofile import read_po, write_po

from app.i18n import LANGUAGES, TRANSLATIONS_DIR, compile_stale_catalogs

ROOT = TRANSLATIONS_DIR.parent
DOMAIN = "messages"
KEYWORDS = {
    **DEFAULT_KEYWORDS,
    "lazy_gettext": None,
    "lazy_ngettext": (1, 2),
    "lazy_pgettext": ((1, "c"), 2),
}
# (directory, glob, extractor, options): Python modules and the Jinja templates (trimmed whitespace).
SOURCES = (
    ("app", "**.py", "python", {}),
    ("jobs", "**.py", "python", {}),
    ("templates", "**.html", "jinja2.ext:babel_extract", {"trimmed": "true"}),
)


def po_path(language: str) -> Path:
    """Where a language's catalog lives."""
    return TRANSLATIONS_DIR / language / "LC_MESSAGES" / f"{DOMAIN}.po"


def extract() -> Catalog:
    """Every translatable string in the code and templates, as a template catalog."""
    catalog = Catalog(project="Hato", copyright_holder="The Hato authors", fuzzy=False)
    for directory, pattern, method, options in SOURCES:
        found = extract_from_dir(
            ROOT / directory, method_map=[(pattern, method)], options_map={pattern: options}, keywords=KEYWORDS
        )
        for filename, lineno, message, comments, context in found:
            catalog.add(message, None, [(f"{directory}/{filename}", lineno)], auto_comments=comments, context=context)
    return catalog


def read(language: str) -> Catalog:
    """A language's catalog (empty if it has none yet)."""
    path = po_path(language)
    if not path.exists():
        return Catalog(locale=language, project="Hato", copyright_holder="The Hato authors", fuzzy=False)
    with path.open("rb") as handle:
        return read_po(handle, locale=language)


def update(template: Catalog) -> dict[str, int]:
    """Bring every catalog in step with template; return each language's count of untranslated entries."""
    untranslated = {}
    for language in LANGUAGES:
        catalog = read(language)
        created = catalog.creation_date
        catalog.update(copy.deepcopy(template), no_fuzzy_matching=True)  # update() adopts the template's entries
        catalog.creation_date = created  # the header changes only when a translator's content does
        catalog.obsolete.clear()
        if language == LANGUAGES[0]:
            for message in catalog:
                if message.id and not _translated(message):
                    message.string = message.id  # the source language says exactly what the code says
        else:
            _fill_from_parts(catalog, language)
        untranslated[language] = sum(1 for m in catalog if m.id and not _translated(m))
        path = po_path(language)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            write_po(handle, catalog, width=120, sort_output=True, include_previous=False)
    return untranslated


def _fill_from_parts(catalog: Catalog, language: str) -> None:
    """Fill untranslated entries from translations/<language>/parts/*.json ({msgid: msgstr, or [singular, plural]}).

    Parts let several people translate at once without editing the .po together; once folded in, delete them.
    """
    parts: dict = {}
    for path in sorted((TRANSLATIONS_DIR / language / "parts").glob("*.json")):
        parts.update(json.loads(path.read_text(encoding="utf-8")))
    for message in catalog:
        key = message.id if isinstance(message.id, str) else message.id[0]
        if message.id and not _translated(message) and key in parts:
            value = parts[key]
            message.string = tuple(value) if isinstance(message.id, tuple | list) and isinstance(value, list) else value


def compile_all() -> list[Path]:
    """Write each language's .mo beside its .po when missing or older; return the ones written."""
    return compile_stale_catalogs()


def problems(template: Catalog | None = None) -> list[str]:
    """What keeps the catalogs from being complete: entries missing, untranslated, fuzzy or not in the code."""
    template = template or extract()
    wanted = {_key(m) for m in template if m.id}
    found = []
    for language in LANGUAGES:
        catalog = read(language)
        have = {_key(m): m for m in catalog if m.id}
        found += [f"{language}: missing {key[0]!r}" for key in sorted(wanted - have.keys(), key=str)]
        found += [f"{language}: no longer in the code {key[0]!r}" for key in sorted(have.keys() - wanted, key=str)]
        for key, message in have.items():
            if message.fuzzy:
                found.append(f"{language}: fuzzy {key[0]!r}")
            elif not _translated(message):
                found.append(f"{language}: untranslated {key[0]!r}")
    return found


def _key(message) -> tuple:
    return (message.id if isinstance(message.id, str) else tuple(message.id), message.context)


def _translated(message) -> bool:
    strings = message.string if isinstance(message.string, tuple | list) else (message.string,)
    return all(s and s.strip() for s in strings)


def main() -> int:
    """Extract, update, compile; print what is left to translate."""
    untranslated = update(extract())
    for path in compile_all():
        print(f"compiled {path.relative_to(ROOT)}")
    for language, count in untranslated.items():
        print(f"{language}: {count} untranslated" if count else f"{language}: complete")
    return 1 if any(untranslated.values()) else 0
