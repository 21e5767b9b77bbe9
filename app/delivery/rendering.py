"""Render operator templates in the bounded Jinja sandbox, with the locale fallback chain.

Two sandboxes from app.delivery.sandbox: the HTML body autoescapes; subject and text do not (they
are not HTML). Every escape attempt and every size, number or time limit the template blows is a
RenderError, which the engine treats as permanent. One message renders within
TEMPLATE_RENDER_SECONDS; the console preview sets its own, shorter budget with time_budget().
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import lru_cache

from flask import current_app, has_app_context
from flask_babel import force_locale, gettext
from jinja2 import TemplateError
from jinja2.sandbox import SecurityError
from markupsafe import Markup, escape

from app.actions.outbound import outbound
from app.config import default_of
from app.delivery.queries import BatchRow, Template
from app.delivery.sandbox import make_environment, time_budget
from app.delivery.unsubscribe import unsubscribe_url
from app.i18n import language_or_default
from app.links import same_site_path
from app.locales import pick_for_chain
from app.tenants.branding import logo_url_ok

# A template that renders megabytes is a mistake or an attack; either way it is not sent.
MAX_RENDERED_CHARS = 256 * 1024


class RenderError(Exception):
    """The template could not be rendered (syntax error, sandbox violation, too large)."""


_TEXT_ENV = make_environment(html=False)
_HTML_ENV = make_environment(html=True)


@dataclass(frozen=True)
class Rendered:
    """The rendered subject, text body and HTML body of one message."""

    subject: str
    text: str
    html: str


def pick_template(templates: dict[tuple[str, str], Template], type_: str, chain: list[str]) -> Template | None:
    """Return the first template along the locale chain, or None."""
    return pick_for_chain({locale.lower(): tpl for (t, locale), tpl in templates.items() if t == type_}, chain)


@lru_cache(maxsize=512)
def _compile(html: bool, source: str):
    return (_HTML_ENV if html else _TEXT_ENV).from_string(source)


def _render_seconds() -> float:
    if has_app_context():
        return current_app.config["TEMPLATE_RENDER_SECONDS"]
    return float(default_of("TEMPLATE_RENDER_SECONDS"))  # outside an app (a script, a unit test)


def render_string(source: str, context: dict, html: bool = False) -> str:
    """Render one operator template string in the sandbox; any failure is a RenderError."""
    try:
        with time_budget(_render_seconds()):
            result = _compile(html, source).render(context)
    except (TemplateError, SecurityError, ArithmeticError, TypeError, ValueError, LookupError) as exc:
        raise RenderError(f"{type(exc).__name__}: {exc}") from exc
    except (RecursionError, MemoryError) as exc:  # a macro calling itself; a value the limits missed
        raise RenderError(f"{type(exc).__name__}: the template is too deep or too large") from exc
    if len(result) > MAX_RENDERED_CHARS:
        raise RenderError(f"rendered output is larger than {MAX_RENDERED_CHARS} characters")
    return result


def absolute_link(base_url: str, link_path: str | None) -> str | None:
    """Return the notification's link as an absolute URL (only our own paths or http(s) URLs)."""
    if not link_path:
        return None
    if same_site_path(link_path):
        return base_url + link_path
    if link_path.startswith(("https://", "http://")):
        return link_path
    return None


def template_context(row: BatchRow, base_url: str, unsubscribe_url: str) -> dict:
    """The variables operator templates see: plain data only, never ORM objects."""
    return {
        "user": {
            "name": row.display_name or row.email or "",
            "email": row.email or "",
            "locale": row.locale or current_app.config["DEFAULT_LOCALE"],
        },
        "notification": {
            "id": row.notification_id,
            "title": row.title,
            "body": row.body,
            "link": absolute_link(base_url, row.link_path),
            "type": row.type,
        },
        "type": {"type": row.type, "label": row.type_label},
        "data": dict(row.data or {}),
        "unsubscribe_url": unsubscribe_url,
        "base_url": base_url,
    }


def message_context(row: BatchRow, base_url: str, template: Template | None) -> dict:
    """template_context for a message that carries no unsubscribe header (push, SMS, chat): the signed link (an
    HMAC per member, most of a short message's render: tests/perf/bench_sms.py's profile) is made only when one of
    the template's parts names it."""
    wanted = template is not None and any(
        "unsubscribe_url" in getattr(template, part.name) for part in dataclasses.fields(template)
    )
    return template_context(row, base_url, unsubscribe_url(base_url, row.user_id, row.type) if wanted else "")


def recipient_language(locale: str | None) -> str:
    """The UI language a recipient's mail speaks: their saved locale's, else DEFAULT_LOCALE's."""
    return language_or_default(locale, current_app.config["DEFAULT_LOCALE"])


def render_email(row: BatchRow, template: Template | None, base_url: str, unsubscribe_url: str) -> Rendered:
    """Render subject, text and HTML for row; with no template, use the notification's own words.

    The three parts share one time budget, so a message costs at most TEMPLATE_RENDER_SECONDS. Hato's own
    words (layout, footer) are in the recipient's language; the operator's template was chosen by locale.
    """
    with time_budget(_render_seconds()), force_locale(recipient_language(row.locale)):
        return _render_email(row, template, base_url, unsubscribe_url)


