"""A TCP listener on 127.0.0.1 that counts connections: a stand-in for a host that must never be reached."""

from __future__ import annotations

import socket
import threading


class Listener:
    """A TCP server on 127.0.0.1: each connection is counted and served by handler(conn, listener) on a thread."""

    def __init__(self, handler=None) -> None:
        self.handler = handler or (lambda conn, listener: None)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self.sent = 0  # body bytes the handler managed to write
        self.finished = False  # the handler wrote everything it meant to
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Listener:
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                self.handler(conn, self)
            except OSError:
                pass  # the client hung up: that is what several tests want

    def read_request(self, conn: socket.socket) -> bytes:
        """Read one HTTP request (head and Content-Length body)."""
        conn.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(body) < length:
            body += conn.recv(65536)
        self.requests.append(head)
        return head
