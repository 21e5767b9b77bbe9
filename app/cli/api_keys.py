"""`flask --app wsgi api-keys create NAME [--scope …] | list | revoke PREFIX`: keys for product services, audited."""

from __future__ import annotations

import click
from flask.cli import AppGroup
from flask_babel import gettext

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
    message = gettext(
        "Key %(prefix)s… (%(name)s) created with %(scopes)s. Store it now: it cannot be shown again.",
        prefix=service.key_prefix(key),
        name=name.strip(),
        scopes=", ".join(normalize(scopes)),
    )
    click.echo(message, err=True)


@api_keys_cli.command("revoke")
@click.argument("prefix")
def revoke_key_command(prefix: str) -> None:
    """Revoke the key whose prefix (as `list` shows it) is PREFIX."""
    try:
        service.revoke_api_key(None, prefix.rstrip("…"))
    except Refused as exc:
        raise click.ClickException(gettext("no live key has the prefix %(prefix)s", prefix=repr(prefix))) from exc
    commit()
    click.echo(gettext("Key %(prefix)s revoked.", prefix=prefix))


@api_keys_cli.command("list")
def list_keys_command() -> None:
    """List keys, live ones first: prefix, name, created, last used, state, scopes."""
    rows = queries.api_keys()
    if not rows:
        click.echo(gettext("No API keys yet: flask --app wsgi api-keys create NAME"))
        return
    for row in rows:
        used = row["last_used_at"].isoformat(timespec="minutes") if row["last_used_at"] else gettext("never")
        revoked = row["revoked_at"].strftime("%Y-%m-%d") if row["revoked_at"] else None
        state = gettext("revoked %(date)s", date=revoked) if revoked else gettext("live")
        name, created = row["name"].ljust(24), row["created_at"].strftime("%Y-%m-%d")  # padded before placing
        line = gettext(
            "%(prefix)s…  %(name)s created %(created)s  last used %(used)s  %(state)s  scopes %(scopes)s",
            prefix=row["prefix"],
            name=name,
            created=created,
            used=used,
            state=state,
            scopes=",".join(row["scopes"]),
        )
        click.echo(line)
