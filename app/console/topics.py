"""Topic fanout pages: every notification sent to a topic, newest first, with its progress; one fanout's detail.

The fanout runs in a job (app/topics/fanout.py); the progress bar is the campaigns' fragment, polled every second
while the fanout runs.
"""

from __future__ import annotations

from flask import render_template, request, url_for

from app.console.blueprint import bp
from app.pagination import parse_id_cursor
from app.topics import queries

PAGE_SIZE = 50


@bp.get("/topic-fanouts")
def topic_fanouts():
    """Every topic notification's fanout, newest first, keyset-paged by id."""
    page = queries.fanouts(parse_id_cursor(request.args.get("cursor")), PAGE_SIZE)
    return render_template("console/topic_fanouts.html", page=page)


@bp.get("/topic-fanouts/<int:fanout_id>")
def topic_fanout(fanout_id: int):
    """One fanout: what was sent, to which topic, and how far it is."""
    item = queries.fanout_detail(fanout_id)
    if item is None:
        return render_template("console/missing.html", what="topic fanout"), 404
    return render_template("console/topic_fanout_detail.html", item=item, progress=queries.progress(fanout_id),
                           progress_url=url_for("console.topic_fanout_progress", fanout_id=fanout_id))  # fmt: skip


@bp.get("/topic-fanouts/<int:fanout_id>/progress")
def topic_fanout_progress(fanout_id: int):
    """The progress bar fragment (polled while the fanout runs)."""
    progress = queries.progress(fanout_id)
    if progress is None:
        return "", 404
    url = url_for("console.topic_fanout_progress", fanout_id=fanout_id)
    return render_template("console/_progress.html", progress=progress, progress_url=url)
