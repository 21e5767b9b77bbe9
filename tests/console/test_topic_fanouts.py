"""Topic fanout pages: the list with progress, one fanout's detail, the polled progress fragment, roles."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from tests.factories import NotificationTypeFactory
from tests.support.html import one, parse


def _fanout(status: str = "running", done: int = 250, total: int = 1000) -> int:
    NotificationTypeFactory(type="comment")
    topic_id = db.session.execute(
        sa.text("INSERT INTO topics (key, name) VALUES ('project:42', 'Project Apollo') RETURNING id")
    ).scalar_one()
    return db.session.execute(
        sa.text(
            "INSERT INTO topic_fanouts (topic_id, topic_key, type, title, body, dedupe_key, status, done, total) "
            "VALUES (:t, 'project:42', 'comment', 'Ann commented', 'Nice', 'c:1', :s, :d, :n) RETURNING id"
        ),
        {"t": topic_id, "s": status, "d": done, "n": total},
    ).scalar_one()


def test_pages_need_the_operator_role(client, member):
    fanout_id = _fanout()
    for url in ("/console/topic-fanouts", f"/console/topic-fanouts/{fanout_id}",
                f"/console/topic-fanouts/{fanout_id}/progress"):  # fmt: skip
        assert client.get(url).status_code == 403


def test_the_list_shows_each_fanout_with_its_progress(client, operator):
    fanout_id = _fanout()
    html = client.get("/console/topic-fanouts").get_data(as_text=True)
    row = one(html, f"tr#topic-fanout-{fanout_id}")
    assert "Ann commented" in row.get_text() and "project:42" in row.get_text()
    assert row.select_one("progress")["value"] == "25"
    links = [a.get_text() for a in parse(html).select('nav[aria-label="Console"] a')]
    assert "Topics" in links


def test_the_detail_polls_while_running_and_stops_when_done(client, operator):
    fanout_id = _fanout()
    html = client.get(f"/console/topic-fanouts/{fanout_id}").get_data(as_text=True)
    bar = one(html, f"#topic-fanout-progress-{fanout_id}")
    assert bar["hx-get"] == f"/console/topic-fanouts/{fanout_id}/progress"
    assert "250 of 1,000 users" in bar.get_text()
    db.session.execute(sa.text("UPDATE topic_fanouts SET status = 'done', done = 1000"))
    fragment = client.get(f"/console/topic-fanouts/{fanout_id}/progress").get_data(as_text=True)
    done = one(fragment, f"#topic-fanout-progress-{fanout_id}")
    assert not done.has_attr("hx-get") and "100 %" in done.get_text()


def test_an_unknown_fanout_is_404(client, operator):
    assert client.get("/console/topic-fanouts/999999").status_code == 404
    assert client.get("/console/topic-fanouts/999999/progress").status_code == 404
    assert "No topic notifications yet." in client.get("/console/topic-fanouts").get_data(as_text=True)
