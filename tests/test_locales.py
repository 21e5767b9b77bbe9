"""The one template choice along the locale chain (app/locales.py pick_for_chain), shared by e-mail/push,
digests and aggregation."""

from __future__ import annotations

from app.digests import rendering as digest_rendering
from app.digests.templates import pick as pick_digest
from app.locales import locale_chain, pick_for_chain


def test_the_first_locale_of_the_chain_that_has_one_wins():
    chain = locale_chain("pt-BR", "en")
    assert pick_for_chain({"en": "E", "pt": "P", "pt-br": "B"}, chain) == "B"
    assert pick_for_chain({"en": "E", "pt": "P"}, chain) == "P"
    assert pick_for_chain({"en": "E", "fr": "F"}, chain) == "E"


def test_nothing_along_the_chain_gives_the_fallback():
    assert pick_for_chain({"fr": "F"}, locale_chain("pt-BR", "en")) is None
    assert pick_for_chain({"fr": "F"}, locale_chain("pt-BR", "en"), "built-in") == "built-in"
    assert pick_for_chain({}, []) is None


def test_digests_fall_back_to_the_built_in_wording():
    ja = digest_rendering.DigestTemplate("件名", "本文", "<p>本文</p>")
    assert pick_digest({"ja": ja}, "ja-JP", "en") is ja
    assert pick_digest({"ja": ja}, "fr", "en") is digest_rendering.DEFAULT_TEMPLATE
