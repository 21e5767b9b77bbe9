"""Template lookup along the locale chain and the Jinja sandbox."""

from __future__ import annotations

import pytest

from app.delivery.queries import BatchRow, Template
from app.delivery.rendering import RenderError, pick_template, render_email, render_string
from app.locales import locale_chain


def row(**overrides) -> BatchRow:
    fields = dict(
        id=7,
        channel="email",
        attempts=0,
        locked_until=None,
        notification_id=3,
        type="comment",
        title="New comment",
        body="Hi <b>there</b>",
        link_path="/inbox",
        data={"who": "Ann"},
        user_id=5,
        email="a@example.com",
        display_name="Ada",
        locale="pt-BR",
        timezone="UTC",
        quiet_hours_start=None,
        quiet_hours_end=None,
        type_label="Comments",
        priority="default",
        mandatory=False,
        allowed=True,
        suppressed=False,
    )
    fields.update(overrides)
    return BatchRow(**fields)


def test_locale_chain_goes_locale_language_default():
    assert locale_chain("pt-BR", "en") == ["pt-br", "pt", "en"]
    assert locale_chain("pt_BR", "en") == ["pt-br", "pt", "en"]
    assert locale_chain("en", "en") == ["en"]
    assert locale_chain("", "ja") == ["ja"]


@pytest.mark.parametrize(
    ("available", "expected"),
    [
        (["en", "pt", "pt-BR"], "pt-BR"),
        (["en", "pt"], "pt"),
        (["en", "fr"], "en"),
        (["fr"], None),
    ],
)
def test_pick_template_falls_back_along_the_chain(available, expected):
    templates = {("comment", loc): Template(loc, "", "") for loc in available}
    templates[("other", "pt-BR")] = Template("wrong type", "", "")

    chosen = pick_template(templates, "comment", locale_chain("pt-BR", "en"))

    assert (chosen.subject if chosen else None) == expected


def test_template_renders_with_context_and_html_is_autoescaped(app):
    template = Template(
        subject="{{ data.who }} commented",
        body_text="{{ notification.body }} for {{ user.name }}",
        body_html="<p>{{ notification.body }}</p><a href='{{ notification.link }}'>open</a>",
    )
    with app.test_request_context():
        rendered = render_email(row(), template, "https://hato.example", "https://hato.example/unsubscribe/t")

    assert rendered.subject == "Ann commented"
    assert rendered.text.startswith("Hi <b>there</b> for Ada")
    assert "https://hato.example/unsubscribe/t" in rendered.text
    assert "<p>Hi &lt;b&gt;there&lt;/b&gt;</p>" in rendered.html
    assert "https://hato.example/inbox" in rendered.html


def test_no_template_uses_the_notifications_own_words(app):
    with app.test_request_context():
        rendered = render_email(row(), None, "https://hato.example", "https://hato.example/unsubscribe/t")

    assert rendered.subject == "New comment"
    assert rendered.text.startswith("New comment\n\nHi <b>there</b>\n\nhttps://hato.example/inbox")
    assert "<h1>New comment</h1>" in rendered.html and "Hi &lt;b&gt;there&lt;/b&gt;" in rendered.html


def test_subject_newlines_are_folded_into_one_line(app):
    with app.test_request_context():
        rendered = render_email(row(), Template("A\r\nBcc: evil@example.com", "", ""), "https://h", "https://h/u")

    assert rendered.subject == "A Bcc: evil@example.com"


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__ }}",
        "{{ ''.__class__.__mro__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ data.__class__.__init__.__globals__ }}",
        "{{ cycler.__init__.__globals__.os }}",
        "{{ (data|attr('__class__')) }}",
        "{{ '{0.__class__}'.format(data) }}",
        "{% for x in ().__class__.__base__.__subclasses__() %}{{ x }}{% endfor %}",
        "{{ data.update({'a': 1}) }}",
    ],
)
def test_sandbox_escapes_are_render_errors(source):
    with pytest.raises(RenderError):
        render_string(source, {"data": {"k": "v"}})


@pytest.mark.parametrize("source", ["{{ unclosed", "{% for %}", "{{ 1 / 0 }}", "{{ 'x' * 300000 }}"])
def test_broken_templates_are_render_errors(source):
    with pytest.raises(RenderError):
        render_string(source, {})


def test_missing_variables_render_empty():
    assert render_string("Hi {{ data.nickname }}!", {"data": {}}) == "Hi !"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ '%05.1f' | format(3.14159) }}|{{ '{:>6}'.format('ab') }}|{{ 'x' | center(5) }}", "003.1|    ab|  x  "),
        ("{{ 2 ** 10 }} {{ 9**9**9 }} {{ 'ab' * 3 }} {{ [1] * 3 }}", f"1024 {(9**9) ** 9} ababab [1, 1, 1]"),
        ("{% for i in range(3) %}{{ i }}{% endfor %} {{ range(4) | join(',') }} {{ 'a' ~ 'b' }}", "012 0,1,2,3 ab"),
        ("{{ 'a-b'.replace('-', '+') }} {{ ', '.join(['x', 'y']) }} {{ [1, 2] | sum }}", "a+b x, y 3"),
        (
            "{% set ns = namespace(n=0) %}{% for i in range(1000) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
            "499500",
        ),
    ],
)
def test_bounded_sandbox_leaves_ordinary_templates_alone(source, expected):
    assert render_string(source, {}) == expected


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'a' * (512 * 1024 + 1) }}",
        "{{ 2 ** 14001 }}",
        "{{ 'x' | center(10**6) }}",
        "{{ '%10001d' % 1 }}",
        "{{ '{:10001}'.format(1) }}",
        "{{ lipsum(1) }}",
        "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    ],
)
def test_bounded_sandbox_limits_are_render_errors(source):
    with pytest.raises(RenderError):
        render_string(source, {})


def test_the_time_budget_stops_a_long_loop():
    import time

    from app.delivery.rendering import time_budget

    started = time.monotonic()
    with time_budget(0.1), pytest.raises(RenderError, match="0.1 s time budget"):
        render_string("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", {})
    assert time.monotonic() - started < 1


@pytest.mark.parametrize("locale", ["en", "ja"])
@pytest.mark.parametrize("link_path", ["/inbox?a=1&b=<2>", None])
def test_the_filled_in_layout_equals_the_layout_rendered_for_the_message(app, locale, link_path):
    from flask_babel import force_locale
    from markupsafe import Markup

    from app.delivery.rendering import _paragraphs, _render_email, absolute_link, recipient_language

    base, unsubscribe = "https://hato.example.com", 'https://hato.example.com/unsubscribe/x?a=1&b="2"'
    message = row(locale=locale, link_path=link_path, title='Tom & "Jerry" <\x00content\x00>',
                  type_label="Comments & <co>")  # fmt: skip
    lang = recipient_language(locale)
    with app.test_request_context(), force_locale(lang):
        rendered = _render_email(message, None, base, unsubscribe)
        expected = app.jinja_env.get_template("delivery/email.html").render(
            subject=rendered.subject, content=Markup("<h1>{}</h1>").format(message.title) + _paragraphs(message.body),
            link=absolute_link(base, link_path), type_label=message.type_label, unsubscribe_url=unsubscribe,
            base_url=base, lang=lang,
        )  # fmt: skip
    assert rendered.html == expected
    assert ('class="button"' in expected) == bool(link_path)
