"""Adding a channel is one adapter module: a copy of the tree with tests/delivery/registry_probe/dummy.py put in
app/delivery/channels/ (and nothing else changed) has the channel everywhere: the database's checks, the
API's enum and its requests, the engine, the preference matrix, the console's editors and filters."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.databases import drop_database, recreate_database

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).resolve().parent / "registry_probe"

pytestmark = pytest.mark.committed


def _copy_tree(into: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split("\n")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    shutil.copytree(ROOT / "translations", into / "translations", dirs_exist_ok=True)  # the compiled catalogs too


def test_one_adapter_module_adds_a_channel_everywhere(database_url, redis_url, tmp_path):
    tree = tmp_path / "tree"
    _copy_tree(tree)
    shutil.copy2(PROBE / "dummy.py", tree / "app" / "delivery" / "channels" / "dummy.py")
    scratch = database_url.rsplit("/", 1)[0] + "/" + database_url.rsplit("/", 1)[1].split("?")[0] + "_registry"
    recreate_database(scratch)
    env = dict(os.environ, DATABASE_URL=scratch, REDIS_URL=redis_url, DUMMY_SINK=str(tmp_path / "sink.jsonl"))
    try:
        run = subprocess.run([sys.executable, "-m", "tests.delivery.registry_probe.probe"], cwd=tree, env=env,
                             capture_output=True, text=True, timeout=180)  # fmt: skip
    finally:
        drop_database(scratch)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])

    assert found["registry"] == ["in_app", "email", "push", "sms", "chat", "dummy", "webhook"]
    assert all("'dummy'" in definition for definition in found["constraints"].values()), found["constraints"]
    assert found["openapi"] == ["in_app", "email", "push", "sms", "chat", "dummy"]
    assert found["post"] == 202
    assert found["delivered"] == {"claimed": 1, "sent": 1}
    assert [(m["to"], m["text"]) for m in found["sink"]] == [("user:1", "Hello: from the dummy")]
    assert found["pages"] == {path: [200, True] for path in found["pages"]}, found["pages"]
