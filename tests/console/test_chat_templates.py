"""Chat templates (issue 29 item 7): the rich parts are checked as JSON for each service in the editor, shown
rendered in the preview, and a wording whose JSON is wrong is not saved."""

from __future__ import annotations

import html
import json

import pytest

from app.models import MessageTemplate
from tests.factories import NotificationTypeFactory
from tests.support.html import one, parse

URL = "/console/templates/comment/chat/en"
BLOCKS = json.dumps([{"type": "section", "text": {"type": "mrkdwn", "text": "*{{ notification.title }}*"}}])
CARD = json.dumps(
    {"type": "AdaptiveCard", "version": "1.4", "body": [{"type": "TextBlock", "text": "{{ user.name }}"}]}
)


@pytest.fixture(autouse=True)
def comment_type():
    return NotificationTypeFactory(type="comment", label="Comment")


def _preview(client, csrf, **fields) -> str:
    response = client.post(URL + "/preview", headers={**csrf(), "HX-Request": "true"}, data=fields)
    assert response.status_code == 200
    return response.get_data(as_text=True)


def test_the_editor_has_a_field_for_each_service(client, operator):
    page = client.get(URL).get_data(as_text=True)
    for name in ("body_text", "slack_blocks", "teams_card", "line_flex"):
        assert one(page, f"textarea[name={name}]")["hx-post"] == URL + "/preview"


def test_the_preview_shows_each_rich_part_rendered(client, csrf, operator):
    sample = json.dumps({"user": {"name": "Ada <3"}, "notification": {"title": "New comment"}})
    page = _preview(client, csrf, body_text="{{ notification.title }}", slack_blocks=BLOCKS, teams_card=CARD,
                    sample=sample)  # fmt: skip
    assert one(page, "#preview-text").get_text(strip=True) == "New comment"
    slack = json.loads(one(page, "#preview-slack_blocks pre").get_text())
    assert slack[0]["text"]["text"] == "*New comment*"
    card = json.loads(one(page, "#preview-teams_card pre").get_text())
    assert card["body"][0]["text"] == "Ada <3"  # Teams takes the value as it is; only Slack's markup is escaped
    assert parse(page).select("#preview-line_flex") == []  # empty: the text is sent


@pytest.mark.parametrize(
    ("part", "source", "says"),
    [
        ("slack_blocks", "[{", "not valid JSON"),
        ("teams_card", '{"type": "MessageCard"}', "AdaptiveCard"),
        ("line_flex", '{"type": "bubble", "body": "{{ notification.title"}', "TemplateSyntaxError"),
        ("slack_blocks", json.dumps([{"type": "section", "text": "{{ ''.__class__.__mro__ }}"}]), "SecurityError"),
    ],
)
def test_a_wrong_rich_part_is_a_problem_at_its_label_and_is_not_saved(client, csrf, operator, part, source, says):
    page = html.unescape(_preview(client, csrf, body_text="Hello", **{part: source}))
    (problem,) = [li.get_text(" ", strip=True) for li in parse(page).select(".console-problem")]
    label = {"slack_blocks": "Slack blocks", "teams_card": "Teams card", "line_flex": "LINE Flex message"}[part]
    assert problem.startswith(label) and says in problem
    response = client.post(URL, headers=csrf(), data={"body_text": "Hello", part: source})
    assert response.status_code in (200, 422)
    assert MessageTemplate.query.filter_by(type="comment", channel="chat").count() == 0


def test_a_good_wording_is_saved_with_its_rich_parts(client, csrf, operator):
    response = client.post(URL, headers=csrf(), data={"body_text": "Hello", "slack_blocks": BLOCKS})
    assert response.status_code == 302
    template = MessageTemplate.query.filter_by(type="comment", channel="chat", locale="en").one()
    assert template.body_text == "Hello" and json.loads(template.slack_blocks) == json.loads(BLOCKS)
    assert template.teams_card == "" and template.line_flex == ""
