"""`flask --app wsgi users create EMAIL [--password P] [--role R] [--external-id X] [--name N]`."""

from __future__ import annotations

import click
from flask.cli import AppGroup
from flask_babel import gettext

from app.models import ROLES
from app.refusal import Refused
from app.unitofwork import commit
from app.users.service import save_account

users_cli = AppGroup("users", help="Manage accounts.")


@users_cli.command("create")
@click.argument("email")
# Asked for (hidden, twice) when left out: a password on the command line stays in shell history and `ps`.
@click.option(
    "--password",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    help="At least 8 characters; asked for (hidden) when left out.",
)
@click.option("--role", type=click.Choice(ROLES), default="member", show_default=True)
@click.option("--external-id", default=None, help="The product's id for this user.")
@click.option("--name", "display_name", default="", help="Display name.")
def create_user_command(email: str, password: str, role: str, external_id: str | None, display_name: str) -> None:
    """Create a user (or update the one with this e-mail); audited as done by the CLI."""
    try:
        user = save_account(None, email, password, role=role, external_id=external_id, display_name=display_name)
    except Refused as exc:
        raise click.BadParameter(str(exc)) from exc
    commit()
    click.echo(gettext("user %(id)s %(email)s (%(role)s)", id=user.id, email=user.email, role=user.role))
