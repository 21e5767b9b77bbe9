"""Console forms (Flask-WTF: every POST form carries its CSRF token) and input parsing helpers."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import (
    BooleanField,
    DateTimeLocalField,
    IntegerField,
    RadioField,
    SelectField,
    SelectMultipleField,
    StringField,
    TextAreaField,
)
from wtforms.validators import DataRequired, Length, NumberRange, Optional, Regexp, ValidationError
from wtforms.widgets import CheckboxInput, ListWidget

from app.api_keys.scopes import DEFAULT_SCOPES, SCOPES
from app.limits import (
    API_KEY_NAME_MAX,
    DESCRIPTION_MAX,
    LOCALE_MAX,
    OPERATOR_BODY_MAX,
    SAMPLE_MAX,
    TEMPLATE_MAX,
    TEMPLATE_SUBJECT_MAX,
    TITLE_MAX,
    TYPE_KEY_MAX,
)
from app.models import PRIORITIES, ROLES
from app.notification_types.service import (
    AGGREGATION_MAX_SECONDS,
    CAP_MAX,
    EMAIL_FREQUENCIES,
    ESCALATE_UNLESS,
    TIMING_MAX_SECONDS,
    TYPE_KEY_RE,
)
from app.timezones import LOCAL_FORMAT


class AnnouncementForm(FlaskForm):
    """Title, body and format, when it appears and when it goes away."""

    title = StringField("Title", validators=[DataRequired(), Length(max=TITLE_MAX)])
    body = TextAreaField("Body", validators=[DataRequired(), Length(max=OPERATOR_BODY_MAX)])
    body_format = RadioField("Format", choices={"plain": "Plain text", "markdown": "Markdown"}, default="plain")
    publish = RadioField("Publish", choices={"now": "Now", "at": "At a time"}, default="now")
    publish_at = DateTimeLocalField("Publish at", format=LOCAL_FORMAT, validators=[Optional()])
    expires_at = DateTimeLocalField("Expires at (optional)", format=LOCAL_FORMAT, validators=[Optional()])

    def validate_publish(self, field) -> None:
        """A scheduled publication needs its time (checked here: Optional() ends publish_at's checks)."""
        if field.data == "at" and self.publish_at.data is None:
            raise ValidationError("Choose when to publish, or publish now.")


class TypeForm(FlaskForm):
    """A notification type: key, wording, per-channel defaults, mandatory, priority."""

    key = StringField(
        "Key",
        validators=[
            DataRequired(),
            Length(max=TYPE_KEY_MAX),
            Regexp(TYPE_KEY_RE, message="Use a lower-case letter, then lower-case letters, digits or _ (2–63)."),
        ],
    )
    label = StringField("Label", validators=[DataRequired(), Length(max=TITLE_MAX)])
    description = TextAreaField("Description", validators=[Optional(), Length(max=DESCRIPTION_MAX)])
    default_in_app = BooleanField("In the inbox", default=True)
    default_email = BooleanField("E-mail")
    default_push = BooleanField("Push")
    mandatory = BooleanField("Mandatory (users cannot turn it off)")
    priority = SelectField("Priority", choices=list(PRIORITIES), default="default")
    confirmed = BooleanField("I understand this overrides users' choices")
    # Timing and routing (issue 15): every one empty/off keeps "send at once on every enabled channel".
    escalate_after = IntegerField(
        "Escalate after (seconds)", validators=[Optional(), NumberRange(1, TIMING_MAX_SECONDS)]
    )
    escalate_unless = SelectField(
        "Send the escalation only if the notification is still", choices=dict(ESCALATE_UNLESS), default="read"
    )
    skip_when_online = BooleanField("Skip e-mail and push while the user is online")
    cap_count = IntegerField("At most this many e-mails (and pushes)", validators=[Optional(), NumberRange(1, CAP_MAX)])
    cap_window = IntegerField("per (seconds)", validators=[Optional(), NumberRange(1, TIMING_MAX_SECONDS)])
    aggregation_window = IntegerField(
        "Aggregation window (seconds)", validators=[Optional(), NumberRange(1, AGGREGATION_MAX_SECONDS)]
    )
    email_frequency = SelectField("E-mail by default", choices=dict(EMAIL_FREQUENCIES), default="immediate")

    def validate(self, extra_validators=None) -> bool:
        """Also: a cap needs both its count and its window (Optional() would skip a validate_ method)."""
        valid = super().validate(extra_validators)
        count, window = self.cap_count, self.cap_window
        if not (count.errors or window.errors) and (count.data is None) != (window.data is None):
            window.errors = [*window.errors, "Give both the number and the window, or leave both empty."]
            valid = False
        return valid


class TemplateForm(FlaskForm):
    """The wording of one (type, channel, locale) and the sample the preview renders it with."""

    subject = TextAreaField("Subject", validators=[Optional(), Length(max=TEMPLATE_SUBJECT_MAX)])
    body_text = TextAreaField("Text body", validators=[Optional(), Length(max=TEMPLATE_MAX)])
    body_html = TextAreaField("HTML body", validators=[Optional(), Length(max=TEMPLATE_MAX)])
    user_locale = StringField("Preview for a user whose locale is", validators=[Optional(), Length(max=LOCALE_MAX)])
    sample = TextAreaField("Sample data (JSON)", validators=[Optional(), Length(max=SAMPLE_MAX)])


class RoleForm(FlaskForm):
    """A user's new role."""

    role = SelectField("Role", choices=list(ROLES))


class ApiKeyScopesForm(FlaskForm):
    """What an API key may do: one checkbox per scope (app/api_keys/scopes.py)."""

    scopes = SelectMultipleField(
        "Scopes",
        choices=dict(SCOPES),
        validators=[DataRequired(message="Choose at least one scope.")],
        widget=ListWidget(prefix_label=False),
        option_widget=CheckboxInput(),
    )


class ApiKeyForm(ApiKeyScopesForm):
    """A name for a new API key (which product service uses it) and its scopes (sending only, unless ticked)."""

    name = StringField("Name", validators=[DataRequired(), Length(max=API_KEY_NAME_MAX)])

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.scopes.data is None:  # a blank form (not a submitted one) starts at the default
            self.scopes.data = list(DEFAULT_SCOPES)
