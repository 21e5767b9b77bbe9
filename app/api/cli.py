"""`flask --app wsgi api-keys create NAME | revoke PREFIX | list`."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.api import queries, service
from app.console import audit
from app.extensions import db

api_keys_cli = AppGroup("api-keys", help="Manage API keys for product services.")


@api_keys_cli.command("create")
@click.argument("name")
def create_key_command(name: str) -> None:
    """Create a key and print it once (only its hash is stored)."""
    name = name.strip()
    if not name or len(name) > 200 or "\x00" in name:
        raise click.BadParameter("give the key a name of 1-200 characters", param_hint="NAME")
    key, prefix = service.create_api_key(name)
    audit.record(None, "api_key.create", "api_key", prefix, after={"name": name, "prefix": prefix})
    db.session.commit()
    click.echo(key)
    click.echo(f"Key {prefix}… ({name}) created. Store it now: it cannot be shown again.", err=True)


@api_keys_cli.command("revoke")
@click.argument("prefix")
def revoke_key_command(prefix: str) -> None:
    """Revoke the key whose prefix (as `list` shows it) is PREFIX."""
    if not service.revoke_api_key(prefix.rstrip("…")):
        raise click.ClickException(f"no live key has the prefix {prefix!r}")
    audit.record(
        None, "api_key.revoke", "api_key", prefix.rstrip("…"), before={"revoked": False}, after={"revoked": True}
    )
    db.session.commit()
    click.echo(f"Key {prefix} revoked.")


@api_keys_cli.command("list")
def list_keys_command() -> None:
    """List keys: prefix, name, created, last used, revoked."""
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
