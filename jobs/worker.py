"""`flask --app wsgi worker [QUEUES…]`: an RQ worker over high, default, low inside the app context."""
from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext
from rq import Worker
from rq.serializers import JSONSerializer

from app.extensions import db, redis
from app.queueing import QUEUE_NAMES, get_queue


class AppWorker(Worker):
    """A forking RQ worker that drops inherited DB connections in each work horse."""

    def execute_job(self, job, queue):
        # A forked child must not reuse the parent's pooled PostgreSQL sockets.
        db.engine.dispose(close=False)
        return super().execute_job(job, queue)


@click.command("worker")
@click.argument("queues", nargs=-1)
@click.option("--burst", is_flag=True, help="Stop when the queues are empty.")
@click.option("--simple", is_flag=True, help="Run jobs in this process instead of forking (faster, less isolated).")
@with_appcontext
def worker_command(queues: tuple[str, ...], burst: bool, simple: bool) -> None:
    """Run an RQ worker (JSON serializer, scheduler on) over QUEUES, default: high default low."""
    names = queues or QUEUE_NAMES
    connection = redis.client()
    worker_class = AppWorker
    if simple:
        from rq import SimpleWorker

        worker_class = SimpleWorker
    worker = worker_class([get_queue(n, connection) for n in names], connection=connection,
                          serializer=JSONSerializer)
    current_app.logger.info("worker listening on %s", ", ".join(names))
    worker.work(burst=burst, with_scheduler=True, logging_level="INFO")
