"""Chat templates' rich parts: Slack Block Kit, a Teams Adaptive Card, a LINE Flex message, as JSON.

An operator writes the JSON with template expressions inside its strings (`"text": "{{ notification.title }}"`).
The JSON is parsed first and only its string values are rendered, each in the text sandbox, so no value a
notification carries can break out of its string or change the document's shape. check() is what the
editor runs before saving (valid JSON, the shape the service expects, within the service's size limits, every
string a template that compiles); render() is what the chat channel sends.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from app.delivery import rendering

# Each rich part and the chat provider that reads it.
RICH_PARTS = {"slack_blocks": "slack", "teams_card": "msteams", "line_flex": "line"}
# Slack allows 50 blocks per message; a Flex message's JSON must stay under LINE's 30 KB; an Adaptive Card
# sent to a Teams webhook must fit in its 28 KB message. Templates stay well under each before rendering.
MAX_SLACK_BLOCKS = 50
MAX_SOURCE_BYTES = 24 * 1024
MAX_DEPTH = 20
FLEX_CONTAINERS = ("bubble", "carousel")


class RichJsonError(ValueError):
    """The rich part is not JSON the service takes (the message says why, in English, for logs and the editor)."""


def parse(part: str, source: str) -> object:
    """The part's JSON checked for its service's shape; a RichJsonError says what is wrong."""
    if len(source.encode("utf-8")) > MAX_SOURCE_BYTES:
        raise RichJsonError(f"the JSON is larger than {MAX_SOURCE_BYTES // 1024} KB")
    try:
        document = json.loads(source)
    except json.JSONDecodeError as exc:
        raise RichJsonError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    _check_depth(document, 0)
    if part == "slack_blocks":
        if isinstance(document, dict) and isinstance(document.get("blocks"), list):
            document = document["blocks"]  # a Block Kit Builder export: {"blocks": [...]}
        if not isinstance(document, list) or not all(isinstance(b, dict) and b.get("type") for b in document):
            raise RichJsonError('Slack blocks are a JSON array of blocks, each with a "type"')
        if not 0 < len(document) <= MAX_SLACK_BLOCKS:
            raise RichJsonError(f"Slack takes 1 to {MAX_SLACK_BLOCKS} blocks in one message")
    elif part == "teams_card":
        if not isinstance(document, dict) or document.get("type") != "AdaptiveCard":
            raise RichJsonError('a Teams card is a JSON object with "type": "AdaptiveCard"')
    elif part == "line_flex":
        if not isinstance(document, dict) or document.get("type") not in FLEX_CONTAINERS:
            raise RichJsonError('a LINE Flex message is a JSON object with "type": "bubble" or "carousel"')
    else:
        raise RichJsonError(f"unknown rich part {part!r}")
    return document


def _check_depth(value: object, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise RichJsonError(f"the JSON is nested deeper than {MAX_DEPTH} levels")
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        _check_depth(child, depth + 1)


def _map_strings(value: object, render: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return render(value) if "{" in value else value  # most strings hold no expression: skip the sandbox
    if isinstance(value, dict):
        return {key: _map_strings(child, render) for key, child in value.items()}
    if isinstance(value, list):
        return [_map_strings(child, render) for child in value]
    return value


def _mrkdwn_escaped(value: object) -> object:
    """Every string of the context as Slack mrkdwn needs it: &, < and > escaped, so no value can write a mention
    (<!channel>) or a link of its own; the operator's own markup around the values stays as written."""
    if isinstance(value, str):
        return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if isinstance(value, dict):
        return {key: _mrkdwn_escaped(child) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [_mrkdwn_escaped(child) for child in value]
    return value


def render(part: str, source: str, context: dict) -> object:
    """The part's document with every string rendered; raises rendering.RenderError (permanent for the row)."""
    try:
        document = parse(part, source)
    except RichJsonError as exc:
        raise rendering.RenderError(f"{part}: {exc}") from None
    if part == "slack_blocks":
        context = _mrkdwn_escaped(context)
    return _map_strings(document, lambda text: rendering.render_string(text, context))


def check(part: str, source: str, context: dict) -> str | None:
    """What is wrong with the part rendered against context (the editor's sample), or None."""
    try:
        render(part, source, context)
    except rendering.RenderError as exc:
        return str(exc)
    return None
