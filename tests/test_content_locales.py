"""Operator content per locale (issue 33): the field-by-field fallback along a locale chain, and what is stored."""

from __future__ import annotations

import pytest

from app.locales import clean_variants, locale_chain, localized
from app.refusal import Refused

BASE = {"title": "Welcome", "body": "Hello everyone"}
LIMITS = {"title": (10, "title"), "body": (100, "body")}


def test_a_ja_jp_reader_gets_the_ja_variant_field_by_field():
    variants = {"ja": {"title": "ようこそ"}, "ja-jp": {}}
    chain = locale_chain("ja-JP", "en")
    assert chain == ["ja-jp", "ja", "en"]
    # The title is Japanese; the body has no Japanese and falls back to the base text.
    assert localized(BASE, variants, chain) == {"title": "ようこそ", "body": "Hello everyone"}


def test_the_most_specific_variant_wins_and_anything_missing_falls_back_to_the_base():
    variants = {"pt-br": {"title": "Bem-vindo"}, "pt": {"title": "Benvindo", "body": "Olá"}}
    assert localized(BASE, variants, locale_chain("pt-BR", "en")) == {"title": "Bem-vindo", "body": "Olá"}
    assert localized(BASE, variants, locale_chain("fr", "en")) == BASE
    assert localized(BASE, None, ["ja"]) == BASE
    assert localized(BASE, {"ja": {"title": ""}}, ["ja"]) == BASE  # an empty field is no variant


def test_variants_are_stored_normalized_without_blanks():
    stored = clean_variants({"ja_JP": {"title": " ようこそ ", "body": "  "}, "fr": {"title": ""}}, LIMITS)
    assert stored == {"ja-jp": {"title": "ようこそ"}}


@pytest.mark.parametrize(
    "variants",
    [
        {"ja": {"title": "x" * 11}},  # longer than the base field may be
        {"ja": {"subject": "x"}},  # not a field of this content
        {"not a locale": {"title": "x"}},
        {"ja": {"title": 3}},
    ],
)
def test_bad_variants_are_refused(app, variants):
    with app.test_request_context(), pytest.raises(Refused):
        clean_variants(variants, LIMITS)
