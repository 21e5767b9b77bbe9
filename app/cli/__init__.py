"""The `flask --app wsgi …` commands, one module per group; init_app registers them all.

users create · demo seed · api-keys create|list|revoke · channels pause|resume|list · vapid generate ·
worker · sweep · workflows export|apply

What the commands print for operators goes through the catalogs and reads in DEFAULT_LOCALE's language:
there is no request, so app.web.i18n.select_locale answers with it. --help texts stay English (click reads
them when the command is declared, before any app exists).
"""

from __future__ import annotations

from flask import Flask

from app.cli.api_keys import api_keys_cli
from app.cli.channels import channels_cli
from app.cli.demo import demo_cli
from app.cli.sweep import sweep_command
from app.cli.users import users_cli
from app.cli.vapid import vapid_cli
from app.cli.worker import worker_command
from app.cli.workflows import workflows_cli

COMMANDS = (users_cli, demo_cli, api_keys_cli, channels_cli, vapid_cli, worker_command, sweep_command, workflows_cli)


def init_app(app: Flask) -> None:
    """Register the command groups."""
    for command in COMMANDS:
        app.cli.add_command(command)
