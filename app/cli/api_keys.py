"""`flask --app wsgi api-keys create NAME | list | revoke PREFIX`: keys for product services, audited as the CLI."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.api_keys import queries, service
from app.refusal import Refused
from app.unitofwork import commit

api_keys_cli = AppGroup("api-keys", help="Manage API keys for product services.")


@api_keys_cli.command("create")
@click.argument("name")
def create_key_command(name: str) -> None:
    """Create a key and print it once (only its hash is stored)."""
    try:
        key = service.create_api_key(None, name)
    except Refused as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from exc
    commit()
    click.echo(key)
    click.echo(f"Key {service.key_prefix(key)}… ({name.strip()}) created. Store it now: it cannot be shown again.",
               err=True)  # fmt: skip


@api_keys_cli.command("revoke")
@click.argument("prefix")
def revoke_key_command(prefix: str) -> None:
    """Revoke the key whose prefix (as `list` shows it) is PREFIX."""
    try:
        service.revoke_api_key(None, prefix.rstrip("…"))
    except Refused as exc:
        raise click.ClickException(f"no live key has the prefix {prefix!r}") from exc
    commit()
    click.echo(f"Key {prefix} revoked.")


@api_keys_cli.command("list")
def list_keys_command() -> None:
    """List keys, live ones first: prefix, name, created, last used, revoked."""
    rows = queries.api_keys()
    if not rows:
        click.echo("No API keys yet: flask --app wsgi api-keys create NAME")
        return
    for row in rows:
        used = row["last_used_at"].isoformat(timespec="minutes") if row["last_used_at"] else "never"
        state = f"revoked {row['revoked_at']:%Y-%m-%d}" if row["revoked_at"] else "live"
        click.echo(
            f"{row['prefix']}…  {row['name']:<24} created {row['created_at']:%Y-%m-%d}  last used {used}  {state}"
        )
