"""Safe rendering of announcement bodies: plain text or Markdown, always sanitized HTML."""

from __future__ import annotations

from functools import lru_cache

import markdown
import nh3
from markupsafe import Markup, escape

BODY_FORMATS = ("plain", "markdown")

ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "a",
    "em",
    "strong",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "del",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}}
URL_SCHEMES = {"http", "https", "mailto"}


class _NoRawHtml(markdown.Extension):
    """Treat raw HTML in the source as text: operators write Markdown, not markup."""

    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 - Markdown's API name
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")


def sanitize(html: str) -> str:
    """Keep only the allow-listed tags and attributes; links get rel="noopener noreferrer"."""
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer",
        strip_comments=True,
    )


@lru_cache(maxsize=512)
def _render(body: str, body_format: str) -> str:
    if body_format == "markdown":
        html = markdown.markdown(body, extensions=[_NoRawHtml(), "sane_lists"], output_format="html")
    else:
        paragraphs = [p for p in body.replace("\r\n", "\n").split("\n\n") if p.strip()]
        html = "".join(f"<p>{'<br>'.join(escape(line) for line in p.split(chr(10)))}</p>" for p in paragraphs)
    # Sanitizing the Markdown output too is the second wall: a parser quirk must not become XSS.
    return sanitize(html)


def render_body(body: str | None, body_format: str | None = "plain") -> Markup:
    """Return the announcement body as safe HTML (Markdown rendered, plain text escaped)."""
    fmt = body_format if body_format in BODY_FORMATS else "plain"
    return Markup(_render(body or "", fmt))  # noqa: S704 - _render sanitizes with nh3 (an allow-list)


def announcement_html(value, body_format: str | None = None) -> Markup:
    """Jinja filter: `{{ a.body | announcement_html(a.body_format) }}` or `{{ a | announcement_html }}`."""
    if isinstance(value, str) or value is None:
        return render_body(value, body_format)
    get = value.get if hasattr(value, "get") else lambda name, default=None: getattr(value, name, default)
    return render_body(get("body", ""), body_format or get("body_format", "plain"))
