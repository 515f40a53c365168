"""A node cut off without its connection closing (the link gone: no FIN, no RST reaches
Orchestrate) is found by the node API's keepalive pings (``orchestrate.node-keepalive``): gRPC
closes the silent connection, its Connect stream ends, and the closed stream's grace
(``nodes.stream_grace``) applies, so the node is lost long before its lease ends.

The node is a hollow node (tests/support/hollow.py, the real node API) in a network namespace
of its own (support.netns_cluster.ClusterNetwork: a veth to a bridge in a namespace of its own,
Orchestrate listening on this machine's end); the cut is its ``eth0`` set down inside that
namespace, so nothing of this machine's own network is touched."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.cluster import NODE_TOKEN, InProcessOrchestrate, cluster_config, free_port
from support.hollow import FleetCounters, fleet_process
from support.netns_cluster import ClusterNetwork

from fuzzball_core.orchestrate import nodes

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None,
    reason="needs root and iproute2 for a network namespace",
)

#: the configured lease, and so the closed stream's grace
GRACE = 4.0
#: the node's own lease: HEARTBEATS_PER_SECOND is lowered so that a one-node cluster gets the
#: long lease of a large one (3 * 1.25 / HEARTBEATS_PER_SECOND)
LEASE = 150.0
#: keepalive pings every second of quiet, a second to answer
KEEPALIVE = {"interval": 1.0, "timeout": 1.0}


def wait_until(condition: Callable[[], bool], what: str, within: float) -> float:
    """Seconds until ``condition()`` holds; AssertionError naming ``what`` past ``within``."""
    began = time.monotonic()
    while not condition():
        assert time.monotonic() - began < within, f"{what} not in {within:.0f} s"
        time.sleep(0.1)
    return time.monotonic() - began


def node_status(orchestrate: InProcessOrchestrate, name: str) -> str | None:
    """The status of the node named ``name``, None while there is none."""
    return next((n.status for n in orchestrate.nodes() if n.name == name), None)


@pytest.fixture
def network() -> Iterator[ClusterNetwork]:
    made = ClusterNetwork(1)
    try:
        yield made
    finally:
        made.remove()


@pytest.fixture
def orchestrate(
    tmp_path: Path, network: ClusterNetwork, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InProcessOrchestrate]:
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 3 * nodes.RETUNE_GROWTH / LEASE)
    config = cluster_config(
        tmp_path,
        "http://127.0.0.1:1",  # no image is pulled: no workflow runs
        grpc_port=free_port(),
        lease=GRACE,
        host=network.gateway,
        orchestrate={"node-keepalive": KEEPALIVE},
    )
    started = InProcessOrchestrate(config)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def hollow_node(orchestrate: InProcessOrchestrate, network: ClusterNetwork) -> Iterator[str]:
    """One hollow node, named ``silent``, in the network's node namespace; its name."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    process = context.Process(
        target=fleet_process,
        args=(
            orchestrate.config.orchestrate.grpc_listen,
            NODE_TOKEN,
            ["silent"],
            FleetCounters(),
            stop,
            {},
            network.namespaces[0],
        ),
        daemon=True,
    )
    process.start()
    try:
        yield "silent"
    finally:
        stop.set()
        process.join(10)
        if process.is_alive():
            process.kill()


def test_a_node_cut_off_without_its_stream_closing_is_lost_after_keepalive_and_grace(
    orchestrate: InProcessOrchestrate, network: ClusterNetwork, hollow_node: str
) -> None:
    wait_until(lambda: node_status(orchestrate, hollow_node) == "READY", "READY", 60)
    (node_id,) = [n.id for n in orchestrate.nodes() if n.name == hollow_node]
    context = orchestrate.orchestrate.engine.context
    # the Welcome that names the long lease follows the Hello
    wait_until(
        lambda: orchestrate.call(lambda: nodes.lease_of(context, node_id)) == LEASE,
        "the long lease",
        30,
    )
    subprocess.run(
        ["ip", "-n", network.namespaces[0], "link", "set", "eth0", "down"],
        check=True,
        capture_output=True,
    )
    # the pings' interval and timeout, the grace and a pass, with room for a loaded machine;
    # without the pings the connection stays open until the node's lease ends (150 s), or
    # until gRPC's default TCP_USER_TIMEOUT (20 s) ends it when Orchestrate happened to send
    # the node something after the cut
    lost_after = wait_until(
        lambda: node_status(orchestrate, hollow_node) == "OFFLINE", "OFFLINE", GRACE + 12
    )
    assert lost_after > GRACE  # the grace ran from the closed stream, as a crash's does
