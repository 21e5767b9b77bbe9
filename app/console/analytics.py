"""Delivery analytics: accepted … clicked, rates and times per type, channel, provider or tenant, from the rollups.

The range and filters live in the URL (a GET form), so a link shows the same figures; the CSV export takes the
same arguments. Everything is read from delivery_rollups (app/analytics/queries.py), never from the ledger.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

from flask import Response, render_template, request
from flask_babel import gettext, lazy_gettext
from flask_login import current_user

from app import replicas
from app.analytics import queries, service
from app.console import analytics_charts
from app.console.blueprint import bp
from app.console.labels import label
from app.console.listing import ListArgs
from app.delivery.channels import channel_labels
from app.delivery.ledger_queries import log_channels
from app.limits import TENANT_KEY_MAX, TYPE_KEY_MAX
from app.notification_types import queries as type_queries

PERIODS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30), "90d": timedelta(days=90)}
PERIOD_WORDS = {
    "24h": lazy_gettext("Last 24 hours"),
    "7d": lazy_gettext("Last 7 days"),
    "30d": lazy_gettext("Last 30 days"),
    "90d": lazy_gettext("Last 90 days"),
}
GROUP_WORDS = {
    "type": lazy_gettext("Type"),
    "channel": lazy_gettext("Channel"),
    "provider": lazy_gettext("Provider"),
    "tenant": lazy_gettext("Tenant"),
}
CSV_COLUMNS = ("section", "key", "accepted", "sent", "delivered", "bounced", "complained", "opened", "clicked",
               "failed", "skipped", "delivery_rate", "bounce_rate", "open_rate", "click_rate", "sent_p50_ms",
               "sent_p99_ms", "delivered_p50_ms", "delivered_p99_ms")  # fmt: skip
COUNT_COLUMNS = CSV_COLUMNS[2:11]


def _range(args: ListArgs, now: datetime) -> tuple[datetime, datetime]:
    """[since, until) in UTC: whole UTC days from the since and until dates, else the period up to this hour's end."""
    since_text, until_text = (args.args.get(name, "").strip() for name in ("since", "until"))
    if since_text or until_text:
        try:
            first = datetime.strptime(since_text, "%Y-%m-%d").replace(tzinfo=UTC) if since_text else None
            last = datetime.strptime(until_text, "%Y-%m-%d").replace(tzinfo=UTC) if until_text else None
        except ValueError:
            args.errors.append(gettext("From and until must be dates (YYYY-MM-DD): the period was used instead."))
        else:
            until = (last or now.replace(hour=0, minute=0, second=0, microsecond=0)) + timedelta(days=1)
            since = first or until - timedelta(days=7)
            if since < until and until - since <= queries.MAX_RANGE:
                args.values.update({k: v for k, v in (("since", since_text), ("until", until_text)) if v})
                return since, until
            args.errors.append(gettext("The dates must give a range of 1 to 400 days: the period was used instead."))
    period = args.choice("period", PERIODS, gettext("period")) or "7d"
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    if period != "24h":
        end = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    return end - PERIODS[period], end


def read_query(values, now: datetime | None = None) -> tuple[queries.Query, ListArgs]:
    """The query the arguments ask for, and what was read (with a message for each value ignored)."""
    args = ListArgs(values)
    since, until = _range(args, now or datetime.now(UTC))
    tenant_key = args.text("tenant", TENANT_KEY_MAX)
    tenant_id = queries.tenant_id(tenant_key) if tenant_key else None
    if tenant_key and tenant_id is None:
        args.errors.append(gettext("No tenant has the key “%(key)s”: that filter was ignored.", key=tenant_key[:40]))
        args.values.pop("tenant")
    query = queries.Query(
        since=since,
        until=until,
        type=args.text("type", TYPE_KEY_MAX),
        channel=args.choice("channel", log_channels(), gettext("channel")),
        provider=args.choice("provider", queries.PROVIDERS, gettext("provider")),
        tenant_id=tenant_id,
        group=args.choice("group", queries.GROUPS, gettext("grouping")) or "type",
    )
    return query, args


def _group_label(group: str, key, tenants: dict[int, str]) -> str:
    if group == "tenant":
        return tenants.get(key, gettext("(no tenant)")) if key else gettext("(no tenant)")
    if group == "channel":
        return str(label(channel_labels(), key))
    return key or gettext("(none)")


def _bucket_label(grain: str):
    return (lambda at: at.strftime("%m-%d %H:00")) if grain == "hour" else (lambda at: at.strftime("%Y-%m-%d"))


def _figures(query: queries.Query) -> tuple[queries.Report, dict[int, str]]:
    """The report and the tenants' keys, from a replica when there is one (rollups may be a moment behind)."""
    return replicas.read(int(current_user.get_id()), lambda: (queries.report(query), queries.tenant_keys()))


@bp.get("/analytics")
def analytics():
    """The figures of the range, per group, with two charts and their tables."""
    query, args = read_query(request.args)
    report, tenants = _figures(query)
    labelled = [(_group_label(query.group, g.key, tenants), g) for g in report.groups]
    return render_template(
        "console/analytics.html",
        query=query,
        args=args,
        report=report,
        groups=labelled,
        series=analytics_charts.series_chart(report.series, _bucket_label(query.grain)),
        times=analytics_charts.times_chart(labelled),
        bucket_label=_bucket_label(query.grain),
        seconds=analytics_charts.seconds_text,
        outcomes=analytics_charts.OUTCOMES,
        outcome_parts=analytics_charts.outcomes,
        outcome_words=analytics_charts.OUTCOME_WORDS,
        periods=PERIOD_WORDS,
        group_words=GROUP_WORDS,
        types=type_queries.notification_types(),
        tenants=sorted(tenants.values()),
        channels=log_channels(),
        providers=queries.PROVIDERS,
        oldest_waiting=service.oldest_waiting(),
        csv_args={**args.values},
    )


def _cell(value) -> str:
    """A CSV cell; text that a spreadsheet would run as a formula is quoted with a leading apostrophe."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


@bp.get("/analytics.csv")
def analytics_csv():
    """The same figures as the page, one CSV: a row per group, the total, a row per period, a row per skip reason."""
    query, _ = read_query(request.args)
    report, tenants = _figures(query)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)

    def figures_row(section: str, key, f: queries.Figures) -> list:
        return [section, key, *(f.counts[n] for n in COUNT_COLUMNS), *f.rates.values(), *f.times.values()]

    for group in report.groups:
        key = tenants.get(group.key, "") if query.group == "tenant" else group.key
        writer.writerow([_cell(v) for v in figures_row(query.group, key, group)])
    writer.writerow([_cell(v) for v in figures_row("total", "", report.total)])
    for bucket, counts in report.series:
        writer.writerow([_cell(v) for v in ["period", bucket.isoformat(), *(counts[n] for n in COUNT_COLUMNS)]])
    for reason, count in report.skips:
        writer.writerow([_cell(v) for v in ["skip_reason", reason, "", "", "", "", "", "", "", "", count]])
    name = f"delivery-analytics-{query.since:%Y%m%d%H}-{query.until:%Y%m%d%H}.csv"
    return Response(
        out.getvalue(),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"', "Cache-Control": "no-store"},
    )
