"""@documented: what a /v1 view tells the OpenAPI document, which app/api/openapi.py builds by walking the routes.

Only what the code cannot say is written here (the summary, what it answers, the errors of its own logic). The
rest is read from the view's other decorators, so it cannot disagree with what the view does: the body and
query models from @takes_json / @takes_query / @idempotent (body_model, query_model, takes_idempotency_key)
and the scope from @auth.requires (required_scope).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel

# An answer's body: a model, one of several models, or nothing (204, 101).
Answer = type[BaseModel] | tuple[type[BaseModel], ...] | None


@dataclass(frozen=True)
class Doc:
    """One operation's own part of the document."""

    operation_id: str
    summary: str
    responses: Mapping[int, Answer]
    errors: tuple[int, ...] = ()  # statuses of the view's own refusals (the common ones are added by the builder)
    description: str = ""
    tags: tuple[str, ...] = ("notifications",)
    auth: str | None = "bearerAuth"  # the security scheme: bearerAuth (an API key), userToken (the feed), None


def documented(operation_id: str, summary: str, responses: Mapping[int, Answer], **details) -> Callable:
    """Attach the operation's Doc to the view (put it right under the route decorator, above the others)."""

    def decorate(view):
        view.openapi = Doc(operation_id, summary, responses, **details)
        return view

    return decorate


def body_limit_setting(view) -> str:
    """The setting that bounds a view's body: its own (`body_limit_setting`, a bulk call), else API_MAX_BODY_BYTES."""
    return getattr(view, "body_limit_setting", "API_MAX_BODY_BYTES")
