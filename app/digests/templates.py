"""The digest e-mail's wording per locale: operators edit it in the console, preview it with a sample user
and sample items in the same sandbox and layout real digests use, and each save is audited."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from flask import current_app
from flask_babel import gettext

from app.audit import service as audit
from app.clock import db_now
from app.delivery.rendering import RenderError
from app.delivery.sandbox import time_budget
from app.digests import rendering
from app.digests.queries import Item
from app.extensions import db
from app.locales import locale_chain, normalize_locale, pick_for_chain
from app.models import DigestTemplate
from app.refusal import Refused

FIELDS = ("locale", "subject", "body_text", "body_html")
PARTS = ("subject", "body_text", "body_html")

SAMPLE_USER = {"name": "Ada Lovelace", "email": "ada@example.com"}
SAMPLE_ITEMS = (
    ("like", "Likes", "Alice liked your post", "/posts/12"),
    ("like", "Likes", "Bob liked your post", "/posts/12"),
    ("comment", "Comments", "Carol commented: “Nice!”", "/posts/12#c3"),
)


def digest_template(locale: str) -> DigestTemplate | None:
    """Return the digest template of one locale, if there is one."""
    return db.session.get(DigestTemplate, locale)


def locales() -> list[str]:
    """The locales that have their own digest wording."""
    return list(db.session.execute(sa.select(DigestTemplate.locale).order_by(DigestTemplate.locale)).scalars())


def all_templates() -> dict[str, rendering.DigestTemplate]:
    """Every locale's wording (a handful of rows), with empty parts filled from the built-in one."""
    rows = db.session.execute(sa.select(DigestTemplate)).scalars()
    return {row.locale: _filled(row.subject, row.body_text, row.body_html) for row in rows}


def _filled(subject: str, body_text: str, body_html: str) -> rendering.DigestTemplate:
    default = rendering.DEFAULT_TEMPLATE
    return rendering.DigestTemplate(
        subject if subject.strip() else default.subject,
        body_text if body_text.strip() else default.body_text,
        body_html if body_html.strip() else default.body_html,
    )


def pick(templates: dict[str, rendering.DigestTemplate], locale: str | None, default_locale: str):
    """The wording along the user's locale chain, else the built-in one."""
    return pick_for_chain(templates, locale_chain(locale, default_locale), rendering.DEFAULT_TEMPLATE)


@dataclass
class Preview:
    """A rendered sample digest, or the problems that stop it from rendering (and from being saved)."""

    subject: str = ""
    text: str = ""
    html_document: str = ""
    problems: list[str] = field(default_factory=list)


def preview(subject: str, body_text: str, body_html: str, locale: str) -> Preview:
    """Render the wording with the sample user and items within TEMPLATE_PREVIEW_SECONDS."""
    config = current_app.config
    now = datetime.now(UTC)
    items = [Item(i, t, label, title, "", link, now - timedelta(minutes=i)) for i, (t, label, title, link)
             in enumerate(SAMPLE_ITEMS, 1)]  # fmt: skip
    context = rendering.digest_context(SAMPLE_USER["name"], SAMPLE_USER["email"], locale, "daily", items,
                                       config["BASE_URL"])  # fmt: skip
    wording = _filled(subject, body_text, body_html)
    try:
        with time_budget(float(config["TEMPLATE_PREVIEW_SECONDS"])):
            rendered = rendering.render_digest(context, config, wording)
    except RenderError as exc:
        return Preview(problems=[str(exc)])
    return Preview(rendered.subject, rendered.text, rendered.html)


def save(actor, locale: str, *, subject: str, body_text: str, body_html: str, problems: list[str]) -> bool:
    """Create or update a locale's digest wording; refused when it has problems; False when nothing changed."""
    locale = normalize_locale(locale)
    if problems:
        raise Refused(gettext("The template has errors and was not saved: %(problems)s", problems="; ".join(problems)))
    values = {"subject": subject, "body_text": body_text, "body_html": body_html}
    template = db.session.get(DigestTemplate, locale, with_for_update=True)
    before = None
    if template is None:
        template = DigestTemplate(locale=locale)
        db.session.add(template)
    elif all(getattr(template, name) == value for name, value in values.items()):
        return False
    else:
        before = audit.snapshot(template, FIELDS)
    for name, value in values.items():
        setattr(template, name, value)
    template.updated_by, template.updated_at = getattr(actor, "id", None), db_now()
    db.session.flush()
    audit.record(actor, "template.save", "digest_template", locale, before=before,
                 after=audit.snapshot(template, FIELDS))  # fmt: skip
    return True
