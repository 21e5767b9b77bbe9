"""Flask CLI commands: `flask --app wsgi users create …`, `demo seed`, …"""

from __future__ import annotations

import click
from flask import Flask
from flask.cli import AppGroup

from app.auth.queries import user_by_email
from app.auth.service import AccountError, create_or_update_user
from app.console import audit
from app.extensions import db

users_cli = AppGroup("users", help="Manage accounts.")
AUDITED_USER_FIELDS = ("email", "role", "external_id", "display_name")  # never the password hash
demo_cli = AppGroup("demo", help="Demo data.")


@users_cli.command("create")
@click.argument("email")
@click.option("--password", required=True, help="At least 8 characters.")
@click.option("--role", type=click.Choice(["member", "operator", "admin"]), default="member", show_default=True)
@click.option("--external-id", default=None, help="The product's id for this user.")
@click.option("--name", "display_name", default="", help="Display name.")
def create_user_command(email: str, password: str, role: str, external_id: str | None, display_name: str) -> None:
    """Create a user (or update the one with this e-mail)."""
    existing = user_by_email(email)
    before = audit.snapshot(existing, AUDITED_USER_FIELDS) if existing else None
    try:
        user = create_or_update_user(email, password, role=role, external_id=external_id, display_name=display_name)
    except AccountError as exc:
        raise click.BadParameter(str(exc)) from exc
    audit.record(
        None,
        "user.update" if before else "user.create",
        "user",
        user.id,
        before=before,
        after=audit.snapshot(user, AUDITED_USER_FIELDS),
    )
    db.session.commit()
    click.echo(f"user {user.id} {user.email} ({user.role})")


@demo_cli.command("seed")
def demo_seed_command() -> None:
    """Load the demo data (safe to run again) and print the demo logins."""
    from app.demo import DEMO_ACCOUNTS, seed

    seed()
    db.session.commit()
    click.echo("Demo data loaded. Sign in with:")
    for account in DEMO_ACCOUNTS:
        click.echo(f"  {account['role']:<9} {account['email']:<24} password: {account['password']}")


def init_app(app: Flask) -> None:
    """Register the command groups."""
    app.cli.add_command(users_cli)
    app.cli.add_command(demo_cli)
    from app.api.cli import api_keys_cli

    app.cli.add_command(api_keys_cli)
    from jobs.worker import worker_command

    app.cli.add_command(worker_command)
    from jobs.sweeper import sweep_command

    app.cli.add_command(sweep_command)
    from app.push.cli import vapid_cli

    app.cli.add_command(vapid_cli)
