"""`flask --app wsgi api-keys create NAME [--scope …] | list | revoke PREFIX`: keys for product services, audited."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.api_keys import queries, service
from app.api_keys.scopes import DEFAULT_SCOPES, SCOPES, normalize
from app.refusal import Refused
from app.unitofwork import commit

api_keys_cli = AppGroup("api-keys", help="Manage API keys for product services.")


@api_keys_cli.command("create")
@click.argument("name")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice(list(SCOPES)),
    default=DEFAULT_SCOPES,
    show_default=True,
    help="What the key may do; repeat for more than one. " + " ".join(f"{k}: {v}" for k, v in SCOPES.items()),
)
def create_key_command(name: str, scopes: tuple[str, ...]) -> None:
    """Create a key and print it once (only its hash is stored)."""
    try:
        key = service.create_api_key(None, name, scopes)
    except Refused as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from exc
    commit()
    click.echo(key)
    click.echo(f"Key {service.key_prefix(key)}… ({name.strip()}) created with {', '.join(normalize(scopes))}. "
               "Store it now: it cannot be shown again.", err=True)  # fmt: skip


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
    """List keys, live ones first: prefix, name, created, last used, state, scopes."""
    rows = queries.api_keys()
    if not rows:
        click.echo("No API keys yet: flask --app wsgi api-keys create NAME")
        return
    for row in rows:
        used = row["last_used_at"].isoformat(timespec="minutes") if row["last_used_at"] else "never"
        state = f"revoked {row['revoked_at']:%Y-%m-%d}" if row["revoked_at"] else "live"
        click.echo(
            f"{row['prefix']}…  {row['name']:<24} created {row['created_at']:%Y-%m-%d}  last used {used}  {state}"
            f"  scopes {','.join(row['scopes'])}"
        )
