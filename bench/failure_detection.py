"""Failure detection: how long a failed agent's node keeps its runs, beside the peers' defaults.

At each size a fresh Orchestrate on PostgreSQL (bench/hollow_cluster.py) first takes
``--victims`` hollow nodes in a fleet process of their own, each given one whole-node task
it holds running (``hold_runs``: a real agent's running container; the image stage ends at
once), then the rest of the hollow nodes, so that the victims' leases are the large
cluster's (Orchestrate lengthens them as it grows: ``nodes.retune``). Then the victims fail,
in one of two ways (``--modes``):

* ``kill``: their process is killed (SIGKILL: its TCP connections close, as a crashed
  agent's do; the closed streams' grace applies at once);
* ``flap`` (no victims, no tasks): every node's connection is aborted at once (``ss -K`` on
  Orchestrate's gRPC port: its side ends, the node's gets a reset), as a switch or proxy
  dropping them all would, no restart; every node reconnects as an agent does (its backoff,
  a Register, a Hello on a new stream). It prints how many nodes were lost for it (none
  should be: a node waiting behind the others' Registers is not failed) and when all were
  back;
* ``silent``: their process runs in a network namespace of its own (a veth to a bridge,
  support.netns_cluster.ClusterNetwork; Orchestrate listens on this machine's end) and its
  ``eth0`` is set down: nothing reaches Orchestrate, not even a FIN or RST, as with a host
  powered off or cut off. Only the node API's keepalive pings (``orchestrate.node-keepalive``,
  ``--keepalive``) close those streams before the leases end.

The benchmark polls the node list and the workflow until every victim is OFFLINE ("declared
lost") and the held tasks are given back (failed with their node and run again on the live
nodes, which end them at once: the workflow ends). It prints the seconds from the failure to
the first and the last victim declared lost and to the workflow's end, beside the lease
terms of a cluster that size.

The peers' defaults, printed beside the figures (no peer runs here: these are their
documented settings, not measurements): Slurm declares a node DOWN after ``SlurmdTimeout``
(300 s), Kubernetes' node controller after kubelet's node-monitor grace period (40 s; 50 s
in recent releases), Nomad after its heartbeat grace (10 s).

Needs root, Debian's postgresql and docker-registry (and iproute2 for ``silent``). Usage:
    python bench/failure_detection.py [--sizes 1000,5000] [--victims 10] [--lease 15]
        [--modes kill,silent,flap] [--keepalive INTERVAL,TIMEOUT]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator

from hollow_cluster import KEEPALIVE_HELP, HollowCluster, keepalive_option
from support.netns_cluster import ClusterNetwork

from fuzzball_core.config import NodeKeepaliveConfig

#: one task per victim: each asks for a whole hollow node (64 cores), so every victim
#: holds exactly one
HELD = """
version: v1
jobs:
  held:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/sleep, infinity]
    resource: {{cpu: {{cores: 64}}, memory: {{size: 64MB}}}}
    task-array: {{start: 1, end: {tasks}}}
"""

#: seconds between two polls of the node list and the workflow after the kill
POLL = 0.25

PEERS = "Slurm SlurmdTimeout 300 s, kubelet node-monitor grace 40-50 s, Nomad heartbeat grace 10 s"


def wait_for(condition: object, what: str, timeout: float) -> None:
    """Poll ``condition`` (a callable) until it is true; TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not in {timeout:.0f} s")
        time.sleep(0.2)


@contextlib.contextmanager
def victims_network(mode: str) -> Iterator[ClusterNetwork | None]:
    """For ``silent``: the namespace the victims run in, removed afterwards."""
    if mode != "silent":
        yield None
        return
    network = ClusterNetwork(1)
    try:
        yield network
    finally:
        network.remove()


def measure(
    size: int, victims: int, lease: float, mode: str, keepalive: NodeKeepaliveConfig
) -> tuple[float, float, float, float]:
    """(the cluster's lease terms, seconds to the first and the last victim lost, seconds to the
    held tasks' workflow ending) for one cluster of ``size`` hollow nodes whose victims fail
    as ``mode`` says."""
    with victims_network(mode) as network:
        host = network.gateway if network is not None else "127.0.0.1"
        cluster = HollowCluster(lease=lease, host=host, keepalive=keepalive)
        try:
            return _measure(cluster, size, victims, lease, network)
        finally:
            cluster.close()


def _measure(
    cluster: HollowCluster,
    size: int,
    victims: int,
    lease: float,
    network: ClusterNetwork | None,
) -> tuple[float, float, float, float]:
    cluster.start()
    namespace = network.namespaces[0] if network is not None else ""
    cluster.add_nodes(victims, hold_runs="jobs.held", namespace=namespace)
    cluster.wait_welcomed(victims, timeout=60)
    workflow_id = cluster.submit(HELD.format(tasks=victims), name="held")
    wait_for(lambda: cluster.stats().holding >= victims, "every victim holding its task", 60)
    cluster.add_nodes(size - victims)
    cluster.wait_welcomed(size, timeout=max(300.0, 0.2 * size))
    # the last nodes' first heartbeats, and the sweep that told the victims the cluster's
    # lease (a Welcome on their stream), are past
    time.sleep(lease / 3 + 2)
    names = {f"hollow-{index:05d}" for index in range(victims)}
    listed = cluster.http.get("/nodes").json()["nodes"]
    victim_ids = {node["id"] for node in listed if node["hostName"] in names}
    if network is None:
        victim_fleet = cluster.fleets[0].process
        assert victim_fleet.pid is not None
        os.kill(victim_fleet.pid, signal.SIGKILL)
    else:
        cut = ["ip", "-n", network.namespaces[0], "link", "set", "eth0", "down"]
        subprocess.run(cut, check=True, capture_output=True)
    failed = time.monotonic()
    told = lease_for(size, lease)
    lost: dict[str, float] = {}
    ended = 0.0
    while len(lost) < len(victim_ids) or not ended:
        if time.monotonic() - failed > 4 * told + 60:
            raise TimeoutError(f"{len(lost)}/{len(victim_ids)} victims lost, ended {ended}")
        now = time.monotonic() - failed
        for node in cluster.http.get("/nodes").json()["nodes"]:
            if node["id"] in victim_ids and node["status"] != "READY":
                lost.setdefault(node["id"], now)
        if not ended and cluster.status(workflow_id).endswith(("FINISHED", "FAILED", "CANCELED")):
            ended = now
        time.sleep(POLL)
    return told, min(lost.values()), max(lost.values()), ended


