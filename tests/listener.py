"""A TCP listener on 127.0.0.1:<free port> that accepts and counts every connection: the stand-in for a BMC or an
sshd that a refused run must never reach (a task body that ran would connect to it), and the base of small
misbehaving peers (``handle`` decides what a connection gets)."""

from __future__ import annotations

import socket
import threading


class Listener:
    """Accepts every connection, counts it (``accepts``) and hands it to :meth:`handle` (default: close it)."""

    def __init__(self, backlog: int = 64) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.accepts = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepts += 1
            self.handle(conn)

    def handle(self, conn: socket.socket) -> None:
        conn.close()

    def close(self) -> None:
        self.sock.close()
