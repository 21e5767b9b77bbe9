"""Announcement bodies: Markdown rendered, plain text escaped, and every XSS vector left inert."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from app.announcements.markdown import ALLOWED_TAGS, render_body

VECTORS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '<a href="https://ok.example" onclick="alert(1)">x</a>',
    '<iframe src="https://evil.example"></iframe>',
    "<svg onload=alert(1)>",
    '![x](https://evil.example/x.png "t" onerror=alert(1))',
    "<style>body{display:none}</style>",
    '<div style="position:fixed">x</div>',
]


class _Elements(HTMLParser):
    """Collect every element and attribute the browser would build from the HTML."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


@pytest.mark.parametrize("vector", VECTORS)
@pytest.mark.parametrize("body_format", ["markdown", "plain"])
def test_vectors_are_inert(vector, body_format):
    html = str(render_body(f"Hello\n\n{vector}", body_format))
    for tag, attrs in _Elements(html).elements:
        assert tag in ALLOWED_TAGS, (vector, html)
        assert not any(name.startswith("on") or name == "style" for name in attrs), (vector, html)
        href = attrs.get("href", "")
        assert not href or href.startswith(("http://", "https://", "mailto:")), (vector, html)
    assert "<script" not in html.lower() and "<style" not in html.lower()


def test_markdown_features_survive():
    html = str(
        render_body(
            "# Title\n\nSome **bold**, *em*, `code` and [a link](https://example.com).\n\n- one\n- two\n\n> quoted",
            "markdown",
        )
    )
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html and "<em>em</em>" in html
    assert "<code>code</code>" in html and "<li>one</li>" in html and "<blockquote>" in html
    assert '<a href="https://example.com" rel="noopener noreferrer">a link</a>' in html


def test_plain_text_keeps_paragraphs_and_line_breaks():
    assert str(render_body("one\ntwo\n\nthree <b>", "plain")) == "<p>one<br>two</p><p>three &lt;b&gt;</p>"


def test_unknown_format_is_treated_as_plain():
    assert str(render_body("**x**", "html")) == "<p>**x**</p>"
