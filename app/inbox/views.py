"""The end user's inbox pages and fragments."""
from __future__ import annotations

from flask import Blueprint, render_template, request
from flask_login import current_user, login_required

from app.inbox import queries

bp = Blueprint("inbox", __name__)


@bp.app_context_processor
def inject_badge():
    """Give every page the signed-in user's badge count for the header."""
    if not current_user.is_authenticated:
        return {}
    return {"badge_count": queries.badge_count(current_user.id)}


@bp.get("/")
@login_required
def home():
    """The inbox is the home page."""
    return index()


@bp.get("/inbox")
@login_required
def index():
    """Show announcements and one page of personal notifications."""
    filter_name = request.args.get("filter", "all")
    page = queries.notification_page(current_user.id, filter_name, request.args.get("cursor"))
    announcements = queries.active_announcements(current_user.id) if filter_name != "archived" else []
    return render_template("inbox/index.html", page=page, filter_name=filter_name, announcements=announcements)


@bp.get("/inbox/badge")
@login_required
def badge():
    """Return the badge fragment alone."""
    return render_template("_badge.html")
