"""Console forms (Flask-WTF: every POST form carries its CSRF token) and input parsing helpers."""

from __future__ import annotations

from flask_babel import gettext, lazy_gettext
from flask_wtf import FlaskForm
from wtforms import (
    BooleanField,
    DateTimeLocalField,
    FloatField,
    IntegerField,
    RadioField,
    SelectField,
    SelectMultipleField,
    StringField,
    TextAreaField,
)
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, Length, NumberRange, Optional, Regexp, ValidationError
from wtforms.widgets import CheckboxInput, ListWidget

from app.api_keys.scopes import DEFAULT_SCOPES, SCOPE_LABELS
from app.console.labels import PRIORITY_LABELS, ROLE_LABELS
from app.delivery.channels import member_channels
from app.delivery.rich_json import MAX_SOURCE_BYTES as RICH_JSON_MAX
from app.i18n import LANGUAGE_NAMES, LANGUAGES
from app.limits import (
    API_KEY_NAME_MAX,
    DESCRIPTION_MAX,
    EMAIL_MAX,
    LINK_MAX,
    LOCALE_MAX,
    NAME_MAX,
    OPERATOR_BODY_MAX,
    SAMPLE_MAX,
    SENDER_NAME_MAX,
    TEMPLATE_MAX,
    TEMPLATE_SUBJECT_MAX,
    TENANT_KEY_MAX,
    TITLE_MAX,
    TYPE_KEY_MAX,
)
from app.notification_types.service import SMS_MAX_SEGMENTS, TYPE_KEY_RE
from app.preferences.rules import SEED_DEFAULT_COLUMNS
from app.quotas.settings import MAX_BURST, MAX_DAILY, MAX_RATE
from app.tenants.branding import KEY_MESSAGE as TENANT_KEY_MESSAGE
from app.tenants.branding import KEY_PATTERN as TENANT_KEY_PATTERN
from app.timezones import LOCAL_FORMAT

# The console edits operator content (type labels, announcements) in each UI language beside the base text, which
# is in the source language and stays the fallback for every reader whose locale has no variant.
VARIANT_LANGUAGES = LANGUAGES[1:]


def with_variants(form_class: type[FlaskForm], fields: dict) -> type[FlaskForm]:
    """Give form_class a `<field>_<language>` field per VARIANT_LANGUAGES for each of fields.

    fields maps a base field's name to (its field class, its label, its maximum length, its input's attributes);
    every variant is optional.
    """
    for name, (field_class, label, maximum, _attrs) in fields.items():
        for language in VARIANT_LANGUAGES:
            variant = field_class(
                lazy_gettext("%(field)s (%(language)s)", field=label, language=LANGUAGE_NAMES[language]),
                validators=[Optional(), Length(max=maximum)],
            )
            setattr(form_class, f"{name}_{language}", variant)
    form_class.variant_fields = tuple(fields)
    form_class.variant_attrs = {name: spec[3] for name, spec in fields.items()}
    form_class.variant_languages = VARIANT_LANGUAGES
    form_class.base_language = LANGUAGES[0]
    form_class.language_names = LANGUAGE_NAMES  # for the columns' headings (an imported macro sees no globals)
    return form_class


def variants_of(form: FlaskForm) -> dict[str, dict[str, str]]:
    """The form's variant fields as a `locales` value ({"ja": {"title": …}}; empty ones are dropped by the service)."""
    return {
        language: {name: form[f"{name}_{language}"].data or "" for name in form.variant_fields}
        for language in VARIANT_LANGUAGES
    }


def fill_variants(form: FlaskForm, locales: dict | None) -> None:
    """Show a row's stored variants in the form's variant fields (a GET of an edit page)."""
    for language in VARIANT_LANGUAGES:
        for name in form.variant_fields:
            form[f"{name}_{language}"].data = ((locales or {}).get(language) or {}).get(name, "")


def choices(labels: dict) -> list[SelectChoice]:
    """A field's choices from {value: label} (labels may be lazy: they are read when the form renders)."""
    return [SelectChoice(value, label) for value, label in labels.items()]


