"""Small tools for tests that play several machines in network namespaces: make and remove
one, run code inside one (:func:`entered`), a TCP server that answers and remembers who
called (:class:`Listener`). Used by the runtime's network tests and the netns test clusters.

Nothing here forks the test process: pyroute2's ``netns.create`` and ``IPRoute(netns=...)``
do, and a forked child of a process running gRPC's threads (the e2e session's Orchestrate)
may crash. Namespaces are made by ``ip netns`` (a program of its own) and configured with
pyroute2 from inside (:func:`entered`)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

from pyroute2 import netns


def create_namespace(name: str) -> None:
    """A new network namespace named ``name`` (``/run/netns/NAME``)."""
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)


def remove_namespace(name: str) -> None:
    """Remove namespace ``name`` and everything in it, if it exists."""
    subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)


@contextlib.contextmanager
def entered(name: str) -> Iterator[None]:
    """Run the body in network namespace ``name`` (this thread only; then back). Sockets
    opened inside stay in it."""
    netns.pushns(name)
    try:
        yield
    finally:
        netns.popns()


class Listener:
    """A TCP server in the current namespace (on ``port``, else one the kernel picks)
    answering each connection with ``reply`` and remembering the peers' addresses; closed by
    :meth:`close`."""

    def __init__(
        self, address: str = "0.0.0.0", reply: bytes = b"from-the-node\n", port: int = 0
    ) -> None:
        self.sock = socket.create_server((address, port))
        self.port: int = self.sock.getsockname()[1]
        self.peers: list[str] = []
        self._reply = reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, peer = self.sock.accept()
                self.peers.append(peer[0])
                with conn:
                    conn.sendall(self._reply)

    def close(self) -> None:
        self.sock.close()


def read_from(host: str, port: int, timeout: float = 10.0) -> bytes:
    """Connect to HOST:PORT and read to EOF, retrying while nothing answers yet (a job
    that has not started listening); empty when nothing did within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        with (
            contextlib.suppress(OSError),
            socket.create_connection((host, port), timeout=2) as sock,
        ):
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
            if data:
                return data
        if time.monotonic() > deadline:
            return b""
        time.sleep(0.05)
