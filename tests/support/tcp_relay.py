"""A loopback TCP relay to a server that can be cut off and back: while down it takes each
connection and closes it at once (the port stays the relay's), so a client sees the server
unreachable; once up again it relays. For tests of what happens when a peer is unreachable
for a while and then answers at the same address."""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpRelay:
    """Relays ``127.0.0.1:<port>`` to ``target`` (host, port) while :attr:`up`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.up = True
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