class AnnouncementForm(FlaskForm):
    """Title, body and format, when it appears and when it goes away."""

    title = StringField(lazy_gettext("Title"), validators=[DataRequired(), Length(max=TITLE_MAX)])
    body = TextAreaField(lazy_gettext("Body"), validators=[DataRequired(), Length(max=OPERATOR_BODY_MAX)])
    body_format = RadioField(
        lazy_gettext("Format"),
        choices=choices({"plain": lazy_gettext("Plain text"), "markdown": lazy_gettext("Markdown")}),
        default="plain",
    )
    publish = RadioField(
        lazy_gettext("Publish"),
        choices=choices({"now": lazy_gettext("Now"), "at": lazy_gettext("At a time")}),
        default="now",
    )
    publish_at = DateTimeLocalField(lazy_gettext("Publish at"), format=LOCAL_FORMAT, validators=[Optional()])
    expires_at = DateTimeLocalField(lazy_gettext("Expires at (optional)"), format=LOCAL_FORMAT, validators=[Optional()])

    def validate_publish(self, field) -> None:
        """A scheduled publication needs its time (checked here: Optional() ends publish_at's checks)."""
        if field.data == "at" and self.publish_at.data is None:
            raise ValidationError(gettext("Choose when to publish, or publish now."))


with_variants(
    AnnouncementForm,
    {
        "title": (StringField, lazy_gettext("Title"), TITLE_MAX, {"autocomplete": "off", "maxlength": TITLE_MAX}),
        "body": (TextAreaField, lazy_gettext("Body"), OPERATOR_BODY_MAX, {"rows": 10}),
    },
)


