"""The documentation's code samples (README.md and docs/*.md) compile, parse and run, so they cannot rot.

A fenced block right after an `<!-- run -->` line runs against the live app: Python with HATO_URL and
HATO_API_KEY set, shell (curl) under `bash -eu` with HATO/HATO_URL and KEY/HATO_API_KEY, the docs' example
host standing for the live app and each curl failing on an error answer.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from hato_client import Hato

from app.workflows.definition import parse
from tests.support.docs import fenced_blocks

EXAMPLE_HOST = "https://hato.example.com"
# curl fails on a 4xx/5xx (showing the problem document); uuidgen stands in where the machine lacks it.
SHELL_PRELUDE = """
curl() { command curl --silent --show-error --fail-with-body "$@"; echo; }
command -v uuidgen >/dev/null || uuidgen() { python3 -c 'import uuid; print(uuid.uuid4())'; }
"""


def marked(language: str) -> list[tuple[str, str]]:
    """The (page, body) of every block in language marked to run."""
    return [(page, body) for page, body, run in fenced_blocks(language) if run]


def test_every_python_block_compiles_and_every_json_http_and_yaml_example_parses():
    for page, body, _ in fenced_blocks("python"):
        compile(body, page, "exec")
    for page, body, _ in fenced_blocks("json"):
        json.loads(body), page
    for page, body, _ in fenced_blocks("http"):
        _, _, payload = body.partition("\n\n")
        if payload.strip():
            json.loads(payload), page
    workflows = 0
    for _page, body, _ in fenced_blocks("yaml"):
        document = yaml.safe_load(body)
        if isinstance(document, dict) and "steps" in document:
            parse({"steps": document["steps"]})  # a step the engine would refuse raises WorkflowInvalid
            workflows += 1
    assert workflows >= 2
    # The markers are what make the samples run: losing them would quietly stop the checks below.
    assert len(marked("python")) >= 2 and len(marked("sh")) >= 3


@pytest.mark.committed  # the live server commits on its own connections
def test_the_marked_samples_run_against_the_live_app(live, monkeypatch, capsys):
    with Hato(live.url, live.key) as hato:
        for member in ("user-42", "user-1", "user-2", "user-3"):  # the members the samples name, registered
            hato.put_user(member, {})
    monkeypatch.setenv("HATO_URL", live.url)
    monkeypatch.setenv("HATO_API_KEY", live.key)
    for page, body in marked("python"):
        exec(compile(body, page, "exec"), {})  # noqa: S102 - the documentation's own samples
        assert capsys.readouterr().out.startswith("sent "), page

    env = dict(os.environ, HATO=live.url, HATO_URL=live.url, KEY=live.key, HATO_API_KEY=live.key)
    for page, body in marked("sh"):
        script = SHELL_PRELUDE + body.replace(EXAMPLE_HOST, live.url)
        run = subprocess.run(  # noqa: S603 - bash from the machine, the documentation's own samples
            ["/bin/bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True, timeout=30
        )
        assert run.returncode == 0, f"{page}: {run.stderr}{run.stdout}"
        for line in run.stdout.splitlines():
            if line.strip():
                json.loads(line)  # every answer is a JSON document
