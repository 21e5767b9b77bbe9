"""Read pages and fragments as HTML, not as strings: find elements by CSS selector, read their text.

Where structure matters (this cell of this row, the value of that field), a test parses the answer
and asks for the element, so markup that moves or gains an attribute does not break it and markup
that loses its meaning does.
"""

from __future__ import annotations

from bs4 import BeautifulSoup, Tag


def parse(markup: str | bytes) -> BeautifulSoup:
    """Parse a page or a fragment."""
    return BeautifulSoup(markup, "html.parser")


def one(markup, selector: str) -> Tag:
    """The single element selector matches (fails when there is none or more than one)."""
    found = (markup if isinstance(markup, Tag) else parse(markup)).select(selector)
    assert len(found) == 1, f"{selector!r} matched {len(found)} elements"
    return found[0]


def texts(markup, selector: str) -> list[str]:
    """The whitespace-normalised text of every element selector matches, in document order."""
    root = markup if isinstance(markup, Tag) else parse(markup)
    return [" ".join(element.get_text(" ").split()) for element in root.select(selector)]


def table_rows(markup, selector: str) -> list[list[str]]:
    """The cells' texts (th and td) of each body row of the table selector matches."""
    table = one(markup, selector)
    rows = table.select("tbody tr") or table.select("tr")
    return [[" ".join(cell.get_text(" ").split()) for cell in row.find_all(["th", "td"])] for row in rows]
