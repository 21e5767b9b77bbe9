"""The Web Push payload: cut to fit under the limit without breaking a character; a clean Topic."""

from __future__ import annotations

import json

from app.message_templates import preview
from app.push import payload


def test_payload_is_cut_under_the_limit_without_breaking_characters():
    body = "日本語のテキスト" * 400  # 9,600 bytes of three-byte characters
    text = payload.fit_payload("Title", body, "https://x.test/a", "t:1")
    assert len(text.encode("utf-8")) <= payload.PUSH_LIMIT
    data = json.loads(text)
    assert data["body"].endswith("…") and data["title"] == "Title" and data["url"] == "https://x.test/a"
    assert len(text.encode("utf-8")) > payload.PUSH_LIMIT - 10  # as much as fits
    assert payload.fit_payload("a", "b", None, "t") == payload.push_payload("a", "b", None, "t")
    assert preview.push_payload is payload.push_payload  # the console preview shows what is sent


def test_topic_is_sanitized():
    assert payload.topic("comment:123") == "comment-123"
    assert payload.topic("a b/ç" * 20) == ("a-b--" * 20)[:32]
