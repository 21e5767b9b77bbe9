"""Templates: live preview in the delivery sandbox, errors with lines, locale chain, push size, history."""

from __future__ import annotations

import html
import json
import re

import pytest
import sqlalchemy as sa

from app.delivery import rendering
from app.delivery.queries import Template
from app.extensions import db
from app.models import MessageTemplate, NotificationType, TemplateVersion
from app.push.payload import PUSH_LIMIT
from tests.factories import NotificationTypeFactory
from tests.support.html import attrs, one, parse, texts

URL = "/console/templates/comment/{channel}/{locale}"
INJECTIONS = [
    "{{ ''.__class__.__mro__ }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ request }}{{ config.items() }}",
    "{% for c in [].__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
    "{{ user|attr('__class__') }}",
    "{{ '{0.__class__}'.format(user) }}",
]


@pytest.fixture(autouse=True)
def comment_type():
    return NotificationTypeFactory(type="comment", label="Comment")


def preview(client, csrf, channel="email", locale="en", **fields):
    response = client.post(
        URL.format(channel=channel, locale=locale) + "/preview", headers={**csrf(), "HX-Request": "true"}, data=fields
    )
    assert response.status_code == 200
    return response.get_data(as_text=True)


def test_editor_page_renders_a_preview_with_debounced_htmx(client, operator):
    response = client.get(URL.format(channel="email", locale="en"))
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    for name in ("subject", "body_text", "body_html", "user_locale", "sample"):
        field = one(page, f"#template-form #{name}")
        assert field["hx-trigger"] == "keyup changed delay:400ms", name
        assert field["hx-post"] == "/console/templates/comment/email/en/preview", name
    frame = one(page, "#template-preview iframe")
    assert frame.has_attr("sandbox") and frame.has_attr("srcdoc")
    csp = response.headers["Content-Security-Policy"]
    assert "style-src 'self' 'unsafe-inline'" in csp and "script-src 'self';" in csp
    assert "frame-ancestors 'none'" in csp


def test_email_preview_renders_sample_data_in_a_sandboxed_iframe(client, csrf, operator):
    page = preview(
        client,
        csrf,
        subject="Hi {{ user.name }}",
        body_text="Room {{ data.room }}",
        body_html="<p>Room <b>{{ data.room }}</b> for {{ user.name }}</p>",
    )
    assert texts(page, "#preview-subject") == ["Hi Ada Lovelace"]
    assert attrs(page, "iframe", "sandbox") == [""]  # sandboxed, nothing allowed (no allow-scripts)
    document = one(page, "iframe")["srcdoc"]
    assert "<p>Room <b>4B</b> for Ada Lovelace</p>" in document
    assert "Unsubscribe from Comment e-mails" in document  # the real e-mail layout
    assert one(page, "#preview-text").get_text().startswith("Room 4B")  # the text part


def test_values_are_escaped_in_the_html_body(client, csrf, operator):
    sample = json.dumps({"user": {"name": "<script>alert(1)</script>"}, "notification": {}, "data": {}})
    page = preview(client, csrf, body_html="<p>{{ user.name }}</p>", sample=sample)
    document = one(page, "iframe")["srcdoc"]
    assert "<script>alert(1)</script>" not in document
    assert "&lt;script&gt;" in document


def test_syntax_error_is_shown_inline_with_its_line(client, csrf, operator):
    page = preview(client, csrf, subject="ok", body_text="line one\nline two {{ user.name }\nline three")
    assert "Text body, line 2: TemplateSyntaxError" in page
    assert "2 | line two {{ user.name }" in html.unescape(page)
    assert "<iframe" not in page


@pytest.mark.parametrize("attempt", INJECTIONS)
def test_injection_attempts_are_blocked_in_the_preview(client, csrf, operator, attempt):
    page = html.unescape(preview(client, csrf, subject="Hello", body_text=f"safe\n{attempt}"))
    assert "problem" in page and "cannot be sent or saved" in page
    assert any(word in page for word in ("SecurityError", "UndefinedError", "TemplateSyntaxError")), page
    assert "<class" not in page and "<iframe" not in page  # nothing rendered, no Python object leaked


@pytest.mark.parametrize("attempt", INJECTIONS)
def test_injection_attempts_fail_in_real_sends(app, attempt):
    """The delivery engine's own rendering refuses them (what workers call for every message)."""
    row_context = {"user": {"name": "Ada"}, "data": {}, "notification": {"title": "t"}}
    with pytest.raises(rendering.RenderError):
        rendering.render_string(attempt, row_context)
    with pytest.raises(rendering.RenderError):
        rendering.render_string(attempt, row_context, html=True)


