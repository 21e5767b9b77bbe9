"""The package itself: its generated code equals what the generator makes of today's API, and its wheel builds."""

from __future__ import annotations

import inspect
import subprocess
import sys
import zipfile

from hato_client import AsyncHato, Hato, _operations

from tests.sdk.generated import SDK, generator, rendered


def test_the_generated_models_and_methods_are_todays_api_and_cover_every_operation(client):
    spec = client.get("/v1/openapi.json").get_json()
    for name, text in rendered(spec).items():
        assert (SDK / "hato_client" / name).read_text() == text, (
            f"clients/python/hato_client/{name} is out of date: run .venv/bin/python -m tests.sdk.generated"
        )
    every = {op["operationId"] for item in spec["paths"].values() for op in item.values()}
    assert set(_operations.OPERATIONS) | set(_operations.SKIPPED) == every
    for operation in _operations.OPERATIONS:
        name = generator().snake(operation)
        assert callable(getattr(Hato, name)) and inspect.iscoroutinefunction(getattr(AsyncHato, name)), name


def test_the_wheel_builds_with_python_m_build_and_carries_py_typed(tmp_path):
    subprocess.run(  # noqa: S603 - python -m build, as CI runs it (no isolation: the pinned flit_core, offline)
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(SDK)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("hato_client-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert {"hato_client/py.typed", "hato_client/__init__.py", "hato_client/models.py"} <= names
    assert {"hato_client/_operations.py", "hato_client/webhooks.py", "hato_client/tokens.py"} <= names
    assert "Requires-Dist: httpx" in metadata and "Requires-Dist: standardwebhooks" in metadata
    assert not any(n.startswith(("tools/", "tests/")) for n in names)