class TypeForm(FlaskForm):
    """A notification type: key, wording, per-channel defaults, mandatory, priority."""

    key = StringField(
        lazy_gettext("Key"),
        validators=[
            DataRequired(),
            Length(max=TYPE_KEY_MAX),
            Regexp(
                TYPE_KEY_RE,
                message=lazy_gettext("Use a lower-case letter, then lower-case letters, digits or _ (2–63)."),
            ),
        ],
    )
    label = StringField(lazy_gettext("Label"), validators=[DataRequired(), Length(max=TITLE_MAX)])
    description = TextAreaField(lazy_gettext("Description"), validators=[Optional(), Length(max=DESCRIPTION_MAX)])
    default_in_app = BooleanField(lazy_gettext("In the inbox"), default=True)
    default_email = BooleanField(lazy_gettext("E-mail"))
    default_push = BooleanField(lazy_gettext("Push"))
    mandatory = BooleanField(lazy_gettext("Mandatory (users cannot turn it off)"))
    priority = SelectField(lazy_gettext("Priority"), choices=choices(PRIORITY_LABELS), default="default")
    confirmed = BooleanField(lazy_gettext("I understand this overrides users' choices"))
    # The timing (escalation, caps, batching, digests, channel order) is the type's workflow, on its own page.
    bypass_quiet_hours = BooleanField(lazy_gettext("Send during quiet hours"))
    channel_mode = RadioField(
        lazy_gettext("Send on"),
        choices=choices(
            {
                "all": lazy_gettext("every listed channel the member has on"),
                "first": lazy_gettext("only the first listed channel that reaches the member"),
            }
        ),
        default="all",
    )
    # How many parts one SMS of the type may take (empty keeps it); a longer rendering fails for good (channels/sms.py).
    sms_max_segments = IntegerField(
        lazy_gettext("SMS parts at most"), validators=[Optional(), NumberRange(*SMS_MAX_SEGMENTS)], default=3
    )
    # On by default, for channels that have no seed column (in-app, e-mail and push have their own above).
    default_channels = SelectMultipleField(
        lazy_gettext("Also on by default"),
        choices=[],
        widget=ListWidget(prefix_label=False),
        option_widget=CheckboxInput(),
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.default_channels.choices = choices(
            {c.name: c.label for c in member_channels() if c.name not in SEED_DEFAULT_COLUMNS}
        )


with_variants(
    TypeForm,
    {
        "label": (StringField, lazy_gettext("Label"), TITLE_MAX, {"autocomplete": "off"}),
        "description": (TextAreaField, lazy_gettext("Description"), DESCRIPTION_MAX, {"rows": 2}),
    },
)


class TemplateForm(FlaskForm):
    """The wording of one (type, channel, locale) and the sample the preview renders it with."""

    subject = TextAreaField(lazy_gettext("Subject"), validators=[Optional(), Length(max=TEMPLATE_SUBJECT_MAX)])
    body_text = TextAreaField(lazy_gettext("Text body"), validators=[Optional(), Length(max=TEMPLATE_MAX)])
    body_html = TextAreaField(lazy_gettext("HTML body"), validators=[Optional(), Length(max=TEMPLATE_MAX)])
    mobile_title = TextAreaField(
        lazy_gettext("Title on phones"), validators=[Optional(), Length(max=TEMPLATE_SUBJECT_MAX)]
    )
    mobile_subtitle = TextAreaField(
        lazy_gettext("Subtitle on iPhones"), validators=[Optional(), Length(max=TEMPLATE_SUBJECT_MAX)]
    )
    mobile_body = TextAreaField(lazy_gettext("Body on phones"), validators=[Optional(), Length(max=TEMPLATE_MAX)])
    # Chat's rich parts: JSON whose strings are templates, checked by app/delivery/rich_json.py.
    slack_blocks = TextAreaField(
        lazy_gettext("Slack blocks (Block Kit JSON)"), validators=[Optional(), Length(max=RICH_JSON_MAX)]
    )
    teams_card = TextAreaField(
        lazy_gettext("Teams card (Adaptive Card JSON)"), validators=[Optional(), Length(max=RICH_JSON_MAX)]
    )
    line_flex = TextAreaField(
        lazy_gettext("LINE Flex message (JSON)"), validators=[Optional(), Length(max=RICH_JSON_MAX)]
    )
    user_locale = StringField(
        lazy_gettext("Preview for a user whose locale is"), validators=[Optional(), Length(max=LOCALE_MAX)]
    )
    sample = TextAreaField(lazy_gettext("Sample data (JSON)"), validators=[Optional(), Length(max=SAMPLE_MAX)])
    # Asked for only when the SMS rendering needs more parts than the type allows (a second submit).
    save_over_limit = BooleanField(lazy_gettext("Save anyway: I understand deliveries of this text will fail"))


class MessageTemplateForm(TemplateForm):
    """A message template's form: TemplateForm and, for the e-mail preview, a tenant whose branding it shows."""

    # Its choices ("" = none, then every tenant's key) are set by the view; only the preview reads it.
    tenant = SelectField(lazy_gettext("Preview as a notification of"), choices=[SelectChoice("", "")], default="")


class RoleForm(FlaskForm):
    """A user's new role."""

    role = SelectField(lazy_gettext("Role"), choices=choices(ROLE_LABELS))


class ApiKeyScopesForm(FlaskForm):
    """What an API key may do: one checkbox per scope (app/api_keys/scopes.py)."""

    scopes = SelectMultipleField(
        lazy_gettext("Scopes"),
        choices=choices(SCOPE_LABELS),
        validators=[DataRequired(message=lazy_gettext("Choose at least one scope."))],
        widget=ListWidget(prefix_label=False),
        option_widget=CheckboxInput(),
    )


class QuotaForm(FlaskForm):
    """A subject's quotas (an API key's, a tenant's): a rate with a burst, and notifications a day; empty is none."""

    rate = FloatField(
        lazy_gettext("Requests per second"),
        validators=[Optional(), NumberRange(min=0.001, max=MAX_RATE)],
        description=lazy_gettext("Empty: no rate limit."),
    )
    burst = IntegerField(
        lazy_gettext("Burst"),
        validators=[Optional(), NumberRange(min=1, max=MAX_BURST)],
        description=lazy_gettext("Requests allowed at once before the rate applies (default: one second's worth)."),
    )
    daily = IntegerField(
        lazy_gettext("Notifications per day"),
        validators=[Optional(), NumberRange(min=0, max=MAX_DAILY)],
        description=lazy_gettext("Counted per recipient, per UTC day. Empty: no quota."),
    )


class ApiKeyForm(ApiKeyScopesForm):
    """A name for a new API key (which product service uses it) and its scopes (sending only, unless ticked)."""

    name = StringField(lazy_gettext("Name"), validators=[DataRequired(), Length(max=API_KEY_NAME_MAX)])

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.scopes.data is None:  # a blank form (not a submitted one) starts at the default
            self.scopes.data = list(DEFAULT_SCOPES)


class TenantForm(FlaskForm):
    """A tenant: its key, name and branding (the rules are app/tenants/branding.py's, checked by the service)."""

    key = StringField(
        lazy_gettext("Key"),
        validators=[DataRequired(), Length(max=TENANT_KEY_MAX), Regexp(TENANT_KEY_PATTERN, message=TENANT_KEY_MESSAGE)],
    )
    name = StringField(lazy_gettext("Name"), validators=[DataRequired(), Length(max=NAME_MAX)])
    logo_url = StringField(lazy_gettext("Logo URL"), validators=[Optional(), Length(max=LINK_MAX)])
    primary_color = StringField(lazy_gettext("Primary colour"), validators=[Optional(), Length(max=7)])
    email_sender_name = StringField(
        lazy_gettext("E-mail sender name"), validators=[Optional(), Length(max=SENDER_NAME_MAX)]
    )
    reply_to = StringField(lazy_gettext("Reply-to address"), validators=[Optional(), Length(max=EMAIL_MAX)])
