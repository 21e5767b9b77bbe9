"""Template preview: render the editor's wording with sample data through the delivery engine's sandbox.

Nothing here renders on its own: every string goes through app.delivery.rendering (the same
sandbox, the same e-mail layout and the same locale chain that real sends use), so what the
operator sees is what users get, and an injection attempt or a template that blows a size or
time limit fails here exactly as it would there.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

from flask import current_app
from flask_babel import gettext, lazy_gettext

from app import sms_text
from app.delivery import rendering, rich_json
from app.delivery.queries import BatchRow, Template
from app.locales import locale_chain
from app.push.payload import PUSH_LIMIT, push_payload  # the same JSON the push sender builds

SAMPLE = {
    "user": {"name": "Ada Lovelace", "email": "ada@example.com"},
    "notification": {
        "title": "Reservation #310 was approved",
        "body": "Room 4B, Monday 10:00-11:00.",
        "link_path": "/reservations/310",
    },
    "data": {"reservation_id": 310, "room": "4B"},
}
SAMPLE_JSON = json.dumps(SAMPLE, indent=2, ensure_ascii=False)

PART_LABELS = {
    "subject": lazy_gettext("Subject"),
    "body_text": lazy_gettext("Text body"),
    "body_html": lazy_gettext("HTML body"),
    "slack_blocks": lazy_gettext("Slack blocks"),
    "teams_card": lazy_gettext("Teams card"),
    "line_flex": lazy_gettext("LINE Flex message"),
}


@dataclass(frozen=True)
class Problem:
    """One error: in which part, what, and on which line of that part (when known)."""

    part: str
    message: str
    line: int | None = None
    source_line: str | None = None

    def __str__(self) -> str:
        part = str(PART_LABELS.get(self.part, self.part))
        if self.line:
            return gettext("%(part)s, line %(line)s: %(message)s", part=part, line=self.line, message=self.message)
        return gettext("%(part)s: %(message)s", part=part, message=self.message)


@dataclass(frozen=True)
class ChainStep:
    """One locale in the fallback chain: does a template exist for it, and is it the one used."""

    locale: str
    exists: bool
    used: bool


@dataclass(frozen=True)
class PhoneCard:
    """How one phone shows the push: iOS with its subtitle, Android without."""

    platform: str  # ios | android
    title: str
    subtitle: str
    body: str


@dataclass(frozen=True)
class SmsPreview:
    """What an SMS costs: its encoding and parts against the type's limit, and what forced UCS-2."""

    measured: sms_text.SmsText
    characters: int  # as a person counts them (code points)
    limit: int  # the type's sms_max_segments
    runs: tuple[tuple[str, bool], ...]  # the text in runs of (characters, whether they forced UCS-2)

    @property
    def forcing_codes(self) -> tuple[tuple[str, str], ...]:
        """Each character that forced UCS-2 with its code point (U+3000 shows what a blank cannot)."""
        return tuple((char, f"U+{ord(char):04X}") for char in self.measured.forcing)

    @property
    def over(self) -> bool:
        """Whether a delivery of this text fails for good (more parts than the type allows)."""
        return self.measured.segments > self.limit


def sms_preview(text: str, limit: int) -> SmsPreview:
    """Measure text as app.delivery.channels.sms does before it sends, and mark what forced UCS-2."""
    measured = sms_text.measure(text)
    forcing = set(measured.forcing)
    runs: list[tuple[str, bool]] = []
    for char in text:
        marked = char in forcing
        if runs and runs[-1][1] == marked:
            runs[-1] = (runs[-1][0] + char, marked)
        else:
            runs.append((char, marked))
    return SmsPreview(measured, len(text), limit, tuple(runs))


