"""`flask --app wsgi sweep [--once]`: the sweeper loop (app/sweeper.py), one pass every SWEEP_INTERVAL_SECONDS."""

from __future__ import annotations

import logging
import signal
import threading

import click
from flask import current_app
from flask.cli import with_appcontext

from app.extensions import db
from app.sweeper import sweep_once

log = logging.getLogger(__name__)


@click.command("sweep")
@click.option("--once", is_flag=True, help="Sweep one time and exit.")
@with_appcontext
def sweep_command(once: bool) -> None:
    """Run the sweeper loop (every SWEEP_INTERVAL_SECONDS) until SIGINT/SIGTERM."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    interval = float(current_app.config["SWEEP_INTERVAL_SECONDS"])
    stop = threading.Event()
    if not once:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
    log.info("sweeper running every %.1fs", interval)
    while True:
        try:
            result = sweep_once()
            if result.get("released") or result.get("enqueued") or result.get("pruned"):
                log.info("sweep: %s", result)
        except Exception:  # a database or Redis outage must not end the loop; it is logged and retried
            log.exception("sweep failed; retrying in %.1fs", interval)
        finally:
            db.session.remove()
        if once or stop.wait(interval):
            break
