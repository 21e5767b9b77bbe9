"""Gunicorn settings for web processes that hold websockets: `gunicorn -c python:app.realtime.gunicorn_conf wsgi:app`.

Under gthread every open socket pins one pool thread (its handler) plus simple-websocket's reader
thread, so a process needs threads >= expected sockets + request headroom, and gthread's
worker_connections (default 1000) must be larger still. Command-line flags override these.
"""

from __future__ import annotations

import os
import signal
import threading

# Sockets one process is sized for, plus threads left over for ordinary page requests.
_sockets = int(os.environ.get("WEB_MAX_SOCKETS", "1000"))
_headroom = int(os.environ.get("WEB_REQUEST_THREADS", "32"))

worker_class = os.environ.get("WEB_WORKER_CLASS", "gthread")
workers = int(os.environ.get("WEB_WORKERS", "2"))
threads = _sockets + _headroom
# More connections than threads, so idle keep-alive HTTP connections can wait without holding a thread.
worker_connections = threads + 100
# Sockets are closed with 1001 at SIGTERM, so in-flight requests are all that the grace period waits for.
graceful_timeout = int(os.environ.get("WEB_GRACEFUL_TIMEOUT", "10"))


def _in_background(func) -> None:
    """Run func outside the signal handler: it takes locks the interrupted code may hold."""
    try:
        from gevent import monkey
    except ImportError:
        monkey = None
    if monkey is not None and monkey.is_module_patched("threading"):
        import gevent

        gevent.spawn(func)  # a gevent signal handler runs in the hub and must not block, even to start a thread
    else:
        threading.Thread(target=func, name="hato-realtime-shutdown", daemon=True).start()


def post_worker_init(worker) -> None:
    """Chain onto the worker's SIGTERM handler: close every websocket with 1001 first."""
    previous = signal.getsignal(signal.SIGTERM)

    def close_sockets_then_exit(signum, frame):
        from app.realtime.hub import shutdown_all

        _in_background(shutdown_all)
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, close_sockets_then_exit)


def worker_int(worker) -> None:
    """SIGINT/SIGQUIT stop the worker at once: close the sockets first so clients reconnect."""
    from app.realtime.hub import shutdown_all

    shutdown_all()


def worker_exit(server, worker) -> None:
    """Skip the exit-time garbage collection: measured at ~2 s per 300 closed sockets, it outlasts the grace period."""
    import gc

    gc.freeze()