@dataclass
class Preview:
    """What the editor shows next to the form."""

    channel: str
    problems: list[Problem] = field(default_factory=list)
    subject: str = ""
    text: str = ""
    html_document: str = ""
    push_json: str = ""
    push_bytes: int = 0
    push_limit: int = PUSH_LIMIT
    chain: list[ChainStep] = field(default_factory=list)
    user_locale: str = ""
    phones: list[PhoneCard] = field(default_factory=list)  # push: the iPhone and the Android rendering
    sms: SmsPreview | None = None  # sms: encoding, parts and the characters that forced UCS-2
    rich: dict[str, str] = field(default_factory=dict)  # chat: each rich part rendered, as indented JSON
    sender_name: str = ""  # e-mail for a tenant (issue 32): the From header's display name, and Reply-To
    reply_to: str = ""

    @property
    def rich_parts(self) -> list[tuple[str, str, str]]:
        """Each rendered rich part with its label, in the editor's order."""
        return [(part, str(PART_LABELS[part]), self.rich[part]) for part in rich_json.RICH_PARTS if part in self.rich]

    @property
    def warnings(self) -> list[str]:
        """Why this wording, though it renders, would fail when sent (saved only once the operator confirms)."""
        if self.sms is None or not self.sms.over:
            return []
        measured = self.sms.measured
        return [
            gettext(
                "With the sample data this SMS takes %(segments)s parts (%(encoding)s) and the type allows "
                "%(limit)s: every delivery this long fails.",
                segments=measured.segments,
                encoding=measured.encoding,
                limit=self.sms.limit,
            )
        ]

    @property
    def used_locale(self) -> str | None:
        """The locale whose template a user with user_locale gets (None: no template, built-in wording)."""
        return next((step.locale for step in self.chain if step.used), None)


def parse_sample(text: str | None) -> tuple[dict, Problem | None]:
    """Parse the sample JSON; on a mistake return the default sample and the problem with its line."""
    if not (text or "").strip():
        return SAMPLE, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return SAMPLE, Problem("sample data", exc.msg, exc.lineno)
    if not isinstance(value, dict):
        return SAMPLE, Problem("sample data", "must be a JSON object like the default one")
    return value, None


def _section(sample: dict, name: str) -> dict:
    value = sample.get(name)
    return value if isinstance(value, dict) else {}


def sample_row(type_, channel: str, user_locale: str, sample: dict) -> BatchRow:
    """Build the delivery row the engine would render, from the sample data (plain values only)."""
    user, note = _section(sample, "user"), _section(sample, "notification")
    values = dict(
        id=0,
        channel=channel,
        attempts=0,
        locked_until=datetime.now(UTC),
        notification_id=0,
        type=type_.type,
        title=str(note.get("title", "")),
        body=str(note.get("body", "")),
        link_path=note.get("link_path") if isinstance(note.get("link_path"), str) else None,
        data=_section(sample, "data"),
        user_id=0,
        email=str(user.get("email", "")),
        display_name=str(user.get("name", "")),
        locale=user_locale,
        timezone="UTC",
        type_label=type_.label,
        priority=type_.priority,
        mandatory=type_.mandatory,
        allowed=True,
        suppressed=False,
    )
    names = {f.name for f in dataclasses.fields(BatchRow)}
    return BatchRow(**{name: values.get(name) for name in names})


def _line_of(exc: BaseException) -> int | None:
    cause = exc.__cause__ or exc
    if getattr(cause, "lineno", None):
        return cause.lineno
    line, tb = None, cause.__traceback__
    while tb is not None:  # Jinja rewrites frames so template lines show as "<template>" frames
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def render_part(part: str, source: str, context: dict) -> tuple[str, Problem | None]:
    """Render one part in the sandbox; a failure becomes a Problem with its line number."""
    try:
        return rendering.render_string(source, context, html=part == "body_html"), None
    except rendering.RenderError as exc:
        line = _line_of(exc)
        lines = source.splitlines()
        source_line = lines[line - 1].strip() if line and 0 < line <= len(lines) else None
        return "", Problem(part, str(exc), line, source_line)


def fallback_chain(user_locale: str, existing: set[str]) -> list[ChainStep]:
    """The lookup order for user_locale and which step finds a template first."""
    chain = locale_chain(user_locale, current_app.config["DEFAULT_LOCALE"])
    used = next((loc for loc in chain if loc in existing), None)
    return [ChainStep(loc, loc in existing, loc == used) for loc in chain]


