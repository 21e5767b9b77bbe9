"""Jinja filters and globals shared by every template."""

from __future__ import annotations

from flask import Flask, current_app

from app.console.markdown import announcement_html
from app.inbox.queries import badge_text


def init_app(app: Flask) -> None:
    """Register filters and globals."""
    app.add_template_filter(badge_text, "badge_text")
    app.add_template_filter(announcement_html, "announcement_html")

    @app.context_processor
    def navigation():
        return {"nav_endpoints": current_app.view_functions.keys(), "oob": False}