def _render_email(row: BatchRow, template: Template | None, base_url: str, unsubscribe_url: str) -> Rendered:
    context = template_context(row, base_url, unsubscribe_url)
    link = context["notification"]["link"]
    subject = row.title
    text = "\n\n".join(part for part in (row.title, row.body, link) if part)
    content = Markup("<h1>{}</h1>").format(row.title) + _paragraphs(row.body)
    if template is not None:
        if template.subject.strip():
            subject = render_string(template.subject, context)
        if template.body_text.strip():
            text = render_string(template.body_text, context)
        if template.body_html.strip():
            # The autoescaping sandbox rendered it: values are escaped, the operator's markup is meant to stay.
            content = Markup(render_string(template.body_html, context, html=True))  # noqa: S704
            link = None  # the operator's HTML places its own link
        elif template.body_text.strip():
            content = _paragraphs(text)
    subject = " ".join(subject.split()) or row.type_label
    text, content = _with_buttons(row, base_url, text, content)
    footer = gettext("Unsubscribe from %(type)s e-mails: %(url)s", type=row.type_label, url=unsubscribe_url)
    text = f"{text.rstrip()}\n\n--\n{footer}\n"
    lang = recipient_language(row.locale)
    skeleton = _layout(lang, bool(link), row.type_label, base_url)
    values = {"subject": escape(subject), "content": content, "link": escape(link or ""),
              "unsubscribe": escape(unsubscribe_url), "brand": _brand(row)}  # fmt: skip
    html = _SLOT.sub(lambda match: values[match.group(1)], skeleton)  # one pass: a value is never read again
    return Rendered(subject=subject, text=text, html=html)


# The layout's per-message values, as slots rendered into it once per language, link or not, type and site.
_SLOT = re.compile("\x00(subject|content|link|unsubscribe|brand)\x00")
# A tenant's colour (issue 32), checked as #rrggbb when stored; checked again here, as it lands inside a <style>.
_COLOR = re.compile(r"#[0-9a-fA-F]{6}")


def _brand(row: BatchRow) -> Markup:
    """A tenant's notification (issue 32): its logo above the card and its colour on the button; else nothing."""
    return brand_html(getattr(row, "tenant_name", None), getattr(row, "tenant_logo_url", None),
                      getattr(row, "tenant_color", None))  # fmt: skip


# A tenant's logo is checked once per URL, not once per e-mail (a tenant's campaign sends many with one logo).
_logo_ok = lru_cache(maxsize=256)(logo_url_ok)


def brand_html(name: str | None, logo_url: str | None, color: str | None) -> Markup:
    """A tenant's branding in an e-mail (a notification's or a digest's): its logo and colour, escaped; else nothing.

    Both were checked when stored, and are checked again here (the colour lands inside a <style>, the logo is
    fetched by the reader's mail client), so a row written around the rules shows nothing of them.
    """
    parts = Markup("")
    if color and _COLOR.fullmatch(color):
        parts += Markup(
            # The button (a notification's link) and a band atop the card (a digest has no button): both decorative
            # in the sense of WCAG 1.4.11, the button's text being white on the tenant's colour as on the default.
            "<style>.button {{ background: {} !important; }} .card {{ border-top: 4px solid {}; }}</style>"
        ).format(color, color)
    if logo_url and _logo_ok(logo_url):
        parts += Markup('<p class="brand"><img src="{}" alt="{}" height="40"></p>').format(logo_url, name or "")
    return parts


@lru_cache(maxsize=256)
def _layout(lang: str, has_link: bool, type_label: str, base_url: str) -> str:
    """The app's own layout (trusted, autoescaped, no request context processors) with slots for the rest.

    Rendering it costs more than filling it; the slots take what autoescaping would have written there.
    """
    with force_locale(lang):
        return current_app.jinja_env.get_template("delivery/email.html").render(
            subject=Markup("\x00subject\x00"),
            brand=Markup("\x00brand\x00"),
            content=Markup("\x00content\x00"),
            link=Markup("\x00link\x00") if has_link else None,
            type_label=type_label,
            unsubscribe_url=Markup("\x00unsubscribe\x00"),
            base_url=base_url,
            lang=lang,
        )


def _with_buttons(row: BatchRow, base_url: str, text: str, content: Markup) -> tuple[str, Markup]:
    """The text and HTML with the notification's action buttons (issue 33) after them: a named action's link
    opens its confirm page (a mail scanner fetching it acts on nothing)."""
    default = current_app.config["DEFAULT_LOCALE"] if has_app_context() else default_of("DEFAULT_LOCALE")
    buttons = outbound(getattr(row, "actions", None), row.user_id, row.notification_id, row.locale, default, base_url)
    if not buttons:
        return text, content
    text = text.rstrip() + "\n\n" + "\n".join(f"{b['title']}: {b['url']}" for b in buttons)
    links = Markup(" ").join(Markup('<a class="button" href="{}">{}</a>').format(b["url"], b["title"]) for b in buttons)
    return text, content + Markup("<p>{}</p>").format(links)


def _paragraphs(text: str) -> Markup:
    blocks = [block.strip() for block in text.split("\n\n") if block.strip()]
    return Markup("").join(
        Markup("<p>{}</p>").format(Markup("<br>").join(escape(block).split("\n"))) for block in blocks
    )
