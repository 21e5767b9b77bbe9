"""`flask --app wsgi channels pause|resume NAME [--provider P] --reason TEXT | list`: the kill switches, audited."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup
from flask_babel import gettext

from app.delivery import switches
from app.refusal import Refused
from app.unitofwork import commit

channels_cli = AppGroup("channels", help="Pause and resume delivery channels or their providers (kill switches).")


def _where(name: str, provider: str | None) -> str:
    return f"{name}/{provider}" if provider else name


def _switch(change, name: str, provider: str, done: str, nothing: str) -> None:
    """Run one switch change; a refusal is a bad NAME (exit 2), else commit and say what happened."""
    try:
        changed = change()
    except Refused as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from exc
    commit()
    click.echo((done if changed else nothing) % {"what": _where(name, provider)})


@channels_cli.command("pause")
@click.argument("name")
@click.option("--provider", default="", help="Pause only this provider of the channel (failover goes on to the next).")
@click.option("--reason", required=True, help="Why: shown to the other operators and kept in the audit log.")
def pause_command(name: str, provider: str, reason: str) -> None:
    """Pause channel NAME (or one provider of it): its deliveries wait, untried, until resumed."""
    _switch(
        lambda: switches.pause(None, name, provider, reason, current_app.config),
        name,
        provider,
        gettext("%(what)s paused: its deliveries wait until it is resumed."),
        gettext("%(what)s was paused already; the reason is updated."),
    )


@channels_cli.command("resume")
@click.argument("name")
@click.option("--provider", default="", help="Resume only this provider of the channel.")
@click.option("--reason", default="", help="Why (optional): kept in the audit log.")
def resume_command(name: str, provider: str, reason: str) -> None:
    """Resume channel NAME (or one provider of it): the waiting deliveries go at the sweeper's next pass."""
    _switch(
        lambda: switches.resume(None, name, provider, current_app.config, reason),
        name,
        provider,
        gettext("%(what)s resumed: the sweeper's next pass sends what waited."),
        gettext("%(what)s was not paused."),
    )


@channels_cli.command("list")
def list_command() -> None:
    """List the switches thrown now: channel, provider, since when, by whom, why."""
    thrown = switches.read().switches
    if not thrown:
        click.echo(gettext("Every channel is running."))
        return
    for switch in thrown:
        click.echo(gettext("%(what)s paused since %(since)s by %(who)s: %(reason)s",
                           what=_where(switch.channel, switch.provider),
                           since=switch.paused_at.isoformat(timespec="minutes"),
                           who=switch.paused_by or gettext("the command line"), reason=switch.reason))  # fmt: skip
