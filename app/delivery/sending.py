"""One try at one delivery: render (e-mail or push), hand to the provider, time it, classify the outcome."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from app.delivery import rendering
from app.delivery.queries import BatchRow, Template
from app.delivery.unsubscribe import unsubscribe_url
from app.locales import locale_chain
from app.providers import Message, Provider, ProviderError
from app.push import payload as push


@dataclass(frozen=True)
class Result:
    """How one try ended: outcome sent | transient | permanent, with what the ledger stores."""

    row: BatchRow
    outcome: str
    provider: str
    started_at: datetime
    duration_ms: int
    message_id: str | None = None
    error: str | None = None
    kind: str | None = None
    subject: str | None = None
    body: str | None = None
    retry_after: float | None = None
    reached: tuple[str, ...] = ()
    invalidated: tuple[str, ...] = ()


def build_message(
    row: BatchRow, templates: dict[tuple[str, str], Template], config: Mapping, targets: tuple = ()
) -> Message:
    """Render row into a provider Message (raises rendering.RenderError)."""
    if row.channel == "push":
        return build_push(row, templates, config, targets)
    base_url = config["BASE_URL"]
    unsubscribe = unsubscribe_url(base_url, row.user_id, row.type)
    chain = locale_chain(row.locale, config["DEFAULT_LOCALE"])
    template = rendering.pick_template(templates, row.type, chain)
    rendered = rendering.render_email(row, template, base_url, unsubscribe)
    headers = {"List-Unsubscribe": f"<{unsubscribe}>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}
    return Message(
        delivery_id=row.id,
        channel=row.channel,
        to=(row.email or "").strip(),
        to_name=row.display_name,
        subject=rendered.subject,
        text=rendered.text,
        html=rendered.html,
        headers=headers,
    )


def build_push(row: BatchRow, templates: dict[tuple[str, str], Template], config: Mapping, targets: tuple) -> Message:
    """Render row into a push Message: text is the JSON payload (cut to fit), headers TTL/Urgency/Topic."""
    base_url = config["BASE_URL"]
    context = rendering.template_context(row, base_url, unsubscribe_url(base_url, row.user_id, row.type))
    template = rendering.pick_template(templates, row.type, locale_chain(row.locale, config["DEFAULT_LOCALE"]))
    title, body = row.title, row.body
    if template is not None and template.subject.strip():
        title = rendering.render_string(template.subject, context)
    if template is not None and template.body_text.strip():
        body = rendering.render_string(template.body_text, context)
    title = " ".join(title.split()) or row.type_label
    tag = f"{row.type}:{row.notification_id}"  # the console preview uses the same tag
    urgency, ttl = push.urgency(row.priority)
    return Message(
        delivery_id=row.id,
        channel=row.channel,
        to=f"user:{row.user_id}",
        subject=title,
        text=push.fit_payload(title, body, context["notification"]["link"], tag),
        headers={"TTL": str(ttl), "Urgency": urgency, "Topic": push.topic(tag)},
        targets=tuple(targets),
    )


def prepare(
    row: BatchRow, provider: Provider, templates: dict[tuple[str, str], Template], config: Mapping, targets: tuple = ()
) -> Message | Result:
    """Render row into a Message; a render error comes back as its permanent Result."""
    try:
        return build_message(row, templates, config, targets)
    except rendering.RenderError as exc:
        return Result(row, "permanent", provider.name, datetime.now(UTC), 0, error=f"render: {exc}", kind="render")


def send(row: BatchRow, message: Message, provider: Provider) -> Result:
    """Hand one prepared message to the provider and time it; provider errors become a Result."""
    started_at = datetime.now(UTC)
    clock = time.perf_counter()
    try:
        receipt = provider.send(message)
    except ProviderError as exc:
        return _failed(row, provider, started_at, round((time.perf_counter() - clock) * 1000), exc, message)
    elapsed = round((time.perf_counter() - clock) * 1000)
    return Result(
        row,
        "sent",
        receipt.provider,
        started_at,
        elapsed,
        message_id=receipt.message_id,
        subject=message.subject,
        body=message.text,
        reached=receipt.reached,
        invalidated=receipt.invalidated,
    )


def attempt(
    row: BatchRow, provider: Provider, templates: dict[tuple[str, str], Template], config: Mapping, targets: tuple = ()
) -> Result:
    """Render and send row once (targets: the recipient's push subscriptions, for push rows)."""
    prepared = prepare(row, provider, templates, config, targets)
    return prepared if isinstance(prepared, Result) else send(row, prepared, provider)


def _failed(
    row: BatchRow, provider: Provider, started_at: datetime, elapsed: int, exc: ProviderError, message: Message
) -> Result:
    return Result(
        row,
        "transient" if exc.transient else "permanent",
        provider.name,
        started_at,
        elapsed,
        error=str(exc)[:2000],
        kind=exc.kind,
        subject=message.subject,
        body=message.text,
        retry_after=exc.retry_after,
        invalidated=exc.invalidated,
    )
