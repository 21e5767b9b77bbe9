"""The preference screen names a tenant's own defaults where they apply (issue 32): in a cell that follows the type's
default, each of the member's tenants that set one says "Default for <tenant>: on/off"; never another tenant's,
never on a cell that is the member's own choice or a mandatory type's; the name escaped."""

from __future__ import annotations

from app.tenants import service as tenants
from tests.support.html import one, parse, texts


def _toggle(client, headers, type_, channel, enabled):
    return client.post("/preferences", data={"type": type_, "channel": channel, "enabled": enabled}, headers=headers)


def _setup(member, name="Acme <b>Inc</b>"):
    acme, _ = tenants.put_tenant(None, "acme", {"name": name})
    tenants.set_preferences(None, acme, [("comment", "email", True), ("reservation_approved", "push", False),
                                         ("security", "email", False)])  # fmt: skip
    other, _ = tenants.put_tenant(None, "globex", {"name": "Globex"})
    tenants.set_preferences(None, other, [("comment", "push", True)])
    tenants.set_member_tenants(None, member.id, ["acme"])


def test_a_member_of_one_tenant_sees_its_defaults_where_they_apply(client, member):
    _setup(member)

    html = client.get("/preferences").get_data(as_text=True)

    assert texts(html, "#pref-comment-email .pref-cell__tenant") == ["Default for Acme <b>Inc</b>: on"]
    assert texts(html, "#pref-reservation_approved-push .pref-cell__tenant") == ["Default for Acme <b>Inc</b>: off"]
    assert one(html, "#switch-comment-email")["aria-describedby"] == "tenants-comment-email"
    assert not parse(html).select("#pref-security-email .pref-cell__tenant")  # mandatory: no tenant decides
    assert not parse(html).select("#pref-comment-push .pref-cell__tenant")  # globex's: not a tenant of theirs
    assert "Globex" not in html and "<b>Inc</b>" not in html  # escaped


def test_the_members_own_choice_hides_it_and_returning_to_the_default_shows_it(client, member, htmx):
    _setup(member, name="Acme")

    cell = _toggle(client, htmx(), "comment", "email", "on").get_data(as_text=True)  # the type's default is off
    assert texts(cell, "#pref-comment-email .pref-cell__source") == ["Your choice"]
    assert not parse(cell).select(".pref-cell__tenant") and 'aria-describedby="tenants-' not in cell

    cell = _toggle(client, htmx(), "comment", "email", "off").get_data(as_text=True)  # back to the default
    assert texts(cell, "#pref-comment-email .pref-cell__source") == ["Default"]
    assert texts(cell, "#pref-comment-email .pref-cell__tenant") == ["Default for Acme: on"]


def test_a_member_of_no_tenant_sees_none(client, member):
    acme, _ = tenants.put_tenant(None, "acme", {"name": "Acme"})
    tenants.set_preferences(None, acme, [("comment", "email", True)])

    html = client.get("/preferences").get_data(as_text=True)

    assert not parse(html).select(".pref-cell__tenant") and "Acme" not in html


def test_a_member_of_two_tenants_sees_each(client, member):
    _setup(member, name="Acme")
    tenants.set_member_tenants(None, member.id, ["acme", "globex"])

    html = client.get("/preferences").get_data(as_text=True)

    assert texts(html, "#pref-comment-push .pref-cell__tenant") == ["Default for Globex: on"]
    assert texts(html, "#pref-comment-email .pref-cell__tenant") == ["Default for Acme: on"]
