"""Gunicorn settings for web processes that hold websockets: `gunicorn -c python:app.realtime.gunicorn_conf wsgi:app`.

Under gthread every open socket pins one pool thread (its handler; one shared thread reads them all,
app/realtime/connection.py), so a process needs threads >= expected sockets + request headroom, and
gthread's worker_connections (default 1000) must be larger still. Command-line flags override these.
Start the process with GLIBC_TUNABLES=glibc.malloc.tcache_count=0 (docs/production.md): thousands of threads
otherwise each keep a cache of freed memory (measured: 66 vs 57 KB per socket at 5,000).
"""

from __future__ import annotations

import selectors
import signal
import threading
from concurrent import futures
from functools import partial

from gunicorn.workers.gthread import ThreadWorker

from app.config import Config

_settings = Config()  # the WEB_* settings, declared with the others in app/config.py SETTINGS

# Sockets one process is sized for, plus threads left over for ordinary page requests.
_sockets = _settings.WEB_MAX_SOCKETS
_headroom = _settings.WEB_REQUEST_THREADS

# "gthread" is gunicorn's, minus its per-event scan of every open socket (SocketThreadWorker below).
worker_class = _settings.WEB_WORKER_CLASS
if worker_class == "gthread":
    worker_class = "app.realtime.gunicorn_conf.SocketThreadWorker"
workers = _settings.WEB_WORKERS
threads = _sockets + _headroom
# More connections than threads, so idle keep-alive HTTP connections can wait without holding a thread.
worker_connections = threads + 100
# Sockets are closed with 1001 at SIGTERM, so in-flight requests are all that the grace period waits for.
graceful_timeout = _settings.WEB_GRACEFUL_TIMEOUT


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


class SocketThreadWorker(ThreadWorker):
    """gunicorn's gthread worker (23.0), except that its loop no longer passes over every running request.

    Its loop calls futures.wait() on all running requests after every poller event, and each open
    websocket is a running request: at 5,000 sockets every API call cost the main thread (holding the
    GIL) a pass over 5,000 futures' locks, about 1.2 CPU-seconds a second at 50 calls/s (bench_realtime).
    Here a finished request drops itself from a set (a done callback) and the loop waits on its poller only.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.futures = set()
        self._slot_freed = threading.Event()

    def _wrap_future(self, fs, conn) -> None:
        fs.conn = conn
        self.futures.add(fs)
        fs.add_done_callback(self._forget)
        fs.add_done_callback(self.finish_request)

    def _forget(self, fs) -> None:
        self.futures.discard(fs)
        self._slot_freed.set()

    def run(self) -> None:
        """ThreadWorker.run without the futures.wait() over every running request."""
        for sock in self.sockets:
            sock.setblocking(False)
            self.poller.register(sock, selectors.EVENT_READ, partial(self.accept, sock.getsockname()))
        while self.alive:
            self.notify()
            if self.nr_conns < self.worker_connections:
                for key, _ in self.poller.select(1.0):
                    key.data(key.fileobj)
            else:
                # full: wait for a request (or a socket) to finish before accepting more
                self._slot_freed.wait(1.0)
                self._slot_freed.clear()
            if not self.is_parent_alive():
                break
            self.murder_keepalived()
        self.tpool.shutdown(False)
        self.poller.close()
        for sock in self.sockets:
            sock.close()
        futures.wait(list(self.futures), timeout=self.cfg.graceful_timeout)
