"""`flask --app wsgi workflows export DIR | apply DIR [--dry-run] [--publish] [--note TEXT]`: workflows as code.

export writes DIR/<type>.yaml for every type (its published version); apply checks every file of DIR first
and changes nothing unless all of them validate, then shows each difference and saves the changed ones as
drafts (and publishes them with --publish) in one transaction, audited as done by the CLI.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import click
from flask.cli import AppGroup
from flask_babel import gettext

from app.extensions import db
from app.refusal import Refused
from app.unitofwork import commit
from app.workflows import files, queries, service
from app.workflows.definition import WorkflowInvalid

workflows_cli = AppGroup("workflows", help="Keep the notification types' workflows as YAML files (in git).")


@workflows_cli.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def export_command(directory: Path) -> None:
    """Write DIRECTORY/<type>.yaml for every type: the steps of its published version."""
    directory.mkdir(parents=True, exist_ok=True)
    versions = queries.published_by_type()
    written = 0
    for type_, version in versions.items():
        name = type_ + files.SUFFIX
        if version is None:
            click.echo(
                gettext(
                    "%(file)s: skipped, %(type)s has no published version yet (the sweeper's next pass gives it one)",
                    file=name,
                    type=type_,
                )
            )
            continue
        files.write(directory / name, files.export_text(type_, version))
        click.echo(gettext("%(file)s: version %(version)s", file=name, version=version.version))
        written += 1
    for path in files.paths(directory):
        if path.stem not in versions:
            click.echo(gettext("%(file)s: there is no type %(type)s any more; the file is left as it is.",
                               file=path.name, type=path.stem))  # fmt: skip
    click.echo(gettext("Workflows exported to %(directory)s: %(count)s.", directory=directory, count=written))


@workflows_cli.command("apply")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Check the files and show the differences; change nothing.")
@click.option("--publish", is_flag=True, help="Publish each changed workflow (without it, it is saved as the draft).")
@click.option("--note", default="", help="The note of the versions published with --publish (in their history).")
def apply_command(directory: Path, dry_run: bool, publish: bool, note: str) -> None:
    """Make the workflows what DIRECTORY's <type>.yaml files say: all of them, or (any file invalid) none."""
    if len(note) > service.NOTE_MAX:
        raise click.BadParameter(gettext("at most %(max)s characters", max=service.NOTE_MAX), param_hint="--note")
    versions = queries.published_by_type()
    loaded, problems = files.read_directory(directory, set(versions))
    if problems:
        for line in problems:
            click.echo(line, err=True)
        raise click.ClickException(gettext("Nothing was changed: correct the files above and apply them again."))
    if not loaded:
        raise click.ClickException(gettext("%(directory)s has no %(suffix)s files.", directory=directory,
                                           suffix=files.SUFFIX))  # fmt: skip
    changed = [item for item in loaded if _show_difference(item, versions[item.type])]
    missing = sorted(set(versions) - {item.type for item in loaded})
    if missing:
        click.echo(gettext("Types without a file (left as they are): %(types)s", types=", ".join(missing)))
    unchanged = len(loaded) - len(changed)
    if dry_run:
        click.echo(gettext("Dry run: %(unchanged)s unchanged, %(changed)s to change; nothing was written.",
                           unchanged=unchanged, changed=len(changed)))  # fmt: skip
        return
    try:
        for item in changed:
            _save(item, publish, note)
    except (Refused, WorkflowInvalid) as error:  # a type deleted meanwhile, say: the files were checked
        db.session.rollback()
        raise click.ClickException(gettext("Nothing was changed: %(error)s", error=str(error))) from None
    commit()
    drafted, published = (0, len(changed)) if publish else (len(changed), 0)
    click.echo(gettext("%(unchanged)s unchanged, %(drafted)s drafted, %(published)s published.",
                       unchanged=unchanged, drafted=drafted, published=published))  # fmt: skip


def _show_difference(item: files.WorkflowFile, version) -> bool:
    """Print the unified diff of the published steps against the file's (or that it is unchanged); whether it
    differs."""
    before = files.published_yaml(item.type, version)
    after = files.canonical_yaml(item.type, item.document)
    draft = queries.draft(item.type)
    if before == after:
        if draft is not None:
            click.echo(gettext("%(type)s: unchanged (its unpublished draft is left as it is)", type=item.type))
        else:
            click.echo(gettext("%(type)s: unchanged", type=item.type))
        return False
    published = (
        gettext("%(type)s, published version %(version)s", type=item.type, version=version.version)
        if version is not None
        else gettext("%(type)s, no published version", type=item.type)
    )
    click.echo(gettext("%(type)s: changed", type=item.type))
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=published, tofile=str(item.path))  # fmt: skip
    click.echo("".join(lines), nl=False)
    if draft is not None and draft.steps != item.document:
        click.echo(gettext("%(type)s: the file replaces its unpublished draft", type=item.type))
    return True


def _save(item: files.WorkflowFile, publish: bool, note: str) -> None:
    """Save the file's steps as the type's draft (actor None: the audit log says "cli"), then publish them."""
    service.save_draft(None, item.type, item.document)
    if not publish:
        click.echo(gettext("%(type)s: saved as the draft; publish it in the console or apply with --publish",
                           type=item.type))  # fmt: skip
        return
    version = service.publish(None, item.type, note)
    click.echo(gettext("%(type)s: published as version %(version)s", type=item.type, version=version.version))