def test_injection_in_a_saved_template_fails_the_real_email_render(app):
    from app.message_templates.preview import SAMPLE, sample_row

    row = sample_row(db.session.get(NotificationType, "comment"), "email", "en", SAMPLE)
    with pytest.raises(rendering.RenderError):
        rendering.render_email(row, Template("{{ cycler.__init__.__globals__ }}", "", ""), "http://x", "http://x/u")


def test_bad_sample_json_is_reported_with_its_line(client, csrf, operator):
    page = preview(client, csrf, subject="Hi", sample='{\n  "user": {"name": "Ada",}\n}')
    assert "sample data, line 2" in page


def _chain(page: str) -> list[tuple[str, str]]:
    """Each step of the locale chain: its locale and the text of its tag."""
    steps = parse(page).select(".console-chain__steps > li")
    return [(one(step, "code").get_text(), one(step, ".tag").get_text()) for step in steps]


def test_locale_fallback_chain(client, csrf, operator):
    db.session.add_all(
        [MessageTemplate(type="comment", channel="email", locale=loc, subject=loc) for loc in ("pt", "en")]
    )
    db.session.flush()
    page = preview(client, csrf, locale="en", subject="Hi", user_locale="pt-BR")
    assert _chain(page) == [("pt-br", "missing"), ("pt", "used"), ("en", "exists")]
    assert texts(page, ".console-chain > p") == ["A user with locale pt-BR gets: the pt template — not this one."]
    assert texts(page, ".console-chain > p code") == ["pt-BR", "pt"]
    page = preview(client, csrf, locale="de", subject="Hi", user_locale="de-AT")
    assert _chain(page) == [("de-at", "missing"), ("de", "used"), ("en", "exists")]


def test_push_payload_size_against_the_limit(client, csrf, operator):
    page = preview(client, csrf, channel="push", subject="{{ notification.title }}", body_text="Short body")
    match = re.fullmatch(r"([\d,]+) of 3,993 bytes", one(page, "#push-size").get_text())
    assert match and 0 < int(match.group(1).replace(",", "")) < 200
    assert '"title":"Reservation #310 was approved"' in one(page, "details pre").get_text()
    long = preview(client, csrf, channel="push", subject="T", body_text="é" * 2100)
    assert "over the 3,993-byte push limit" in long
    assert int(re.match(r"([\d,]+) of", one(long, "#push-size").get_text()).group(1).replace(",", "")) > PUSH_LIMIT


def test_in_app_preview_shows_title_and_body(client, csrf, operator):
    page = preview(
        client, csrf, channel="in_app", subject="New comment by {{ user.name }}", body_text="{{ data.room }}"
    )
    assert texts(page, "#preview-subject") == ["New comment by Ada Lovelace"] and texts(page, "#preview-text") == ["4B"]


def test_save_keeps_versions_and_restore(client, csrf, operator, audit_rows):
    url = URL.format(channel="email", locale="pt-BR")
    assert client.post(url, headers=csrf(), data={"subject": "v1", "body_text": "one"}).status_code == 302
    template = db.session.scalars(sa.select(MessageTemplate)).one()
    assert (template.locale, template.subject, template.updated_by) == ("pt-br", "v1", operator.id)
    assert client.post(url, headers=csrf(), data={"subject": "v2", "body_text": "two"}).status_code == 302
    assert client.post(url, headers=csrf(), data={"subject": "v2", "body_text": "two"}).status_code == 302
    versions = db.session.scalars(sa.select(TemplateVersion).order_by(TemplateVersion.id)).all()
    assert [v.subject for v in versions] == ["v1"]  # the unchanged third save kept nothing
    page = client.get(url).get_data(as_text=True)
    assert "Earlier versions" in page and texts(page, ".console-versions pre") == ["v1", "one"]

    response = client.post(f"/console/templates/{template.id}/versions/{versions[0].id}/restore", headers=csrf())
    assert response.status_code == 302
    db.session.refresh(template)
    assert (template.subject, template.body_text) == ("v1", "one")
    assert [v.subject for v in db.session.scalars(sa.select(TemplateVersion).order_by(TemplateVersion.id))] == [
        "v1",
        "v2",
    ]
    assert [e.action for e in audit_rows()] == ["template.save", "template.save", "template.restore"]
    assert audit_rows("template.restore")[0].before["subject"] == "v2"


