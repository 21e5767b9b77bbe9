"""README.md stays a short front door whose links reach the docs/ site (make lint builds the site with --strict)."""

from __future__ import annotations

import re

from tests.support.docs import ROOT, doc_page

# Issue 33: the front door holds what Hato is, the two commands, a ten-line example and where to read on.
README_MAX_LINES = 250


def test_the_readme_is_a_short_front_door_that_starts_with_the_two_commands():
    readme = doc_page("README.md")
    lines = readme.splitlines()
    assert len(lines) <= README_MAX_LINES, "move the new section into docs/ (mkdocs.yml's nav) and link it"
    assert lines[0].split()[:2] == ["make", "run"] and lines[1].split()[:2] == ["make", "test"]


def test_every_page_the_readme_links_exists_and_every_docs_page_is_in_the_nav():
    links = re.findall(r"\]\((docs/[^)#]*)", doc_page("README.md"))
    assert links and [link for link in links if not (ROOT / link).exists()] == []
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = [path.name for path in sorted((ROOT / "docs").glob("*.md"))]
    assert [page for page in pages if f": {page}\n" not in nav] == []
    assert {link.removeprefix("docs/") for link in links} >= set(pages)
