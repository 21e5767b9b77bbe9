"""The documentation as the tests read it: README.md (the front door) and the pages of docs/ (mkdocs.yml)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def doc_page(name: str) -> str:
    """One page of docs/ (e.g. "configuration.md"), or "README.md" for the front door."""
    path = ROOT / name if name == "README.md" else DOCS / name
    return path.read_text(encoding="utf-8")


def doc_pages() -> dict[str, str]:
    """README.md and every docs/*.md page by name (README.md first)."""
    pages = {"README.md": doc_page("README.md")}
    pages.update({path.name: path.read_text(encoding="utf-8") for path in sorted(DOCS.glob("*.md"))})
    return pages


def docs_text() -> str:
    """README.md and every docs/ page, one after another: for checks that a sentence is documented somewhere."""
    return "\n\n".join(doc_pages().values())


def fenced_blocks(language: str) -> list[tuple[str, str, bool]]:
    """Every fenced block in language as (page, body, marked); marked: an HTML comment `<!-- run -->` precedes it."""
    pattern = re.compile(rf"(<!-- run -->\n)?^```{language}\n(.*?)^```$", re.S | re.M)
    return [(name, m.group(2), bool(m.group(1))) for name, text in doc_pages().items() for m in pattern.finditer(text)]