def test_a_template_with_errors_is_not_saved(client, csrf, operator, audit_rows):
    url = URL.format(channel="email", locale="en")
    response = client.post(url, headers=csrf(), data={"subject": "{{ ''.__class__ }}", "body_text": "x"})
    assert response.status_code == 422
    assert "was not saved" in response.get_data(as_text=True)
    assert db.session.scalar(sa.select(sa.func.count()).select_from(MessageTemplate)) == 0
    assert audit_rows() == []


def test_unknown_type_channel_or_locale_is_404(client, operator):
    for path in (
        "/console/templates/nope/email/en",
        "/console/templates/comment/fax/en",
        "/console/templates/comment/email/not a locale!",
    ):
        assert client.get(path).status_code == 404, path


def test_open_form_validates_and_redirects(client, operator):
    response = client.get("/console/templates/open?type=comment&channel=push&locale=JA_jp")
    assert response.headers["Location"].endswith("/console/templates/comment/push/ja-jp")
    response = client.get("/console/templates/open?type=comment&channel=fax&locale=en", follow_redirects=True)
    assert "The channel must be one of" in response.get_data(as_text=True)


def test_push_preview_shows_an_iphone_and_an_android_rendering_of_the_phone_variant(client, csrf, operator):
    page = preview(client, csrf, channel="push", subject="{{ notification.title }}", body_text="Browser body",
                   mobile_title="📱 {{ notification.title }}", mobile_subtitle="Room {{ data.room }}",
                   mobile_body="")  # fmt: skip
    ios, android = one(page, "#preview-ios"), one(page, "#preview-android")
    assert ios.select_one(".console-phone__title").get_text() == "📱 Reservation #310 was approved"
    assert ios.select_one(".console-phone__subtitle").get_text() == "Room 4B"
    assert ios.select_one(".console-phone__body").get_text() == "Browser body"  # an empty phone body falls back
    assert android.select_one(".console-phone__subtitle") is None  # Android shows no subtitle
    assert '"title":"Reservation #310 was approved"' in one(page, "details pre").get_text()  # the browser's own
    broken = preview(client, csrf, channel="push", subject="T", body_text="B", mobile_body="{{ oops(")
    assert "mobile_body" in broken and parse(broken).select(".console-phone") == []


def test_the_phone_variant_is_saved_versioned_restored_and_kept_only_for_push(client, csrf, operator):
    url = URL.format(channel="push", locale="en")
    data = {"subject": "t1", "body_text": "b1", "mobile_title": "m1", "mobile_subtitle": "s1", "mobile_body": "mb1"}
    assert client.post(url, headers=csrf(), data=data).status_code == 302
    assert client.post(url, headers=csrf(), data={**data, "mobile_title": "m2"}).status_code == 302
    template = db.session.scalars(sa.select(MessageTemplate)).one()
    assert (template.mobile_title, template.mobile_subtitle, template.mobile_body) == ("m2", "s1", "mb1")
    (version,) = db.session.scalars(sa.select(TemplateVersion)).all()
    assert version.mobile_title == "m1"
    client.post(f"/console/templates/{template.id}/versions/{version.id}/restore", headers=csrf())
    db.session.refresh(template)
    assert template.mobile_title == "m1"

    email = URL.format(channel="email", locale="en")
    assert client.post(email, headers=csrf(), data={**data, "subject": "e"}).status_code == 302
    kept = db.session.scalars(sa.select(MessageTemplate).where(MessageTemplate.channel == "email")).one()
    assert (kept.mobile_title, kept.mobile_body) == ("", "")  # e-mail has no phone variant
    assert "mobile_title" not in client.get(email).get_data(as_text=True)
    assert 'name="mobile_title"' in client.get(url).get_data(as_text=True)


# --- previewing as a tenant's notification (issue 32, item 5) ------------------------------------------------


@pytest.fixture
def tenants():
    from app.tenants import service as tenant_service

    acme, _ = tenant_service.put_tenant(None, "acme", {
        "name": "Acme <Inc>", "logo_url": "https://cdn.acme.example/logo.png", "primary_color": "#1A73E8",
        "email_sender_name": "Acme \"via\" <Hato>", "reply_to": "support@acme.example"})  # fmt: skip
    tenant_service.put_tenant(None, "globex", {"name": "Globex", "logo_url": "https://cdn.globex.example/g.png",
                                               "primary_color": "#00aa00"})  # fmt: skip
    return acme


