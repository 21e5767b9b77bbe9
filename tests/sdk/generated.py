"""The SDK's generated files as the generator makes them from the app's OpenAPI document, formatted by ruff.

`.venv/bin/python -m tests.sdk.generated` rewrites them (after a change to the API).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "clients" / "python"
RUFF = Path(sys.executable).with_name("ruff")


def generator():
    """clients/python/tools/generate.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("hato_sdk_generate", SDK / "tools" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def formatted(name: str, text: str) -> str:
    """text as `ruff format` leaves it (the generated files are formatted like the rest of the code)."""
    path = SDK / "hato_client" / name
    done = subprocess.run(  # noqa: S603 - our own ruff
        [str(RUFF), "format", "--stdin-filename", str(path), "-"], input=text, capture_output=True, text=True,
        check=True, cwd=ROOT,
    )  # fmt: skip
    return done.stdout


def rendered(spec: dict) -> dict[str, str]:
    """name → text of every generated file."""
    return {name: formatted(name, text) for name, text in generator().render(spec).items()}


def main() -> None:
    os.environ.setdefault("SECRET_KEY", "generate")
    os.environ.setdefault("HATO_DEV", "1")
    from app import create_app

    app = create_app({"TESTING": True})
    spec = app.test_client().get("/v1/openapi.json").get_json()  # as served (keys sorted)
    for name, text in rendered(spec).items():
        (SDK / "hato_client" / name).write_text(text)


if __name__ == "__main__":
    main()