def lease_for(size: int, lease: float) -> float:
    """The lease Orchestrate's terms give a node of a ``size``-node cluster (the function
    Orchestrate runs; a node connected earlier is told it again once the cluster has grown
    :data:`~fuzzball_core.orchestrate.nodes.RETUNE_GROWTH` past its last sweep)."""
    from types import SimpleNamespace

    from fuzzball_core.orchestrate import nodes

    terms = SimpleNamespace(lease_seconds=lease)  # all lease_terms reads of the context
    return nodes.lease_terms(terms, size)[0]  # type: ignore[arg-type]


def drop_streams(port: int) -> None:
    """Abort every TCP connection of Orchestrate's gRPC ``port`` at once, as a switch or proxy
    dropping them would (``ss -K``: Orchestrate's side of each ends at once, the node's
    gets a reset and reconnects as an agent does)."""
    subprocess.run(["ss", "-K", "-t", f"( sport = :{port} )"], check=True, capture_output=True)


def measure_flap(size: int, lease: float, keepalive: NodeKeepaliveConfig) -> tuple[int, float]:
    """Every node's stream dropped at once, no restart (a switch flap): (how many nodes were
    lost for it, seconds until every node was welcomed back) for ``size`` hollow nodes."""
    cluster = HollowCluster(lease=lease, keepalive=keepalive)
    try:
        cluster.start()
        cluster.add_nodes(size)
        cluster.wait_welcomed(size, timeout=max(300.0, 0.2 * size))
        time.sleep(lease / 3 + 2)
        # a node lost in the join (not READY at the drop) would be counted lost in the flap:
        # runs that "lost" 2-10 nodes in the flap had them OFFLINE before it began
        ready = sum(n["status"] == "READY" for n in cluster.http.get("/nodes").json()["nodes"])
        if ready < size:
            raise RuntimeError(f"{size - ready} of {size} nodes not READY before the drop")
        welcomed = cluster.stats().welcomed  # the streams' Welcomes so far, counted on
        drop_streams(cluster.grpc_port)
        dropped = time.monotonic()
        lost: set[str] = set()
        back = 0.0
        # until every node is back, and a grace more (a grace left running lapses by then)
        while not back or time.monotonic() - dropped < back + lease + 5:
            if time.monotonic() - dropped > max(600.0, 0.4 * size):
                raise TimeoutError(f"{cluster.stats().welcomed - welcomed}/{size} nodes back")
            listed = cluster.http.get("/nodes").json()["nodes"]
            lost.update(node["id"] for node in listed if node["status"] != "READY")
            if not back and cluster.stats().welcomed >= welcomed + size:
                back = time.monotonic() - dropped
            time.sleep(POLL)
        return len(lost), back
    finally:
        cluster.close()


#: what each mode's victims suffered, as printed
FAILURES = {"kill": "killed agents'", "silent": "cut-off agents'", "flap": ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--victims", type=int, default=10)
    parser.add_argument("--lease", type=float, default=15.0)
    parser.add_argument(
        "--modes",
        default="kill,silent,flap",
        help="kill, silent, flap, or several, comma-separated",
    )
    parser.add_argument("--keepalive", help=KEEPALIVE_HELP)
    options = parser.parse_args()
    keepalive = keepalive_option(options.keepalive)
    modes = options.modes.split(",")
    unknown = set(modes) - set(FAILURES)
    if unknown:
        parser.error(f"--modes: unknown {', '.join(sorted(unknown))} (kill, silent, flap)")
    print(
        f"configured lease {options.lease:g} s, keepalive pings after {keepalive.interval:g} s"
        f" of quiet, {keepalive.timeout:g} s to answer; {options.victims} agents at each size"
    )
    for size in (int(size) for size in options.sizes.split(",")):
        for mode in modes:
            if mode == "flap":
                lost, back = measure_flap(size, options.lease, keepalive)
                print(
                    f"{size:>5} nodes,   flap: every stream dropped at once; {lost} nodes lost,"
                    f" all back on new streams after {back:5.1f} s",
                    flush=True,
                )
                continue
            told, first, last, ended = measure(
                size, options.victims, options.lease, mode, keepalive
            )
            print(
                f"{size:>5} nodes, {mode:>6}: lease terms {told:5.1f} s; {FAILURES[mode]} nodes"
                f" lost after {first:5.1f}-{last:5.1f} s, their runs given back (workflow"
                f" ended) after {ended:5.1f} s ({PEERS})",
                flush=True,
            )


if __name__ == "__main__":
    main()
