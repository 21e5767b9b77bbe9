"""The console's landing page: what is live, what is scheduled, what changed last."""

from __future__ import annotations

from flask import render_template

from app.announcements import queries as announcements
from app.api_keys import queries as api_keys
from app.audit import queries as audit
from app.console.blueprint import bp
from app.message_templates import queries as message_templates
from app.notification_types import queries as notification_types
from app.suppressions import queries as suppressions


@bp.get("/")
def index():
    """Headline counts from each domain, and the last ten audited changes."""
    live = announcements.counts()
    summary = {
        "active_announcements": live["active"],
        "scheduled_announcements": live["scheduled"],
        "next_scheduled_at": live["next_scheduled_at"],
        "types": notification_types.count(),
        "templates": message_templates.count(),
        "suppressions": suppressions.count(),
        "api_keys": api_keys.live_count(),
    }
    return render_template("console/index.html", summary=summary, recent=audit.audit_page(limit=10).rows)