def build_preview(
    type_,
    channel: str,
    locale: str,
    parts: dict[str, str],
    user_locale: str,
    sample_text: str | None,
    existing_locales: set[str],
    brand=None,
) -> Preview:
    """Render the editor's parts for channel with the sample; collect every problem.

    brand: a tenant's branding (app.tenants.queries.branding_of) the e-mail is previewed with, as its
    notifications are sent (issue 32), or None for the default look.

    The whole preview (every part, then the e-mail) renders within TEMPLATE_PREVIEW_SECONDS: it runs
    in a web thread on every keystroke, so a template that loops for long is a problem, not a wait.
    """
    with rendering.time_budget(current_app.config["TEMPLATE_PREVIEW_SECONDS"]):
        return _build_preview(type_, channel, locale, parts, user_locale, sample_text, existing_locales, brand)


def _build_preview(type_, channel, locale, parts, user_locale, sample_text, existing_locales, brand) -> Preview:
    config = current_app.config
    user_locale = (user_locale or locale).strip() or locale
    preview = Preview(
        channel=channel, user_locale=user_locale, chain=fallback_chain(user_locale, existing_locales | {locale})
    )
    sample, problem = parse_sample(sample_text)
    if problem:
        preview.problems.append(problem)
    row = sample_row(type_, channel, user_locale, sample)
    if brand is not None:
        row = dataclasses.replace(row, tenant_name=brand.name, tenant_logo_url=brand.logo_url,
                                  tenant_color=brand.primary_color, tenant_sender_name=brand.email_sender_name,
                                  tenant_reply_to=brand.reply_to)  # fmt: skip
    unsubscribe = f"{config['BASE_URL']}/unsubscribe/preview"
    context = rendering.template_context(row, config["BASE_URL"], unsubscribe)
    rendered = {}
    for part in ("subject", "body_text", "body_html", "mobile_title", "mobile_subtitle", "mobile_body"):
        if parts.get(part, "").strip():
            rendered[part], problem = render_part(part, parts[part], context)
            if problem:
                preview.problems.append(problem)
    for part in rich_json.RICH_PARTS:
        if parts.get(part, "").strip():
            try:
                document = rich_json.render(part, parts[part], context)
            except rendering.RenderError as exc:
                preview.problems.append(Problem(part, str(exc).removeprefix(f"{part}: ")))
            else:
                preview.rich[part] = json.dumps(document, ensure_ascii=False, indent=2)
    if preview.problems:
        return preview
    if channel == "email":
        template = Template(parts.get("subject", ""), parts.get("body_text", ""), parts.get("body_html", ""))
        email = rendering.render_email(row, template, config["BASE_URL"], unsubscribe)
        preview.subject, preview.text, preview.html_document = email.subject, email.text, email.html
        preview.sender_name, preview.reply_to = row.tenant_sender_name or "", row.tenant_reply_to or ""
        return preview
    if channel == "sms":
        # The SMS channel's own text: the template's, stripped, else the title, body and link on lines.
        text = rendered.get("body_text", "").strip()
        if not text:
            lines = (row.title.strip(), row.body.strip(), context["notification"]["link"])
            text = "\n".join(part for part in lines if part)
        preview.text, preview.sms = text, sms_preview(text, type_.sms_max_segments)
        return preview
    preview.subject = " ".join(rendered.get("subject", row.title).split()) or row.type_label
    preview.text = rendered.get("body_text", row.body)
    if channel == "push":
        link = context["notification"]["link"]
        preview.push_json = push_payload(preview.subject, preview.text, link, f"{row.type}:{row.notification_id}")
        preview.push_bytes = len(preview.push_json.encode("utf-8"))
        if preview.push_bytes > PUSH_LIMIT:
            preview.problems.append(
                Problem(
                    "push payload",
                    f"{preview.push_bytes:,} bytes is over the "
                    f"{PUSH_LIMIT:,}-byte push limit: shorten the title or body",
                )
            )
        title = " ".join(rendered.get("mobile_title", "").split()) or preview.subject
        body = rendered.get("mobile_body", "").strip() or preview.text
        subtitle = " ".join(rendered.get("mobile_subtitle", "").split())
        preview.phones = [PhoneCard("ios", title, subtitle, body), PhoneCard("android", title, "", body)]
    return preview
