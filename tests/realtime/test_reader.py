"""The shared reader (app/realtime/connection.py): one thread reads every socket, even when fd numbers are reused."""

from __future__ import annotations

import base64
import os
import socket

from simple_websocket import Server

from app.realtime.connection import SharedReaderThread


def server_on(sock: socket.socket) -> Server:
    """A simple-websocket server on sock after a client's handshake, read by the shared reader."""
    environ = {
        "gunicorn.socket": sock,
        "HTTP_HOST": "127.0.0.1",
        "HTTP_UPGRADE": "websocket",
        "HTTP_CONNECTION": "Upgrade",
        "HTTP_SEC_WEBSOCKET_KEY": base64.b64encode(os.urandom(16)).decode(),
        "HTTP_SEC_WEBSOCKET_VERSION": "13",
    }
    return Server(environ, thread_class=SharedReaderThread)


def masked_text(payload: bytes) -> bytes:
    """One client text frame (masked with a zero key, so the payload reads as is)."""
    return bytes([0x81, 0x80 | len(payload)]) + b"\0\0\0\0" + payload


def test_a_message_reaches_the_socket_that_reuses_a_closed_sockets_fd_number():
    old_server, old_client = socket.socketpair()
    old = server_on(old_server)
    number = old_server.fileno()
    old_server.close()  # closed by the server before the reader forgot it (what stop() prevents)
    pair = socket.socketpair()
    new_server, new_client = pair if pair[0].fileno() == number else pair[::-1]
    try:
        assert new_server.fileno() == number
        new = server_on(new_server)
        new_client.sendall(masked_text(b"hello"))
        assert new.receive(timeout=3) == "hello"
        assert not old.thread.is_alive()  # the stale registration was dropped, not the new one
        assert new.thread.is_alive()
        new.thread.stop()
        assert not new.thread.is_alive()
    finally:
        for sock in (old_client, new_server, new_client):
            sock.close()
