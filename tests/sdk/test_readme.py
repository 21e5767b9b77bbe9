"""The README's SDK lines and the Node token example (docs/api.md) run against the live app, so they cannot rot."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hato_client import Hato

from tests.support.docs import fenced_blocks

ROOT = Path(__file__).resolve().parents[2]
NODE_EXAMPLE = ROOT / "clients" / "node" / "sign_user_token.mjs"


def doc_block(page: str, language: str, first_line: str) -> str:
    """The fenced block in language of page (README.md or a docs/ page) whose first line is first_line."""
    (block,) = [body for name, body, _ in fenced_blocks(language) if name == page and body.startswith(first_line)]
    return block


def test_the_api_guide_includes_the_node_example_verbatim():
    assert doc_block("api.md", "js", "// Node 18+") == NODE_EXAMPLE.read_text()


@pytest.mark.committed  # the live server commits on its own connections
def test_the_readmes_ten_lines_send_and_the_node_token_is_accepted_by_the_feed(live, monkeypatch, capsys):
    with Hato(live.url, live.key) as hato:
        hato.put_user("user-42", {})
        secret = hato.get_user_token_signing_secret()
    lines = doc_block("README.md", "python", "import os\n\nfrom hato_client import Hato\n")
    assert len(lines.strip().splitlines()) <= 10
    monkeypatch.setenv("HATO_URL", live.url)
    monkeypatch.setenv("HATO_API_KEY", live.key)
    exec(compile(lines, "README.md", "exec"), {})  # noqa: S102 - the README's own lines
    printed = capsys.readouterr().out.split()

    env = {"HATO_SIGNING_SECRET": secret["secret"], "HATO_KEY_PREFIX": secret["kid"], "HATO_URL": secret["audience"]}
    node = subprocess.run(  # noqa: S603 - Node from the machine, our own example
        [shutil.which("node") or "node", str(NODE_EXAMPLE), "user-42", "300"],
        env=env, capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    signed = json.loads(node.stdout)
    with Hato(live.url, user_token=signed["token"]) as feed:
        (row,) = feed.get_feed()["notifications"]
    assert printed[0] == "sent" and row["title"] == "Ann replied to your post" and row["link"].endswith("/posts/7#c12")
