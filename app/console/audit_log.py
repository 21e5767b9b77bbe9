"""The audit log page: filter by actor, action, target and time; keyset pages on (created_at, id)."""

from __future__ import annotations

from flask import render_template, request

from app.audit import queries as audit_queries
from app.audit import service as audit
from app.console.blueprint import bp, operator_zone
from app.console.listing import time_errors
from app.limits import EMAIL_MAX, EXTERNAL_ID_MAX, FILTER_TEXT_MAX
from app.timezones import parse_local


def filters_from(args) -> audit_queries.AuditFilters:
    """Read the filters from the query string (times in the operator's zone)."""
    zone = operator_zone()
    errors = time_errors(args, zone)
    return audit_queries.AuditFilters(
        actor=args.get("actor", "")[:EMAIL_MAX].strip(),
        action=args.get("action", "")[:FILTER_TEXT_MAX].strip(),
        target_type=args.get("target_type", "")[:FILTER_TEXT_MAX].strip(),
        target_id=args.get("target_id", "")[:EXTERNAL_ID_MAX].strip(),
        since=parse_local(args.get("since"), zone),
        until=parse_local(args.get("until"), zone),
        errors=errors,
    )


@bp.get("/audit")
def audit_log():
    """Every operator action, newest first."""
    filters = filters_from(request.args)
    page = audit_queries.audit_page(filters, request.args.get("cursor"))
    args = {k: v for k, v in request.args.items() if k != "cursor" and v}
    return render_template(
        "console/audit.html",
        filters=filters,
        page=page,
        args=args,
        actions=audit.ACTIONS,
        target_types=audit.TARGET_TYPES,
    )
