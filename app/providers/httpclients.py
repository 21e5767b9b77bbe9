"""One keep-alive httpx client per process, origin and timeout, shared by the process's threads (the SMS providers)."""

from __future__ import annotations

import os
import threading

import httpx

_clients: dict[tuple, httpx.Client] = {}  # (process id, origin, timeout) -> its client
_lock = threading.Lock()


def shared(origin: str, timeout: float) -> httpx.Client:
    """This process's client for origin (a forked worker makes its own: a parent's pooled sockets are not its own)."""
    key = (os.getpid(), origin, timeout)
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = httpx.Client(timeout=timeout, follow_redirects=False)
        return client


def close_all() -> None:
    """Close this process's clients (tests; a worker's exit closes them anyway)."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


def json_object(response: httpx.Response) -> dict:
    """The answer's JSON object, or {} when it has none (a provider's error page, an empty body)."""
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
