"""`flask --app wsgi vapid generate`: create the VAPID key pair Web Push signs with."""

from __future__ import annotations

import base64
import os

import click
from cryptography.hazmat.primitives import serialization
from flask.cli import AppGroup
from flask_babel import gettext
from py_vapid import Vapid

vapid_cli = AppGroup("vapid", help="Web Push VAPID keys.")


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def generate_keys() -> tuple[str, str]:
    """A new P-256 pair as (public, private): base64url of the uncompressed point and of the raw scalar."""
    vapid = Vapid()
    vapid.generate_keys()
    public = vapid.public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    private = vapid.private_key.private_numbers().private_value.to_bytes(32, "big")
    return _b64url(public), _b64url(private)


@vapid_cli.command("generate")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Also write the two lines to this file (created with mode 600; an existing file is kept).",
)
def generate_command(out: str | None) -> None:
    """Print VAPID_PUBLIC_KEY / VAPID_PRIVATE_KEY lines for the environment."""
    public, private = generate_keys()
    lines = f"VAPID_PUBLIC_KEY={public}\nVAPID_PRIVATE_KEY={private}\n"
    if out:
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError as exc:
            message = gettext("%(path)s exists; refusing to overwrite keys", path=out)
            raise click.BadParameter(message, param_hint="--out") from exc
        with os.fdopen(fd, "w") as handle:
            handle.write(lines)
        click.echo("# " + gettext("written to %(path)s", path=out), err=True)
    click.echo(lines, nl=False)
