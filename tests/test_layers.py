"""The layer contract (.importlinter): every module has a layer, and `make lint` fails on an upward import."""

from __future__ import annotations

import pkgutil
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.docs import doc_page

ROOT = Path(__file__).resolve().parents[1]


def contract_layers() -> list[list[str]]:
    """The layers contract's layers, top to bottom, each a list of module names."""
    text = (ROOT / ".importlinter").read_text()
    block = text.split("[importlinter:contract:layers]", 1)[1].split("[importlinter:contract:", 1)[0]
    layers = block.split("layers =", 1)[1]
    lines = [line.strip() for line in layers.splitlines() if line.strip() and not line.strip().startswith(";")]
    return [[name for name in re.split(r"\s*[|:]\s*", line) if name] for line in lines]


def layer_names() -> list[str]:
    """Every module name the layers contract lists."""
    return [name for layer in contract_layers() for name in layer]


def drawn_layers() -> list[list[str]]:
    """The layers as the architecture page (docs/architecture.md) draws them, top to bottom."""
    diagram = doc_page("architecture.md").split("## Layers", 1)[1].split("```", 2)[1]
    layers: list[list[str]] = []
    for line in diagram.splitlines():
        if not line.strip():
            continue
        names = re.findall(r"(?:app|jobs)[\w.]*", line)
        if not line.startswith(" "):  # a new layer's first line starts with its title
            layers.append([])
        layers[-1].extend(names)
    return layers


def all_modules() -> list[str]:
    """Every module of app/ and jobs/, as import-linter names them (packages by their __init__)."""
    names = []
    for package in ("app", "jobs"):
        names.append(package)
        for info in pkgutil.walk_packages([str(ROOT / package)], package + "."):
            names.append(info.name)
    return names


def test_every_module_is_in_exactly_one_layer():
    layers = layer_names()
    assert len(layers) == len(set(layers)), "a module is listed twice"
    homeless = []
    for module in all_modules():
        owners = [layer for layer in layers if module == layer or module.startswith(layer + ".")]
        if len(owners) > 1:
            pytest.fail(f"{module} is in two layers: {owners}")
        # A package that only holds layered modules (app.inbox: views in UI, queries in domain) needs none.
        if not owners and module != "app" and not any(layer.startswith(module + ".") for layer in layers):
            homeless.append(module)
    assert homeless == [], f"modules without a layer in .importlinter: {homeless}"


def test_the_docs_draw_the_layers_exactly_as_the_contract_has_them():
    assert drawn_layers() == contract_layers()


def test_an_upward_import_breaks_the_contract(tmp_path):
    """import-linter is pinned in requirements.txt, so every `make install` has lint-imports: no skip."""
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT, tree, ignore=shutil.ignore_patterns(".venv", "var", ".git", "__pycache__", "tests", "static", "site")
    )
    models = tree / "app" / "models" / "__init__.py"
    models.write_text(models.read_text() + "\nfrom app.console import overview  # noqa: E402,F401 - goes up\n")
    run = subprocess.run([str(ROOT / ".venv" / "bin" / "lint-imports")], cwd=tree, capture_output=True, text=True)
    assert run.returncode != 0
    assert "app.models -> app.console.overview" in run.stdout and "BROKEN" in run.stdout
