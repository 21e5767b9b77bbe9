"""Chat templates' rich JSON parts: checked for each service's shape, rendered string by string."""

import json

import pytest

from app.delivery import rendering, rich_json

CONTEXT = {"notification": {"title": 'Order "42" <shipped>', "link": "https://hato.example/n/1"}}


def test_slack_blocks_render_only_inside_strings():
    source = json.dumps([{"type": "section", "text": {"type": "mrkdwn", "text": "*{{ notification.title }}*"}}])
    document = rich_json.render("slack_blocks", source, CONTEXT)
    # The quotes in the value stay inside the string: the document's shape cannot change (and Slack's own
    # markup characters in a value are escaped).
    assert document == [{"type": "section", "text": {"type": "mrkdwn", "text": '*Order "42" &lt;shipped&gt;*'}}]


def test_values_in_slack_blocks_cannot_mention_or_link():
    context = {"notification": {"title": "<!channel> & <https://evil.example|click>"}}
    source = json.dumps([{"type": "section", "text": {"type": "mrkdwn", "text": "<{{ notification.title }}>"}}])
    (block,) = rich_json.render("slack_blocks", source, context)
    assert block["text"]["text"] == "<&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;>"


def test_block_kit_builder_export_is_taken():
    source = json.dumps({"blocks": [{"type": "divider"}]})
    assert rich_json.render("slack_blocks", source, CONTEXT) == [{"type": "divider"}]


def test_teams_card_and_line_flex_shapes():
    card = {
        "type": "AdaptiveCard",
        "version": "1.5",
        "body": [{"type": "TextBlock", "text": "{{ notification.link }}"}],
    }
    assert rich_json.render("teams_card", json.dumps(card), CONTEXT)["body"][0]["text"] == "https://hato.example/n/1"
    flex = {"type": "bubble", "body": {"type": "box", "layout": "vertical", "contents": []}}
    assert rich_json.render("line_flex", json.dumps(flex), CONTEXT) == flex


@pytest.mark.parametrize(
    ("part", "source", "says"),
    [
        ("slack_blocks", "[{", "not valid JSON"),
        ("slack_blocks", '{"type": "section"}', "JSON array of blocks"),
        ("slack_blocks", "[]", "1 to 50 blocks"),
        ("slack_blocks", json.dumps([{"type": "divider"}] * 51), "1 to 50 blocks"),
        ("teams_card", '{"type": "MessageCard"}', "AdaptiveCard"),
        ("line_flex", '{"type": "text"}', "bubble"),
        ("line_flex", json.dumps({"type": "bubble", "x": "a" * 30000}), "larger than 24 KB"),
        ("line_flex", '{"type": "bubble", "x": ' + "[" * 30 + "]" * 30 + "}", "nested deeper"),
        ("slack_blocks", json.dumps([{"type": "section", "text": "{{ notification.title"}]), "TemplateSyntaxError"),
    ],
)
def test_check_names_what_is_wrong(part, source, says):
    problem = rich_json.check(part, source, CONTEXT)
    assert problem is not None and says in problem


def test_check_passes_good_json():
    assert rich_json.check("teams_card", '{"type": "AdaptiveCard", "body": []}', CONTEXT) is None


def test_render_refuses_with_a_render_error():
    with pytest.raises(rendering.RenderError, match="teams_card"):
        rich_json.render("teams_card", "[]", CONTEXT)


def test_sandbox_still_applies_inside_strings():
    source = json.dumps([{"type": "section", "text": "{{ ''.__class__.__mro__ }}"}])
    with pytest.raises(rendering.RenderError):
        rich_json.render("slack_blocks", source, CONTEXT)
