"""The ``orchestrate.node-keepalive`` settings turned into the options gRPC's server and the
agents' channel take: one place, so that the two sides' pings agree with what each side
allows of the other.

gRPC's defaults would defeat the pings three ways, each set here: a server sends keepalive
pings only every two hours (``grpc.keepalive_time_ms``); either side stops pinging after two
pings while it sends no data (``grpc.http2.max_pings_without_data``: a node's stream is quiet
from Orchestrate's side for minutes at a time); and a server answers a client that pings more
often than every five minutes with GOAWAY ("too_many_pings",
``grpc.http2.min_ping_interval_without_data_ms``), closing the very stream the pings keep.
"""

from __future__ import annotations

from fuzzball_core.config import NodeKeepaliveConfig

#: gRPC channel and server arguments: (name, value)
Options = list[tuple[str, int]]


def _pings(keepalive: NodeKeepaliveConfig) -> Options:
    """The arguments both sides share: ping after ``interval`` of quiet, close the
    connection after ``timeout`` without the answer, with or without calls or data."""
    return [
        ("grpc.keepalive_time_ms", int(keepalive.interval * 1000)),
        ("grpc.keepalive_timeout_ms", int(keepalive.timeout * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def server_options(keepalive: NodeKeepaliveConfig) -> Options:
    """Orchestrate's gRPC server: its own pings, and the agents' accepted at their interval
    (half of it as the floor: a ping timer that fires a little early is no strike)."""
    return [
        *_pings(keepalive),
        ("grpc.http2.min_ping_interval_without_data_ms", int(keepalive.interval * 500)),
    ]


def channel_options(keepalive: NodeKeepaliveConfig) -> Options:
    """An agent's channel to Orchestrate: pings at the interval the server accepts, so an
    agent finds a vanished Orchestrate (and reconnects) as Orchestrate finds a vanished
    node."""
    return _pings(keepalive)
