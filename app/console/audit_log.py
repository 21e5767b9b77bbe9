"""The audit log page: filter by actor, action, target and time; keyset pages on (created_at, id)."""

from __future__ import annotations

from flask import render_template, request

from app.audit import queries as audit_queries
from app.audit import service as audit
from app.console.blueprint import bp, operator_zone
from app.console.listing import page_args, time_window
from app.limits import EMAIL_MAX, EXTERNAL_ID_MAX, FILTER_TEXT_MAX


def filters_from(args) -> audit_queries.AuditFilters:
    """Read the filters from the query string (times in the operator's zone)."""
    return audit_queries.AuditFilters(
        actor=args.get("actor", "")[:EMAIL_MAX].strip(),
        action=args.get("action", "")[:FILTER_TEXT_MAX].strip(),
        target_type=args.get("target_type", "")[:FILTER_TEXT_MAX].strip(),
        target_id=args.get("target_id", "")[:EXTERNAL_ID_MAX].strip(),
        **time_window(args, operator_zone()),
    )


@bp.get("/audit")
def audit_log():
    """Every operator action, newest first."""
    filters = filters_from(request.args)
    page = audit_queries.audit_page(filters, request.args.get("cursor"))
    return render_template(
        "console/audit.html",
        filters=filters,
        page=page,
        args=page_args(request.args),
        actions=audit.ACTIONS,
        target_types=audit.TARGET_TYPES,
    )
