"""`flask --app wsgi sweep [--once]`: the sweeper loop (app/sweeper.py), one pass every SWEEP_INTERVAL_SECONDS.

Between passes, due scheduled notifications are released every SCHEDULER_INTERVAL_SECONDS, so one
appears within about that long of its send_at. Run two (or more) for high availability: a pass runs
only under the sweeper's PostgreSQL advisory lock, so the others skip their turn until it is free.
"""

from __future__ import annotations

import logging
import signal
import threading
import time

import click
from flask import current_app
from flask.cli import with_appcontext

from app import dbpool
from app.extensions import db
from app.sweeper import release_scheduled, sweep_once

log = logging.getLogger(__name__)


@click.command("sweep")
@click.option("--once", is_flag=True, help="Sweep one time and exit.")
@with_appcontext
def sweep_command(once: bool) -> None:
    """Run the sweeper loop (every SWEEP_INTERVAL_SECONDS) until SIGINT/SIGTERM."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    interval = float(current_app.config["SWEEP_INTERVAL_SECONDS"])
    tick = min(interval, float(current_app.config["SCHEDULER_INTERVAL_SECONDS"]))
    next_sweep = 0.0
    stop = threading.Event()
    if not once:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
    log.info("sweeper running every %.1fs", interval)
    database_down = False
    while True:
        try:
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + interval
                result = sweep_once()
                if any(result.get(k) for k in ("released", "enqueued", "pruned", "scheduled")):
                    log.info("sweep: %s", result)
            elif scheduled := release_scheduled():
                log.info("released %d scheduled notifications", scheduled)
            if database_down:
                database_down = False
                log.info("database reachable again; sweeping as usual")
        except dbpool.UNAVAILABLE as exc:
            # Expected while PostgreSQL restarts: one line when it goes, not a traceback every tick.
            if not database_down:
                database_down = True
                log.warning("database unavailable, retrying every %.1fs: %s", tick, str(exc).splitlines()[0])
        except Exception:  # a database or Redis outage must not end the loop; it is logged and retried
            log.exception("sweep failed; retrying in %.1fs", tick)
        finally:
            db.session.remove()
        if once or stop.wait(tick):
            break
