"""Locale tags: the form templates and audiences store them in, and the fallback chain a user's locale walks.

Tags are stored lower-case with "-" (pt-br, zh-hant-tw), whatever users and operators type (pt_BR,
PT-br). A user gets the template of their own locale, else of its language, else of DEFAULT_LOCALE.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

from flask_babel import gettext

from app.refusal import Refused

T = TypeVar("T")

LOCALE_RE = re.compile(r"^[a-z]{2,3}(-[a-z0-9]{2,8}){0,2}$")


def normalize_locale(locale: str) -> str:
    """Return the locale as it is stored (lower case, '-' separated), or raise Refused."""
    value = (locale or "").strip().replace("_", "-").lower()
    if not LOCALE_RE.match(value):
        raise Refused(gettext("The locale must look like en, pt-br or zh-hant-tw."))
    return value


def locale_chain(locale: str | None, default: str) -> list[str]:
    """Return the lookup order: the user's locale, its language, the default (lower-case, unique)."""
    chain: list[str] = []
    for candidate in ((locale or "").replace("_", "-"), (locale or "").replace("_", "-").split("-")[0], default):
        candidate = candidate.strip().lower()
        if candidate and candidate not in chain:
            chain.append(candidate)
    return chain


def pick_for_chain(by_locale: Mapping[str, T], chain: Iterable[str], fallback: T | None = None) -> T | None:
    """The value of the first locale along chain (from locale_chain) that by_locale has, else fallback."""
    return next((by_locale[locale] for locale in chain if locale in by_locale), fallback)


# --- operator content per locale (issue 33): type labels and descriptions, announcement titles and bodies ------------

Variants = Mapping[str, Mapping[str, str]]  # {"ja": {"title": "…", "body": "…"}}: a row's `locales` column


def localized(base: Mapping[str, T], variants: Variants | None, chain: Iterable[str]) -> dict[str, T]:
    """base's fields, each from the first locale along chain whose variant has it filled, else base's own.

    Field by field: a Japanese title without a Japanese body shows the base body under the Japanese title.
    """
    along = [(variants or {})[locale] for locale in chain if (variants or {}).get(locale)]
    return {name: next((v[name] for v in along if v.get(name)), value) for name, value in base.items()}


def in_locale(row: Mapping, fields: Iterable[str], chain: Iterable[str]) -> dict:
    """A query row as a dict whose fields are in the reader's locale (localized above); `locales` stays as stored."""
    values = dict(row)
    return values | localized({name: values[name] for name in fields}, values.get("locales"), chain)


def clean_variants(variants: Variants | None, limits: Mapping[str, tuple[int, str]]) -> dict[str, dict[str, str]]:
    """The variants as stored: locales normalized, only the named fields, blanks dropped, each length checked.

    limits maps a field to (its maximum length, its name as the error message says it). Raises Refused.
    """
    cleaned: dict[str, dict[str, str]] = {}
    for raw_locale, fields in (variants or {}).items():
        locale = normalize_locale(raw_locale)
        kept = {}
        for name, value in (fields or {}).items():
            if name not in limits:
                raise Refused(gettext("A locale variant has no field %(name)s.", name=name))
            if not isinstance(value, str):
                raise Refused(gettext("A locale variant's fields are text."))
            if not value.strip():
                continue
            maximum, said = limits[name]
            if len(value) > maximum:
                raise Refused(
                    gettext(
                        "The %(field)s (%(locale)s) must have at most %(max)s characters.",
                        field=said,
                        locale=locale,
                        max=maximum,
                    )
                )
            kept[name] = value.strip() if name != "body" else value
        if kept:
            cleaned.setdefault(locale, {}).update(kept)
    return cleaned


def variant_sql(variants: str, field: str, base: str, locale: str) -> str:
    """SQL of a row's field in a reader's locale, as localized() does it: the variant for the locale (ja-jp), then for
    its language (ja), else the base column. variants: the jsonb column; locale: an SQL text expression, stored form."""
    return (f"coalesce(nullif({variants} -> {locale} ->> '{field}', ''), "
            f"nullif({variants} -> split_part({locale}, '-', 1) ->> '{field}', ''), {base})")  # fmt: skip
