"""Loopback ports for the servers tests and benchmarks start."""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: the lowest port :func:`free_port` hands out: above the fixed ports of the services tests
#: start (PostgreSQL 5432, docker-registry 5000, Prometheus 9090, node_exporter 9100, ...)
_LOWEST_TEST_PORT = 15000
_handed_out: set[int] = set()


def _ephemeral_floor() -> int:
    """Where the kernel's range of source ports for outgoing connections starts."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A TCP port on loopback nobody listens on right now, for a server a test starts soon.

    It is taken below the kernel's ephemeral range: a port the kernel picked (binding port 0)
    can be taken as the source port of any outgoing connection on the machine before the
    test's server binds it, which CI saw under load as "address already in use". Ports are
    not handed out twice in one process, so two asked for one after the other differ."""
    ceiling = _ephemeral_floor()
    if ceiling - _LOWEST_TEST_PORT < 1000:  # a machine that made the range start low
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    while True:
        port = random.randrange(_LOWEST_TEST_PORT, ceiling)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
