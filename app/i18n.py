"""The languages Hato speaks, and locale-aware formatting of instants, ages and numbers.

The catalogs live in translations/<language>/LC_MESSAGES/messages.po (English is the source
language, so en's entries repeat their msgids; `make i18n` keeps both in step). Only the .po files are
in git: catalog_problems() is the start-up check that their compiled .mo files exist and are not older,
so that no process speaks English to a Japanese user without a word. A stored locale
(ja-jp, en-gb, pt-br) speaks the UI language of its first part when Hato has one, else none, and
callers fall back along Accept-Language and DEFAULT_LOCALE (app/web/i18n.py). Formatting takes the
locale and the zone explicitly, so workers rendering e-mail format exactly as pages do.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache
from pathlib import Path

from babel import Locale
from babel.dates import DateTimePattern, format_skeleton, format_timedelta, parse_pattern
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import format_decimal

TRANSLATIONS_DIR = Path(__file__).resolve().parent.parent / "translations"
CATALOGS_COMMAND = "python -m app.devstack catalogs"  # compiles every .po into its .mo (hato-migrate runs it)
LANGUAGES = ("en", "ja")  # the UI languages with a complete catalog; the first is the source language
LANGUAGE_NAMES = {"en": "English", "ja": "日本語"}  # each in its own language, as language pickers show them
RECENT = timedelta(days=7)  # younger than this reads "3 minutes ago"; older, a date
# CLDR puts a space between a number and a Japanese unit ("3 分前"); Japanese text has none.
_CJK_GAP = re.compile(r"(?<=\d)\s+(?=[\u3040-\u30ff\u4e00-\u9fff])")


def ui_language(locale: str | None) -> str | None:
    """The UI language a stored or requested locale speaks (ja-JP → ja), or None when Hato has none for it."""
    language = (locale or "").replace("_", "-").split("-")[0].strip().lower()
    return language if language in LANGUAGES else None


def language_or_default(locale: str | None, default_locale: str) -> str:
    """The UI language of locale, else of the default locale, else the source language."""
    return ui_language(locale) or ui_language(default_locale) or LANGUAGES[0]


def _tidy(text: str, locale: str) -> str:
    return _CJK_GAP.sub("", text) if locale == "ja" else text


@lru_cache(maxsize=32)
def _locale(locale: str) -> Locale:
    """The parsed locale (Babel parses a string again on every call; a page formats a hundred times)."""
    return Locale.parse(locale)


@lru_cache(maxsize=32)
def _datetime_pattern(locale: str, weekday: bool) -> DateTimePattern:
    """The locale's medium date (with or without weekday) and short time, joined the locale's way."""
    parsed = _locale(locale)
    date = parsed.datetime_skeletons["yMMMEd" if weekday else "yMMMd"].pattern
    time = parsed.time_formats["short"].pattern
    return parse_pattern(parsed.datetime_formats["medium"].format(time, date))


def local_datetime(value: datetime, zone: tzinfo, locale: str, weekday: bool = True) -> str:
    """An instant to the minute in zone, the locale's way ("Mon, Nov 30, 2026, 9:05 AM JST" in English)."""
    local = value.astimezone(zone)
    joined = _datetime_pattern(locale, weekday).apply(local, _locale(locale))
    return f"{joined} {local.tzname()}"  # the zone's own abbreviation (JST), which CLDR lacks for most zones


def numeric_datetime(value: datetime, zone: tzinfo) -> str:
    """An instant as operators scan it in tables, the same in every language: 2026-11-30 09:05 JST."""
    return value.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def utc_datetime(value: datetime) -> str:
    """The instant in UTC, shown on hover beside a local time: 2026-11-30 00:05:00 UTC."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def relative(value: datetime, zone: tzinfo, locale: str, now: datetime | None = None, just_now: object = "") -> str:
    """How long ago value was ("3 minutes ago" / "3分前") within a week; older ones get a local date.

    just_now is what under a minute reads (from the catalog, lazily: CLDR has no such phrase).
    """
    now = now or datetime.now(UTC)
    age = now - value
    if age < timedelta(minutes=1):
        return str(just_now) or format_timedelta(-age, add_direction=True, locale=_locale(locale))
    if age < RECENT:
        return _tidy(format_timedelta(-age, add_direction=True, threshold=1, locale=_locale(locale)), locale)
    local = value.astimezone(zone)
    skeleton = "MMMd" if local.year == now.astimezone(zone).year else "yMMMd"
    return format_skeleton(skeleton, local, locale=_locale(locale))


def number(value: int | float, locale: str) -> str:
    """A count with the locale's grouping (12,345)."""
    return format_decimal(value, locale=_locale(locale))


# --- compiled catalogs ------------------------------------------------------------------------------


def stale_catalogs(directory: Path | None = None) -> dict[Path, str]:
    """Each language's compiled catalog (.mo) that is missing or older than its .po, and which of the two."""
    directory = directory or TRANSLATIONS_DIR
    stale = {}
    for language in LANGUAGES:
        source = directory / language / "LC_MESSAGES" / "messages.po"
        target = source.with_suffix(".mo")
        if not target.exists():
            stale[target] = "missing"
        elif target.stat().st_mtime < source.stat().st_mtime:
            stale[target] = f"older than {source.name}"
    return stale


def compile_catalog(target: Path) -> None:
    """Write target (a .mo) from the .po beside it; a process starting meanwhile reads the old file or the new."""
    with target.with_suffix(".po").open("rb") as handle:
        catalog = read_po(handle, locale=target.parent.parent.name)
    partial = target.with_name(f".{os.getpid()}.{target.name}")  # hidden, and ignored by git as *.mo
    with partial.open("wb") as handle:
        write_mo(handle, catalog, use_fuzzy=False)
    os.replace(partial, target)


def compile_stale_catalogs(directory: Path | None = None) -> list[Path]:
    """Compile every catalog that is missing or older than its .po; return the ones written."""
    written = list(stale_catalogs(directory))
    for target in written:
        compile_catalog(target)
    return written


def catalog_problems(dev_mode: bool, directory: Path | None = None) -> list[str]:
    """Why this process would speak English (or old wording) to its users: compiled catalogs missing or stale.

    In dev mode (make run and make test: the developer's own checkout) they are compiled here instead. A
    production process never writes into its code (the units mount it read-only): it refuses, naming
    the command that compiles them.
    """
    directory = directory or TRANSLATIONS_DIR
    consequence = {
        "missing": "would be in English",
        "older than messages.po": "would keep the old wording, and anything new would be in English",
    }
    problems = []
    for target, state in stale_catalogs(directory).items():
        language, reason = target.parent.parent.name, state
        if dev_mode:
            try:
                compile_catalog(target)
                continue
            except OSError as exc:
                reason += f" and cannot be compiled here ({exc.strerror})"
        if language == LANGUAGES[0]:
            continue  # the source language: without its .mo, gettext answers with the msgid, the same English
        problems.append(
            f"{target.relative_to(directory.parent)} is {reason}: pages, e-mail and messages for users who read "
            f"{_locale(language).english_name} {consequence[state]}; compile the catalogs with `{CATALOGS_COMMAND}`"
        )
    return problems
