"""`flask --app wsgi worker [QUEUES…]`: an RQ worker over high, default, low inside the app context.

The default is the non-forking worker (`--simple`), chosen by tests/perf/bench_delivery.py: a forked
work horse per job costs tens of milliseconds (fork, a fresh PostgreSQL connection, teardown) against
a few for SimpleWorker, and delivery jobs are our own code in batches, so the fork's isolation buys
little. What a forked horse would protect us from is covered elsewhere: a job that dies mid-batch
leaves its rows `sending` under a lease, and the sweeper hands them back (tests/chaos). `--fork`
remains for jobs that leak memory or hang in C code.
"""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext
from flask_babel import ngettext
from rq import SimpleWorker, Worker
from rq.serializers import JSONSerializer

from app import unitofwork
from app.extensions import db, redis
from app.queueing import QUEUE_NAMES, get_queue

# A job counts as finished once what it committed has been handed to Redis (a forked horse exits hard).
EFFECTS_WAIT_SECONDS = 30.0


class _SessionPerJob:
    """Give every job a fresh SQLAlchemy session (a job that died mid-transaction can't poison the next),
    and let its post-commit effects out before the next job starts or the horse exits."""

    def perform_job(self, job, queue):
        try:
            return super().perform_job(job, queue)
        finally:
            unitofwork.wait_idle(current_app._get_current_object(), EFFECTS_WAIT_SECONDS)
            db.session.remove()
            if getattr(self, "_is_horse", False):
                # The horse exits with os._exit(): close its own connection properly first.
                db.engine.dispose()


class AppWorker(_SessionPerJob, Worker):
    """The forking worker: each job runs in a child process with its own DB connection."""

    def main_work_horse(self, job, queue):
        # Runs in the child right after fork(): drop the inherited pool without closing its sockets,
        # which still belong to the parent, so the child opens its own connection.
        db.engine.dispose(close=False)
        return super().main_work_horse(job, queue)


class AppSimpleWorker(_SessionPerJob, SimpleWorker):
    """The non-forking worker: jobs run in this process and reuse its pooled DB connection."""


@click.command("worker")
@click.argument("queues", nargs=-1)
@click.option("--burst", is_flag=True, help="Stop when the queues are empty.")
@click.option(
    "--fork/--simple",
    "fork",
    default=False,
    show_default=True,
    help="Fork a work horse per job (isolation) or run jobs in this process (the default; "
    "see tests/perf/bench_delivery.py for the measured difference).",
)
@with_appcontext
def worker_command(queues: tuple[str, ...], burst: bool, fork: bool) -> None:
    """Run an RQ worker (JSON serializer, scheduler on) over QUEUES, default: high default low."""
    names = queues or QUEUE_NAMES
    unknown = [n for n in names if n not in QUEUE_NAMES]
    if unknown:
        message = ngettext(
            "unknown queue %(names)s; choose from %(choices)s",
            "unknown queues %(names)s; choose from %(choices)s",
            len(unknown),
            names=", ".join(unknown),
            choices=", ".join(QUEUE_NAMES),
        )
        raise click.BadParameter(message)
    connection = redis.client()
    worker_class = AppWorker if fork else AppSimpleWorker
    worker = worker_class([get_queue(n, connection) for n in names], connection=connection, serializer=JSONSerializer)
    current_app.logger.info("worker listening on %s", ", ".join(names))
    worker.work(burst=burst, with_scheduler=True, logging_level="INFO")
