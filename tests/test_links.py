"""The same-site link rule (app/links.py), checked against a WHATWG URL parser, the standard browsers implement.

ada-url is the parser Node.js uses; a link we accept must resolve to our own origin in it, as sent and
after every round of percent-decoding that some code on the way might do once too often.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import ada_url
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.limits import LINK_MAX
from app.links import SHAPE_PATTERN, same_site_path

BASE = "https://app.example/inbox/page"

KNOWN_BYPASSES = [
    # the list
    "//x",
    "/\\x",
    "/%09/x",
    "/\t/x",
    "\\/x",
    "https:x",
    "/%2F%2Fx",
    # control characters, raw and encoded, anywhere
    "/\x00x",
    "/x\x7f",
    "\x01/x",
    "/\n/x",
    "/\r/x",
    "/%0A/x",
    "/%0d/x",
    "/x%00",
    "/\x85x",
    # overlong and invalid UTF-8 behind percent signs ("/" is 0x2F; C0 AF and E0 80 AF are overlong forms)
    "/%C0%AF/x",
    "/%C0%AFx",
    "/%E0%80%AF/x",
    "/%C0%AE%C0%AE/",
    "/%FF",
    # variants of the same tricks
    "/%5Cx",
    "/%5C%5Cx",
    "/%252F%252Fx",
    "/%25252F%25252Fx",
    "%2F%2Fx",
    "///x",
    "//\tx",
    "/\\/x",
    "\\\\x",
    " /x",
    "/x ",
    "/\u3000/x",
    "/\u2028/x",
    # solidi that NFKC folds to "/" or "\\" (fullwidth, small), raw and percent-encoded
    "/\uff0f\uff0fx",
    "/\uff3cx",
    "/\ufe68x",
    "/%EF%BC%8F%EF%BC%8Fx",
    "javascript:alert(1)",
    "JavaScript:alert(1)",
    "data:text/html,x",
    "http://evil.example/",
    "https://evil.example",
    "x/y",
    "x",
    "",
    # cases the inbox's own copy of the rule was tested with
    "https://x",
    "/\nevil",
    "/ok\x7f",
]

ORDINARY_LINKS = [
    "/",
    "/inbox",
    "/orders/42?tab=items#c3",
    "/search?q=a%20b",
    "/search?q=a+b&page=2",
    "/files/%E6%97%A5%E6%9C%AC",
    "/日本語/パス",
    "/a//b",
    "/a:b",
    "/a/../b",
    "/reservations/310#comment-12",
    "/%25",
    "/a/b?c=d#e",
]


def resolves_here(link: str) -> bool:
    """Whether a browser following link from a page of ours stays on our origin."""
    try:
        url = ada_url.URL(link, base=BASE)
    except ValueError:
        return True  # a browser cannot follow what it cannot parse
    return url.protocol == "https:" and url.host == "app.example"


@pytest.mark.parametrize("link", KNOWN_BYPASSES)
def test_known_bypasses_are_refused(link):
    assert same_site_path(link) is None


@pytest.mark.parametrize("link", ORDINARY_LINKS)
def test_ordinary_paths_are_kept_as_sent(link):
    assert same_site_path(link) == link


def test_values_that_are_not_text_or_too_long_are_refused():
    assert same_site_path(None) is None
    assert same_site_path(42) is None
    assert same_site_path(b"/inbox") is None
    assert same_site_path("/" + "a" * LINK_MAX) is None
    assert same_site_path("/" + "a" * (LINK_MAX - 1)) is not None


# Pieces that make URL parsers do surprising things, few enough that generated strings combine them often,
# and most strings start like a path (so they get past the first check and exercise the rest).
TRICKY = st.sampled_from(
    ["/", "\\", "\t", "\n", " ", "\x00", "\x85", "\u3000", "%", "2F", "5C", "09", "0A", "25", "C0", "AF",
     ":", "x", "https:", "%E3%81%82"]
)  # fmt: skip
PIECES = st.lists(TRICKY, max_size=8).map("".join)
LINKS = st.one_of(PIECES, PIECES.map(lambda rest: "/" + rest), st.text(max_size=40))


@settings(max_examples=2000, deadline=None)
@given(LINKS)
@example("/%252F%252Fevil.example")
@example("/%2F\\evil.example")
def test_an_accepted_link_stays_on_the_site_however_often_it_is_decoded(link):
    accepted = same_site_path(link)
    if accepted is None:
        return
    assert accepted == link
    decoded = link
    for _ in range(4):
        assert resolves_here(decoded), decoded
        assert resolves_here(decoded.replace("\\", "/")), decoded
        decoded = unquote(decoded, errors="replace")


SEGMENT = st.text(
    alphabet=st.characters(
        # also without the solidi NFKC folds to "/" or "\\" (a path may not start with them)
        codec="utf-8",
        exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp"),
        exclude_characters="/\\?#%\x85\uff0f\uff3c\ufe68",
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=500, deadline=None)
@given(st.lists(SEGMENT, min_size=1, max_size=5), st.one_of(st.none(), SEGMENT))
def test_any_plain_path_with_a_query_is_accepted(segments, query):
    link = "/" + "/".join(segments) + (f"?q={query}" if query else "")
    assert same_site_path(link) == link


@settings(max_examples=300, deadline=None)
@given(LINKS)
def test_the_rule_is_idempotent(link):
    once = same_site_path(link)
    assert same_site_path(once) == once


@settings(max_examples=500, deadline=None)
@given(st.from_regex(SHAPE_PATTERN, fullmatch=True).filter(lambda link: "%" not in link))
def test_the_api_spec_pattern_describes_the_rule(link):
    """Without percent signs (checked after decoding as well) the spec's pattern and the rule agree."""
    assert len(link) > LINK_MAX or same_site_path(link) == link


@pytest.mark.parametrize("link", KNOWN_BYPASSES)
def test_the_spec_pattern_or_the_decoding_refuses_every_bypass(link):
    assert not re.fullmatch(SHAPE_PATTERN, link) or "%" in link
