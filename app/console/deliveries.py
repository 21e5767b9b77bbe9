"""The delivery log: search by user, type, tenant, channel, status and time; one delivery's attempts, content and the
workflow run of its notification."""

from __future__ import annotations

from flask import make_response, render_template, request
from flask_babel import gettext
from flask_login import current_user

from app import replicas, telemetry
from app.console import workflow_words
from app.console.blueprint import bp, operator_zone
from app.console.listing import channel_choice, checked_choice, page_args, time_window
from app.delivery import ledger_queries
from app.limits import EMAIL_MAX, TENANT_KEY_MAX, TYPE_KEY_MAX
from app.notification_types import queries as type_queries
from app.notify.queries import notification_events
from app.pagination import parse_id_cursor
from app.tenants import queries as tenant_queries
from app.web.headers import sent_content_csp


def log_filters(args) -> ledger_queries.LogFilters:
    """Read the filters from the query string; a value that cannot be right becomes an error, not a guess."""
    window = time_window(args, operator_zone())
    return ledger_queries.LogFilters(
        user=args.get("user", "")[:EMAIL_MAX].strip(),
        type=args.get("type", "")[:TYPE_KEY_MAX].strip(),
        tenant=args.get("tenant", "")[:TENANT_KEY_MAX].strip(),
        channel=channel_choice(args, ledger_queries.log_channels(), window["errors"]),
        status=checked_choice(
            args,
            "status",
            ledger_queries.LOG_STATUSES,
            gettext("The status must be one of %(choices)s.", choices=", ".join(ledger_queries.LOG_STATUSES)),
            window["errors"],
        ),
        **window,
    )


def _viewer() -> int:
    return int(current_user.get_id())


@bp.get("/deliveries")
def deliveries():
    """Every delivery, newest first, fifty at a time (keyset on the id)."""
    filters = log_filters(request.args)
    cursor = parse_id_cursor(request.args.get("cursor"))
    # The log may be a moment behind: a replica answers when there is one (app/replicas.py).
    page = None if filters.errors else replicas.read(_viewer(), lambda: ledger_queries.delivery_page(filters, cursor))
    return render_template(
        "console/deliveries.html",
        filters=filters,
        page=page,
        args=page_args(request.args),
        types=type_queries.notification_types(),
        tenants=tenant_queries.tenants(),
        statuses=ledger_queries.LOG_STATUSES,
        channels=ledger_queries.log_channels(),
    ), 422 if filters.errors else 200


@bp.get("/deliveries/<int:delivery_id>")
def delivery(delivery_id: int):
    """One delivery: its state, the timeline of its attempts, what was rendered for it, and its notification's run."""
    row = ledger_queries.delivery(delivery_id)
    if row is None:
        return render_template("console/missing.html", what="delivery"), 404
    response = make_response(
        render_template(
            "console/deliveries_detail.html",
            d=row,
            attempts=ledger_queries.attempts(delivery_id),
            chain=ledger_queries.chain(row["notification_id"], row["user_id"]) if row["route_rank"] is not None else [],
            events=notification_events(row["notification_id"]),
            trace_id=telemetry.trace_id_of(row["traceparent"]),
            run=ledger_queries.workflow_run(row),
            words=workflow_words,
        )
    )
    # Rendered HTML is shown in a sandboxed srcdoc iframe, which inherits this page's CSP: inline
    # styles, but nothing fetched from elsewhere (app/web/headers.py sent_content_csp).
    response.headers["Content-Security-Policy"] = sent_content_csp()
    return response
