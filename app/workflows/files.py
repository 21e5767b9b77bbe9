"""Workflows as YAML files (`flask workflows export|apply`): a type's steps as canonical text, and a directory
of such files read back with every problem named by its file.

A file is DIR/<type>.yaml holding `type: <type>` and `steps:`. It is read with yaml.safe_load only (a tag such
as !!python/object is refused), at most MAX_FILE_BYTES of it, and checked by definition.parse. The canonical
text is what export writes and what apply compares, so a file exported and applied unedited is unchanged.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from flask_babel import gettext

from app.models import WorkflowVersion
from app.workflows.definition import WorkflowInvalid, normalized

MAX_FILE_BYTES = 256 * 1024
SUFFIX = ".yaml"


@dataclass(frozen=True)
class WorkflowFile:
    """One file that validates: its type and its steps, canonical."""

    path: Path
    type: str
    document: dict  # {"steps": [...]}, as definition.to_document writes it


class FileRefused(ValueError):
    """The file cannot be read as a workflow (the message says why, without the file's name)."""


def canonical_yaml(type_: str, document: dict) -> str:
    """The type's steps as export writes them and apply compares them."""
    return yaml.safe_dump({"type": type_, "steps": document["steps"]}, sort_keys=False, allow_unicode=True)


def published_document(version: WorkflowVersion | None) -> dict:
    """The published version's steps, canonical (as stored if they no longer validate, say a channel since
    removed; none without a version)."""
    if version is None:
        return {"steps": []}
    try:
        return normalized(version.steps)  # JSONB keeps no key order: written again in the canonical one
    except WorkflowInvalid:
        return version.steps


def published_yaml(type_: str, version: WorkflowVersion | None) -> str:
    """The canonical text of what the type runs now ("" without a published version)."""
    return canonical_yaml(type_, published_document(version)) if version is not None else ""


def export_text(type_: str, version: WorkflowVersion) -> str:
    """A file's text: a comment naming the version, then the canonical YAML."""
    # Data, not a message: the same words in every DEFAULT_LOCALE, so files exported on two installations
    # differ only where their workflows do.
    header = f"# {type_}: workflow version {version.version}, written by `flask workflows export`\n"
    return header + canonical_yaml(type_, published_document(version))


def write(path: Path, text: str) -> None:
    """Replace path with text at once (a reader never sees half a file)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def paths(directory: Path) -> list[Path]:
    """The directory's workflow files, by name."""
    return sorted(directory.glob("*" + SUFFIX))


def load(path: Path) -> object:
    """The file's YAML as plain data (safe_load), or FileRefused."""
    if not path.is_file():
        raise FileRefused(gettext("not a regular file"))
    with path.open("rb") as handle:
        raw = handle.read(MAX_FILE_BYTES + 1)  # read no more than that, whatever the size says
    if len(raw) > MAX_FILE_BYTES:
        raise FileRefused(gettext("larger than %(kb)s KB", kb=MAX_FILE_BYTES // 1024))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FileRefused(gettext("not UTF-8 text")) from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark, problem = error.problem_mark, error.problem or str(error)
        if mark is None:
            raise FileRefused(gettext("not YAML that Hato reads: %(problem)s", problem=problem)) from None
        raise FileRefused(gettext("not YAML that Hato reads: %(problem)s (line %(line)s, column %(column)s)",
                                  problem=problem, line=mark.line + 1, column=mark.column + 1)) from None  # fmt: skip
    except (yaml.YAMLError, RecursionError) as error:
        raise FileRefused(gettext("not YAML that Hato reads: %(problem)s", problem=str(error))) from None


def document_of(path: Path, data: object, types: set[str]) -> dict:
    """The workflow document of a loaded file: its type checked against the file name and the types there are."""
    if not isinstance(data, dict) or not all(isinstance(key, str) for key in data):
        raise FileRefused(gettext("not a mapping of type and steps"))
    type_ = data.get("type")
    if not isinstance(type_, str) or not type_:
        raise FileRefused(gettext("type: missing (the file names its notification type)"))
    if type_ != path.stem:
        raise FileRefused(gettext("type: %(type)s does not match the file name (%(name)s)", type=repr(type_),
                                  name=path.stem + SUFFIX))  # fmt: skip
    if type_ not in types:
        raise FileRefused(gettext("type: there is no notification type %(type)s", type=repr(type_)))
    steps = data.get("steps")
    if isinstance(steps, list) and any(isinstance(s, dict) and not all(isinstance(k, str) for k in s) for s in steps):
        raise FileRefused(gettext("steps: a step's field names are text"))  # parse compares them as text
    return {key: value for key, value in data.items() if key != "type"}


def problem_lines(name: str, error: WorkflowInvalid) -> list[str]:
    """Each problem as `file: step N field: message` (`file: field: message` for the document)."""
    return [
        gettext("%(file)s: step %(step)s %(field)s: %(message)s", file=name, step=p.step, field=p.field,
                message=p.message) if p.step else
        gettext("%(file)s: %(field)s: %(message)s", file=name, field=p.field, message=p.message)
        for p in error.problems
    ]  # fmt: skip


def read_directory(directory: Path, types: set[str]) -> tuple[list[WorkflowFile], list[str]]:
    """Every file of directory checked: those that validate, and a line per problem (all files, all problems)."""
    valid, problems = [], []
    for path in paths(directory):
        try:
            document = document_of(path, load(path), types)
            valid.append(WorkflowFile(path, path.stem, normalized(document)))
        except FileRefused as refused:
            problems.append(f"{path.name}: {refused}")
        except WorkflowInvalid as error:
            problems.extend(problem_lines(path.name, error))
    return valid, problems
