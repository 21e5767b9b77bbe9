"""Render one digest e-mail: the user's unread items grouped by type, with counts and links, in the sandbox.

The wording is a template like the operator's (subject, text, HTML), rendered by
app.delivery.rendering.render_string in the bounded sandbox, so a later operator-edited digest
template per locale plugs in unchanged; the HTML goes into the app's e-mail layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import groupby

from flask import current_app
from markupsafe import Markup

from app.delivery.rendering import Rendered, absolute_link, render_string
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
    subject="Your {{ kind }} digest: {{ total }} new notification{{ '' if total == 1 else 's' }}",
    body_text="""Hello {{ user.name }},

{% for group in groups %}{{ group.label }} ({{ group.count }})
{% for item in group.entries %}- {{ item.title }}{% if item.link %} {{ item.link }}{% endif %}
{% endfor %}{% if group.more %}  … and {{ group.more }} more
{% endif %}
{% endfor %}Open your inbox: {{ inbox_url }}""",
    body_html="""<h1>Your {{ kind }} digest</h1>
<p>Hello {{ user.name }}, here is what arrived that you have not read yet.</p>
{% for group in groups %}<h2>{{ group.label }} ({{ group.count }})</h2>
<ul>{% for item in group.entries %}<li>{% if item.link %}<a href="{{ item.link }}">{{ item.title }}</a>
{%- else %}{{ item.title }}{% endif %}</li>{% endfor %}</ul>
{% if group.more %}<p>… and {{ group.more }} more</p>{% endif %}
{% endfor %}<p><a href="{{ inbox_url }}">Open your inbox</a></p>""",
)


def digest_context(name: str, email: str, locale: str, kind: str, items: list[Item], base_url: str) -> dict:
    """The variables a digest template sees: plain data only, items grouped by type with counts and links."""
    groups = []
    for (_, label), members in groupby(items, key=lambda item: (item.type, item.type_label)):
        members = list(members)
        shown = [
            {"title": i.title, "body": i.body, "link": absolute_link(base_url, i.link_path)}
            for i in members[:ITEMS_PER_TYPE]
        ]
        groups.append({"type": members[0].type, "label": label, "count": len(members), "entries": shown,
                       "more": max(len(members) - ITEMS_PER_TYPE, 0)})  # fmt: skip
    return {
        "user": {
            "name": name or email or "",
            "email": email or "",
            "locale": locale or current_app.config["DEFAULT_LOCALE"],
        },
        "kind": kind,
        "total": len(items),
        "groups": groups,
        "inbox_url": f"{base_url}/inbox",
        "preferences_url": f"{base_url}/preferences",
        "base_url": base_url,
    }


def render_digest(context: Mapping, config: Mapping, template: DigestTemplate = DEFAULT_TEMPLATE) -> Rendered:
    """Render subject, text and HTML (in the app's e-mail layout) within one TEMPLATE_RENDER_SECONDS budget."""
    with time_budget(float(config.get("TEMPLATE_RENDER_SECONDS", 0.5))):
        subject = " ".join(render_string(template.subject, dict(context)).split()) or "Your digest"
        text = render_string(template.body_text, dict(context))
        # The autoescaping sandbox rendered it: values are escaped, the template's markup is meant to stay.
        content = Markup(render_string(template.body_html, dict(context), html=True))  # noqa: S704
    preferences = context["preferences_url"]
    text = f"{text.rstrip()}\n\n--\nChoose how often you get e-mail: {preferences}\n"
    layout = current_app.jinja_env.get_template("delivery/email.html")
    html = layout.render(subject=subject, content=content, link=None, type_label="digest",
                         unsubscribe_url=preferences, base_url=context["base_url"])  # fmt: skip
    return Rendered(subject=subject, text=text, html=html)