def test_the_email_editor_offers_every_tenant_and_posts_the_preview_on_change(client, operator, tenants):
    page = client.get(URL.format(channel="email", locale="en")).get_data(as_text=True)
    select = one(page, "#template-form select#tenant")
    assert select["hx-post"] == "/console/templates/comment/email/en/preview" and select["hx-trigger"] == "change"
    options = [(o["value"], o.get_text()) for o in parse(page).select("select#tenant option")]
    assert options == [
        ("", "No tenant (Hato's own look)"),
        ("acme", "Acme <Inc> (acme)"),
        ("globex", "Globex (globex)"),
    ]
    assert "Acme <Inc>" not in page and "Acme &lt;Inc&gt; (acme)" in page  # escaped in the page


def test_other_channels_offer_no_tenant(client, operator, tenants):
    for channel in ("push", "in_app"):
        page = client.get(URL.format(channel=channel, locale="en")).get_data(as_text=True)
        assert not parse(page).select("select#tenant"), channel


def test_the_preview_renders_with_the_chosen_tenants_branding_escaped(client, csrf, operator, tenants):
    page = preview(client, csrf, subject="Hi", body_text="B", tenant="acme")

    document = one(page, "iframe")["srcdoc"]
    assert '<img src="https://cdn.acme.example/logo.png" alt="Acme &lt;Inc&gt;" height="40">' in document
    assert "background: #1a73e8 !important" in document
    assert "cdn.globex.example" not in document
    assert texts(page, "#preview-from") == ['Acme "via" <Hato>'] and texts(page, "#preview-reply-to") == [
        "support@acme.example"
    ]
    assert "<Hato>" not in page  # the sender name is escaped in the fragment


def test_the_preview_without_a_tenant_has_the_default_look(client, csrf, operator, tenants):
    page = preview(client, csrf, subject="Hi", body_text="B", tenant="")

    document = one(page, "iframe")["srcdoc"]
    assert 'class="brand"' not in document and "!important" not in document
    assert not parse(page).select("#preview-from") and not parse(page).select("#preview-reply-to")


def test_a_tenant_colour_or_logo_stored_around_the_rules_is_not_rendered(client, csrf, operator, tenants):
    db.session.execute(sa.text("UPDATE tenants SET primary_color = 'red;}</style><script>x</script>', "
                               "logo_url = 'https://127.0.0.1/l.png' WHERE key = 'acme'"))  # fmt: skip

    document = one(preview(client, csrf, subject="Hi", body_text="B", tenant="acme"), "iframe")["srcdoc"]

    assert "<script>" not in document and "red;}" not in document and "127.0.0.1/l.png" not in document


def test_an_unknown_tenant_is_a_problem_in_the_preview_and_a_422_on_save(client, csrf, operator, tenants, audit_rows):
    page = preview(client, csrf, subject="Hi", body_text="B", tenant="nope")
    assert "There is no tenant with this key." in page and not parse(page).select("iframe")

    url = URL.format(channel="email", locale="en")
    response = client.post(url, headers=csrf(), data={"subject": "Hi", "body_text": "B", "tenant": "nope"})
    assert response.status_code == 422
    assert db.session.scalar(sa.select(sa.func.count()).select_from(MessageTemplate)) == 0
    assert audit_rows("template.save") == []


def test_saving_with_a_tenant_chosen_saves_the_wording_only(client, csrf, operator, tenants):
    url = URL.format(channel="email", locale="en")
    assert (
        client.post(url, headers=csrf(), data={"subject": "Hi", "body_text": "B", "tenant": "acme"}).status_code == 302
    )
    template = db.session.scalars(sa.select(MessageTemplate)).one()
    assert (template.subject, template.body_text, template.body_html) == ("Hi", "B", "")


def test_the_tenant_preview_needs_the_csrf_token(client, operator, tenants):
    url = URL.format(channel="email", locale="en") + "/preview"
    assert client.post(url, data={"tenant": "acme"}, headers={"HX-Request": "true"}).status_code == 400


def test_a_member_gets_no_tenant_preview(client, csrf, member, tenants):
    url = URL.format(channel="email", locale="en")
    assert client.get(url).status_code == 403
    assert client.post(url + "/preview", data={"tenant": "acme"}, headers=csrf()).status_code == 403
