"""The audit log page: filter by actor, action, target and time; keyset pages on (created_at, id)."""

from __future__ import annotations

from flask import render_template, request

from app.console import audit, queries
from app.console.forms import parse_local
from app.console.views import bp, operator_zone


def filters_from(args) -> queries.AuditFilters:
    """Read the filters from the query string (times in the operator's zone)."""
    zone = operator_zone()
    errors = [
        f"{label} is not a date and time."
        for name, label in (("since", "From"), ("until", "Until"))
        if args.get(name, "").strip() and parse_local(args.get(name), zone) is None
    ]
    return queries.AuditFilters(
        actor=args.get("actor", "")[:320].strip(),
        action=args.get("action", "")[:100].strip(),
        target_type=args.get("target_type", "")[:100].strip(),
        target_id=args.get("target_id", "")[:200].strip(),
        since=parse_local(args.get("since"), zone),
        until=parse_local(args.get("until"), zone),
        errors=errors,
    )


@bp.get("/audit")
def audit_log():
    """Every operator action, newest first."""
    filters = filters_from(request.args)
    page = queries.audit_page(filters, request.args.get("cursor"))
    args = {k: v for k, v in request.args.items() if k != "cursor" and v}
    return render_template(
        "console/audit.html",
        filters=filters,
        page=page,
        args=args,
        actions=audit.ACTIONS,
        target_types=audit.TARGET_TYPES,
    )


@bp.app_template_filter("audit_changes")
def audit_changes(entry) -> list:
    """(field, before, after) rows for an audit entry, only the fields that changed."""
    return audit.changed_fields(entry["before"], entry["after"])
