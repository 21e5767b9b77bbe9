"""What an API key may do: the scope names, what each allows, and the check of a requested set."""

from __future__ import annotations

from collections.abc import Iterable

from flask_babel import gettext, lazy_gettext

from app.refusal import Refused

# Ordered as shown in the console, the CLI and the OpenAPI document.
SCOPES = {
    "notifications:write": "Send notifications (POST /v1/notifications).",
    "notifications:read": "Read back the notifications this key sent (with delivery state) and members' badge counts.",
    "users:write": "Create, update and erase recipients (PUT and DELETE /v1/users/{id}).",
    "users:read": "Export a member's profile, preferences, notifications and deliveries (GET /v1/users/{id}/export).",
    "links:create": "Mint one-time sign-in links, which sign a member in: give it only to the product's backend.",
    "feed:issue": "Mint user tokens (POST /v1/user-tokens): the product's pages read and update one member's feed.",
    "workflows:read": "Read notification types' workflows: the draft, the versions (GET /v1/workflows/{type}).",
    "workflows:write": "Write workflow drafts and publish them (PUT /v1/workflows/{type}, POST …/publish).",
    "tenants:read": "Read tenants, their branding and default preferences (GET /v1/tenants/{key}).",
    "tenants:write": "Create, update and delete tenants and set their default preferences (PUT /v1/tenants/{key}).",
    "topics:read": "Read topics' followers and a member's topics (GET /v1/topics/{key}/subscribers).",
    "topics:write": "Create and delete topics and change their followers (PUT /v1/topics/{key}, POST …/subscribers).",
}
# The same descriptions in the console operator's language.
SCOPE_LABELS = {
    "notifications:write": lazy_gettext("Send notifications (POST /v1/notifications)."),
    "notifications:read": lazy_gettext(
        "Read back the notifications this key sent (with delivery state) and members' badge counts."
    ),
    "users:write": lazy_gettext("Create, update and erase recipients (PUT and DELETE /v1/users/{id})."),
    "users:read": lazy_gettext(
        "Export a member's profile, preferences, notifications and deliveries (GET /v1/users/{id}/export)."
    ),
    "links:create": lazy_gettext(
        "Mint one-time sign-in links, which sign a member in: give it only to the product's backend."
    ),
    "feed:issue": lazy_gettext(
        "Mint user tokens (POST /v1/user-tokens): the product's pages read and update one member's feed."
    ),
    "workflows:read": lazy_gettext(
        "Read notification types' workflows: the draft, the versions (GET /v1/workflows/{type})."
    ),
    "workflows:write": lazy_gettext(
        "Write workflow drafts and publish them (PUT /v1/workflows/{type}, POST …/publish)."
    ),
    "tenants:read": lazy_gettext("Read tenants, their branding and default preferences (GET /v1/tenants/{key})."),
    "tenants:write": lazy_gettext(
        "Create, update and delete tenants and set their default preferences (PUT /v1/tenants/{key})."
    ),
    "topics:read": lazy_gettext("Read topics' followers and a member's topics (GET /v1/topics/{key}/subscribers)."),
    "topics:write": lazy_gettext(
        "Create and delete topics and change their followers (PUT /v1/topics/{key}, POST …/subscribers)."
    ),
}
# A new key can only send (least privilege); the database column has the same default (0007_security).
DEFAULT_SCOPES = ("notifications:write",)


def normalize(names: Iterable[str]) -> tuple[str, ...]:
    """Return names as a set in SCOPES order; Refused if one is unknown or none is given."""
    wanted = {name.strip() for name in names}
    unknown = sorted(wanted - SCOPES.keys())
    if unknown:
        raise Refused(
            gettext(
                "Unknown scope %(scope)s: choose from %(choices)s.", scope=repr(unknown[0]), choices=", ".join(SCOPES)
            )
        )
    if not wanted:
        raise Refused(gettext("Give the key at least one scope."))
    return tuple(name for name in SCOPES if name in wanted)
