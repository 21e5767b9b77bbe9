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


def _root(markup) -> Tag:
    """markup itself when it is already parsed, else its parse."""
    return markup if isinstance(markup, Tag) else parse(markup)


def _text(element: Tag) -> str:
    """The element's text with runs of whitespace made one space."""
    return " ".join(element.get_text(" ").split())


def one(markup, selector: str) -> Tag:
    """The single element selector matches (fails when there is none or more than one)."""
    found = _root(markup).select(selector)
    assert len(found) == 1, f"{selector!r} matched {len(found)} elements"
    return found[0]


def first(markup) -> Tag:
    """The fragment's first top-level element (fails when anything but whitespace comes before it)."""
    for node in parse(markup).contents:
        if isinstance(node, Tag):
            return node
        assert not str(node).strip(), f"{str(node)!r} comes before the first element"
    raise AssertionError("the markup has no element")


def texts(markup, selector: str) -> list[str]:
    """The whitespace-normalised text of every element selector matches, in document order."""
    return [_text(element) for element in _root(markup).select(selector)]


def attrs(markup, selector: str, name: str) -> list[str | None]:
    """Attribute name of every element selector matches, in document order (lists such as class joined by spaces)."""
    values = [element.get(name) for element in _root(markup).select(selector)]
    return [" ".join(value) if isinstance(value, list) else value for value in values]


def table_rows(markup, selector: str) -> list[list[str]]:
    """The cells' texts (th and td) of each body row of the table selector matches."""
    table = one(markup, selector)
    rows = table.select("tbody tr") or table.select("tr")
    return [[_text(cell) for cell in row.find_all(["th", "td"])] for row in rows]


def definitions(markup, selector: str) -> dict[str, str]:
    """The description list selector matches as {dt text: text of the dd that follows it}."""
    terms = one(markup, selector).find_all("dt", recursive=False)
    return {_text(term): _text(term.find_next_sibling("dd")) for term in terms}
