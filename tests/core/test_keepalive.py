"""``orchestrate.node-keepalive`` as gRPC's server and the agents' channel take it
(fuzzball_core.keepalive)."""

from __future__ import annotations

from fuzzball_core.config import NodeKeepaliveConfig, parse_config
from fuzzball_core.keepalive import channel_options, server_options


def test_node_keepalive_is_read_from_the_configuration_file_as_durations():
    config = parse_config({"orchestrate": {"node-keepalive": {"interval": "20s", "timeout": 5}}})
    assert config.orchestrate.node_keepalive == NodeKeepaliveConfig(interval=20, timeout=5)


def test_the_server_accepts_the_agents_pings_as_often_as_they_send_them():
    # a server refusing pings more frequent than its floor answers them with GOAWAY
    # (too_many_pings), which would close the very streams the pings keep
    keepalive = NodeKeepaliveConfig(interval=7, timeout=3)
    sent_every = dict(channel_options(keepalive))["grpc.keepalive_time_ms"]
    floor = dict(server_options(keepalive))["grpc.http2.min_ping_interval_without_data_ms"]
    assert floor <= sent_every


def test_both_sides_ping_a_quiet_connection_for_as_long_as_it_lasts():
    # gRPC's default stops after two pings while a side sends no data, and a node's stream
    # is quiet from Orchestrate's side for minutes
    keepalive = NodeKeepaliveConfig()
    for options in (dict(server_options(keepalive)), dict(channel_options(keepalive))):
        assert options["grpc.http2.max_pings_without_data"] == 0
        assert options["grpc.keepalive_time_ms"] == 15_000
        assert options["grpc.keepalive_timeout_ms"] == 10_000
