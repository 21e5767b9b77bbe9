"""Suppressions: prefix search with keyset pages, the reason shown, lifting audited."""

from __future__ import annotations

from app.extensions import db
from app.models import EmailSuppression
from tests.support.html import parse, table_rows, texts


def _add(*addresses, reason="bounce", detail="550 5.1.1 user unknown"):
    db.session.add_all([EmailSuppression(address=a, reason=reason, detail=detail) for a in addresses])
    db.session.flush()


def _addresses(page: str) -> list[str]:
    """The address column of the suppressions table, in order."""
    return texts(page, ".console-suppressions tbody tr > td.mono:first-child")


def test_search_by_prefix_shows_why(client, operator):
    _add("ada@example.com", "adam@example.com", "bob@example.com")
    _add("ad_min@example.com", reason="complaint", detail="feedback loop")
    page = client.get("/console/suppressions?q=ADA").get_data(as_text=True)
    # Address, reason, detail.
    assert [row[:3] for row in table_rows(page, ".console-suppressions")] == [
        ["ada@example.com", "bounce", "550 5.1.1 user unknown"],
        ["adam@example.com", "bounce", "550 5.1.1 user unknown"],
    ]
    # LIKE wildcards in the search are literal characters.
    assert _addresses(client.get("/console/suppressions?q=ad_").get_data(as_text=True)) == ["ad_min@example.com"]
    assert _addresses(client.get("/console/suppressions?q=zzz").get_data(as_text=True)) == []


def test_keyset_pages_cover_every_address_once(client, operator):
    _add(*[f"user{i:03d}@example.com" for i in range(120)])
    seen, url = [], "/console/suppressions?q=user"
    while url:
        page = client.get(url).get_data(as_text=True)
        seen += _addresses(page)
        more = parse(page).select_one(".load-more a")
        url = more["href"] if more else None
    assert seen == [f"user{i:03d}@example.com" for i in range(120)]


def test_lift_deletes_and_audits(client, csrf, operator, audit_rows):
    _add("ada@example.com")
    response = client.post(
        "/console/suppressions/lift", headers=csrf(), data={"address": "Ada@Example.com "}, follow_redirects=True
    )
    assert "ada@example.com can receive e-mail again" in response.get_data(as_text=True)
    assert db.session.get(EmailSuppression, "ada@example.com") is None
    (entry,) = audit_rows("suppression.lift")
    assert entry.target_id == "ada@example.com" and entry.before["reason"] == "bounce" and entry.after is None


def test_lifting_an_unknown_address_says_so(client, csrf, operator, audit_rows):
    response = client.post(
        "/console/suppressions/lift", headers=csrf(), data={"address": "nobody@example.com"}, follow_redirects=True
    )
    assert "is not suppressed" in response.get_data(as_text=True)
    assert audit_rows() == []
