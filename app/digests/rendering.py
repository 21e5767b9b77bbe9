"""Render one digest e-mail: the user's unread items grouped by type, with counts and links, in the sandbox.

The wording is a template like the operator's (subject, text, HTML), rendered by
app.delivery.rendering.render_string in the bounded sandbox, so a later operator-edited digest
template per locale plugs in unchanged; the HTML goes into the app's e-mail layout.
The built-in wording's sentences come from the catalogs, said in the recipient's language
(`words` and each group's `more_text` in the context), so one built-in template serves every language.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import groupby

from flask import current_app
from flask_babel import force_locale, gettext, ngettext
from markupsafe import Markup

from app.delivery.rendering import Rendered, absolute_link, recipient_language, render_string
from app.delivery.sandbox import time_budget
from app.digests.queries import Item

# Items listed per type; the count still says how many there are.
ITEMS_PER_TYPE = 10


@dataclass(frozen=True)
class DigestTemplate:
    """The wording of a digest e-mail: Jinja sources for the subject, the text body and the HTML body."""

    subject: str
    body_text: str
    body_html: str


DEFAULT_TEMPLATE = DigestTemplate(
    subject="{{ words.subject }}",
    body_text="""{{ words.greeting }}

{% for group in groups %}{{ group.label }} ({{ group.count }})
{% for item in group.entries %}- {{ item.title }}{% if item.link %} {{ item.link }}{% endif %}
{% endfor %}{% if group.more %}  {{ group.more_text }}
{% endif %}
{% endfor %}{{ words.open_inbox_text }}""",
    body_html="""<h1>{{ words.heading }}</h1>
<p>{{ words.intro }}</p>
{% for group in groups %}<h2>{{ group.label }} ({{ group.count }})</h2>
<ul>{% for item in group.entries %}<li>{% if item.link %}<a href="{{ item.link }}">{{ item.title }}</a>
{%- else %}{{ item.title }}{% endif %}</li>{% endfor %}</ul>
{% if group.more %}<p>{{ group.more_text }}</p>{% endif %}
{% endfor %}<p><a href="{{ inbox_url }}">{{ words.open_inbox }}</a></p>""",
)


def _words(name: str, kind: str, total: int, inbox_url: str) -> dict:
    """The built-in wording's sentences in the current language (whole sentences: word order differs)."""
    if kind == "hourly":
        heading = gettext("Your hourly digest")
        subject = ngettext(
            "Your hourly digest: %(num)d new notification", "Your hourly digest: %(num)d new notifications", total
        )
    else:
        heading = gettext("Your daily digest")
        subject = ngettext(
            "Your daily digest: %(num)d new notification", "Your daily digest: %(num)d new notifications", total
        )
    return {
        "subject": subject,
        "heading": heading,
        "greeting": gettext("Hello %(name)s,", name=name),
        "intro": gettext("Hello %(name)s, here is what arrived that you have not read yet.", name=name),
        "open_inbox": gettext("Open your inbox"),
        "open_inbox_text": gettext("Open your inbox: %(url)s", url=inbox_url),
    }


def digest_context(name: str, email: str, locale: str, kind: str, items: list[Item], base_url: str) -> dict:
    """The variables a digest template sees: plain data only, items grouped by type with counts and links.

    The built-in sentences (words, more_text) are said in the recipient's language, whatever the caller's.
    """
    with force_locale(recipient_language(locale)):
        return _digest_context(name, email, locale, kind, items, base_url)


def _digest_context(name: str, email: str, locale: str, kind: str, items: list[Item], base_url: str) -> dict:
    groups = []
    for (_, label), members in groupby(items, key=lambda item: (item.type, item.type_label)):
        members = list(members)
        shown = [
            {"title": i.title, "body": i.body, "link": absolute_link(base_url, i.link_path)}
            for i in members[:ITEMS_PER_TYPE]
        ]
        more = max(len(members) - ITEMS_PER_TYPE, 0)
        more_text = ngettext("… and %(num)d more", "… and %(num)d more", more)
        groups.append({"type": members[0].type, "label": label, "count": len(members), "entries": shown,
                       "more": more, "more_text": more_text})  # fmt: skip
    display_name = name or email or ""
    return {
        "user": {
            "name": display_name,
            "email": email or "",
            "locale": locale or current_app.config["DEFAULT_LOCALE"],
        },
        "kind": kind,
        "total": len(items),
        "groups": groups,
        "inbox_url": f"{base_url}/inbox",
        "preferences_url": f"{base_url}/preferences",
        "base_url": base_url,
        "words": _words(display_name, kind, len(items), f"{base_url}/inbox"),
    }


def render_digest(context: Mapping, config: Mapping, template: DigestTemplate = DEFAULT_TEMPLATE,
                  brand: Markup | None = None) -> Rendered:  # fmt: skip
    """Render subject, text and HTML (in the app's e-mail layout) within one TEMPLATE_RENDER_SECONDS budget.

    Hato's own words (layout, footer) are in the recipient's language (context["user"]["locale"]); brand is a
    tenant's logo and colour (app.delivery.rendering.brand_html) when every item is that tenant's.
    """
    language = recipient_language(context["user"]["locale"])
    with force_locale(language), time_budget(float(config["TEMPLATE_RENDER_SECONDS"])):
        subject = " ".join(render_string(template.subject, dict(context)).split()) or gettext("Your digest")
        text = render_string(template.body_text, dict(context))
        # The autoescaping sandbox rendered it: values are escaped, the template's markup is meant to stay.
        content = Markup(render_string(template.body_html, dict(context), html=True))  # noqa: S704
        preferences = context["preferences_url"]
        footer = gettext("Choose how often you get e-mail: %(url)s", url=preferences)
        text = f"{text.rstrip()}\n\n--\n{footer}\n"
        layout = current_app.jinja_env.get_template("delivery/email.html")
        html = layout.render(subject=subject, brand=brand or "", content=content, link=None,
                             type_label=gettext("digest"), unsubscribe_url=preferences, base_url=context["base_url"],
                             lang=language)  # fmt: skip
    return Rendered(subject=subject, text=text, html=html)
