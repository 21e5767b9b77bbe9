"""The dead-letter queue: failed deliveries by error kind, provider, type and time; replay or discard.

One row is replayed or discarded right here (its job follows the commit); everything matching a
filter becomes a bulk operation run by a background job, whose progress bar this page polls. The
writes, and their audit rows, are app/delivery/dlq.py. Discarding marks a row `skipped` with the reason.
"""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_babel import gettext, ngettext
from flask_login import current_user

from app.console.actions import run_action
from app.console.blueprint import bp, operator_zone
from app.console.listing import channel_choice, time_window
from app.delivery import dlq as dlq_service
from app.delivery import ledger_queries
from app.limits import FILTER_TEXT_MAX, TYPE_KEY_MAX
from app.links import same_site_path
from app.notification_types import queries as type_queries
from app.pagination import parse_id_cursor
from app.web.templating import number as format_number

FILTER_NAMES = ("q", "error_kind", "provider", "type", "channel", "since", "until")


def dlq_filters(values) -> ledger_queries.DlqFilters:
    """Read the DLQ filters from a query string or a form (times in the operator's zone)."""
    window = time_window(values, operator_zone())
    return ledger_queries.DlqFilters(
        error_kind=values.get("error_kind", "")[:FILTER_TEXT_MAX].strip(),
        provider=values.get("provider", "")[:FILTER_TEXT_MAX].strip(),
        type=values.get("type", "")[:TYPE_KEY_MAX].strip(),
        channel=channel_choice(values, ledger_queries.log_channels(), window["errors"]),
        q=values.get("q", "")[:FILTER_TEXT_MAX].strip(),
        **window,
    )


def _filter_args(values) -> dict:
    return {name: values.get(name) for name in FILTER_NAMES if values.get(name)}


def _back() -> str:
    """Where a row action returns to: the page it was posted from (console pages only)."""
    target = request.form.get("next", "")
    back = same_site_path(target) if target.startswith("/console/") else None
    return back or url_for("console.dlq")


@bp.get("/dlq")
def dlq():
    """Failed deliveries, newest first, with the bulk actions for everything matching the filters."""
    filters = dlq_filters(request.args)
    page, matching = None, 0
    if not filters.errors:
        page = ledger_queries.dlq_page(filters, parse_id_cursor(request.args.get("cursor")))
        matching = ledger_queries.dlq_count(filters)
    return render_template(
        "console/dlq.html",
        filters=filters,
        page=page,
        matching=matching,
        args=_filter_args(request.args),
        facets=ledger_queries.dlq_facets(),
        types=type_queries.notification_types(),
        channels=ledger_queries.log_channels(),
        operations=ledger_queries.bulk_operations(),
    ), 422 if filters.errors else 200


@bp.post("/dlq/<int:delivery_id>/replay")
def replay_delivery(delivery_id: int):
    """Replay one failed delivery: back to pending with its attempts reset; its job follows the commit."""
    return run_action(
        lambda: dlq_service.replay_one(current_user, delivery_id),
        success=gettext("Delivery %(id)s replayed.", id=delivery_id),
        redirect_to=_back(),
    )


@bp.post("/dlq/<int:delivery_id>/discard")
def discard_delivery(delivery_id: int):
    """Discard one failed delivery with a reason (it becomes skipped: 'discarded: <reason>')."""
    return run_action(
        lambda: dlq_service.discard_one(current_user, delivery_id, request.form.get("reason", "")),
        success=gettext("Delivery %(id)s discarded.", id=delivery_id),
        redirect_to=_back(),
    )


@bp.post("/dlq/bulk")
def bulk_dlq():
    """Replay or discard every failed delivery matching the filters, in a background job."""
    filters = dlq_filters(request.form)
    args = _filter_args(request.form)
    if filters.errors:
        flash(" ".join(filters.errors), "error")
        return redirect(url_for("console.dlq", **args))
    # The operation's job follows the commit (when Redis is down the sweeper starts it).
    return run_action(
        lambda: dlq_service.create_bulk(
            current_user, request.form.get("kind", ""), filters, request.form.get("reason", "")
        ),
        success=_bulk_started,
        redirect_to=lambda operation: url_for("console.dlq", **args) + f"#operation-{operation.id}",
        refused_to=url_for("console.dlq", **args),
    )


def _bulk_started(operation) -> str:
    """What the operator reads once a bulk operation is queued."""
    if operation.kind == "replay":
        return ngettext(
            "Replaying %(count)s failed delivery in the background.",
            "Replaying %(count)s failed deliveries in the background.",
            operation.total,
            count=format_number(operation.total),
        )
    return ngettext(
        "Discarding %(count)s failed delivery in the background.",
        "Discarding %(count)s failed deliveries in the background.",
        operation.total,
        count=format_number(operation.total),
    )


@bp.get("/dlq/operations/<int:operation_id>/progress")
def bulk_progress(operation_id: int):
    """The progress fragment of one bulk operation (polled while it is queued or running)."""
    operation = ledger_queries.bulk_operation(operation_id)
    if operation is None:
        return "", 404
    return render_template("console/_progress_bulk.html", op=operation)
