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
