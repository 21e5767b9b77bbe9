"""The types Hato itself sends: phone_verification, the code that proves a member's new number (issue 29).

Written on first use rather than by a migration, so an installation's own types stay its own until a member
verifies a number. It is mandatory, high priority, SMS only and sent during quiet hours (a member asked for the
code a moment ago); its SMS wording is a template per locale the operator may edit, and the channel adds the
code when a wording leaves it out. The console keeps its key and keeps it mandatory (app/notification_types).
"""

from __future__ import annotations

import sqlalchemy as sa
from flask_babel import force_locale, gettext

from app.extensions import db
from app.workflows import queries as workflow_queries
from app.workflows import service as workflows

PHONE_VERIFICATION = "phone_verification"
BUILTIN_TYPES = frozenset({PHONE_VERIFICATION})
TEMPLATE_LOCALES = ("en", "ja")

ENSURE_TYPE_SQL = sa.text(
    """
INSERT INTO notification_types (type, label, description, default_in_app, default_email, default_push, mandatory,
                                priority, bypass_quiet_hours, channels, default_channels)
VALUES (:type, :label, :description, false, false, false, true, 'high', true, ARRAY['sms'], ARRAY['sms'])
ON CONFLICT (type) DO NOTHING
"""
)
ENSURE_TEMPLATES_SQL = sa.text(
    """
INSERT INTO message_templates (type, channel, locale, body_text)
SELECT :type, 'sms', w.locale, w.body_text
FROM unnest(CAST(:locales AS text[]), CAST(:bodies AS text[])) AS w(locale, body_text)
ON CONFLICT (type, channel, locale) DO NOTHING
"""
)


def verification_wording() -> str:
    """The SMS wording of a verification code in the current language (`code` is the template's variable)."""
    return gettext("Your verification code is {{ code }}. It expires in 10 minutes. Never share it with anyone.")


def ensure_phone_verification() -> None:
    """Write the phone_verification type and its English and Japanese wording unless they exist (caller commits)."""
    db.session.execute(
        ENSURE_TYPE_SQL,
        {
            "type": PHONE_VERIFICATION,
            "label": "Phone number verification",
            "description": "The code a member types on the preferences page to verify their phone number.",
        },
    )
    if workflow_queries.published(PHONE_VERIFICATION) is None:
        workflows.publish_columns(None, PHONE_VERIFICATION)
    bodies = []
    for locale in TEMPLATE_LOCALES:
        with force_locale(locale):
            bodies.append(verification_wording())
    db.session.execute(
        ENSURE_TEMPLATES_SQL, {"type": PHONE_VERIFICATION, "locales": list(TEMPLATE_LOCALES), "bodies": bodies}
    )
