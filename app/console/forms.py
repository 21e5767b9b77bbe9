"""Console forms (Flask-WTF: every POST form carries its CSRF token) and input parsing helpers."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from flask_wtf import FlaskForm
from wtforms import BooleanField, DateTimeLocalField, RadioField, SelectField, StringField, TextAreaField
from wtforms.validators import DataRequired, Length, Optional, Regexp, ValidationError

from app.console.service import BODY_MAX, TITLE_MAX, TYPE_KEY_RE
from app.models import PRIORITIES, ROLES

LOCAL_FORMAT = "%Y-%m-%dT%H:%M"
TEMPLATE_MAX = 100_000


def aware(value: datetime | None, zone: ZoneInfo) -> datetime | None:
    """Read a naive datetime-local value as a time in the operator's zone."""
    return value.replace(tzinfo=zone) if value is not None else None


def local_value(value: datetime | None, zone: ZoneInfo) -> datetime | None:
    """Turn a stored timestamp into the naive local time a datetime-local input shows."""
    return value.astimezone(zone).replace(tzinfo=None) if value is not None else None


def parse_local(text: str | None, zone: ZoneInfo) -> datetime | None:
    """Parse a datetime-local (or date-only) query value in the operator's zone; None if blank or bad."""
    text = (text or "").strip()
    for fmt in (LOCAL_FORMAT, "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=zone)
        except ValueError:
            continue
    return None


class AnnouncementForm(FlaskForm):
    """Title, body and format, when it appears and when it goes away."""

    title = StringField("Title", validators=[DataRequired(), Length(max=TITLE_MAX)])
    body = TextAreaField("Body", validators=[DataRequired(), Length(max=BODY_MAX)])
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
            Length(max=63),
            Regexp(TYPE_KEY_RE, message="Use a lower-case letter, then lower-case letters, digits or _ (2–63)."),
        ],
    )
    label = StringField("Label", validators=[DataRequired(), Length(max=TITLE_MAX)])
    description = TextAreaField("Description", validators=[Optional(), Length(max=2000)])
    default_in_app = BooleanField("In the inbox", default=True)
    default_email = BooleanField("E-mail")
    default_push = BooleanField("Push")
    mandatory = BooleanField("Mandatory (users cannot turn it off)")
    priority = SelectField("Priority", choices=list(PRIORITIES), default="default")
    confirmed = BooleanField("I understand this overrides users' choices")


class TemplateForm(FlaskForm):
    """The wording of one (type, channel, locale) and the sample the preview renders it with."""

    subject = TextAreaField("Subject", validators=[Optional(), Length(max=2000)])
    body_text = TextAreaField("Text body", validators=[Optional(), Length(max=TEMPLATE_MAX)])
    body_html = TextAreaField("HTML body", validators=[Optional(), Length(max=TEMPLATE_MAX)])
    user_locale = StringField("Preview for a user whose locale is", validators=[Optional(), Length(max=35)])
    sample = TextAreaField("Sample data (JSON)", validators=[Optional(), Length(max=20_000)])


class RoleForm(FlaskForm):
    """A user's new role."""

    role = SelectField("Role", choices=list(ROLES))


class ApiKeyForm(FlaskForm):
    """A name for a new API key (which product service uses it)."""

    name = StringField("Name", validators=[DataRequired(), Length(max=100)])
