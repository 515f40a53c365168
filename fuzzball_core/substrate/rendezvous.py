"""``multinode.implementation: generic`` jobs: what torchrun (and anything shaped like it,
such as ``torch.distributed``'s ``env://`` initialisation) needs to meet across nodes.

Before the containers start, the parts of the run exchange (a fence of sequence 0 through
Orchestrate, :func:`offer`) each node's address, and part 0 a free port of its own: the
rendezvous point, where rank 0 (or torchrun's c10d store on node 0) listens. Every part's
container resolves every part's hostname (``<job>-<index>``) to its node's address, and gets
(:func:`environment`):

``MASTER_ADDR``, ``MASTER_PORT``
    part 0's address and that port.
``WORLD_SIZE``
    every process of the job (``nodes * procs-per-node``).
``NODE_RANK`` (and ``GROUP_RANK``, torchrun's name for it)
    this part's index, as ``FB_NODE_INDEX``.
``LOCAL_WORLD_SIZE``
    the processes on this node (``procs-per-node``), as ``FB_PROCS_PER_NODE``.
``RANK``, ``LOCAL_RANK``
    each process's own, set by the rank launcher (``FB_RANK``, ``FB_LOCAL_RANK``).
``FB_NODE_ADDRESSES``
    every part's address, in part order, comma separated.
``FB_MULTINODE_IMPLEMENTATION``
    ``generic``.

With ``procs-per-node: 1`` the one process can be ``torchrun`` itself, starting its own
workers (``--nnodes $FB_NODE_COUNT --node-rank $NODE_RANK --master-addr $MASTER_ADDR
--master-port $MASTER_PORT``); with more, Fuzzball starts them and each can call
``init_process_group`` directly. See docs/distributed-training.md.
"""

from __future__ import annotations

import socket

from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.substrate.ranks import RankLayout

#: The launch exchange's keys.
MASTER_KEY = "master"
ADDRESS_KEY = "address.{part}"


def free_port(address: str) -> int:
    """A TCP port nothing listens on at ``address`` now (the kernel's choice, as torchrun
    picks its own; the job binds it moments later)."""
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])


def offer(layout: RankLayout, address: str, *, meeting_point: bool = True) -> dict[str, str]:
    """What this part puts into the launch exchange: its address, and for part 0 the
    rendezvous point (``ADDRESS:PORT``) unless ``meeting_point`` is false (Open MPI's parts
    exchange only their addresses). A node whose address is unknown cannot take part."""
    if not address:
        raise FailedPrecondition(
            "this node's address is unknown (set substrate.address): the parts of a"
            " multinode job meet at their nodes' addresses"
        )
    mine = {ADDRESS_KEY.format(part=layout.part): address}
    if layout.part == 0 and meeting_point:
        mine[MASTER_KEY] = f"{address}:{free_port(address)}"
    return mine


def part_addresses(layout: RankLayout, exchanged: dict[str, str]) -> list[str]:
    """Every part's node address, in part order, from the launch exchange."""
    return [exchanged.get(ADDRESS_KEY.format(part=part), "") for part in range(layout.nodes)]


def environment(layout: RankLayout, exchanged: dict[str, str]) -> dict[str, str]:
    """The variables of every process of this part, from what every part offered."""
    master_address, _, master_port = exchanged[MASTER_KEY].rpartition(":")
    addresses = part_addresses(layout, exchanged)
    env = {
        "MASTER_ADDR": master_address,
        "MASTER_PORT": master_port,
        "WORLD_SIZE": str(layout.size),
        "NODE_RANK": str(layout.part),
        "GROUP_RANK": str(layout.part),
        "LOCAL_WORLD_SIZE": str(layout.procs_per_node),
        "FB_NODE_ADDRESSES": ",".join(addresses),
        "FB_MULTINODE_IMPLEMENTATION": "generic",
    }
    if layout.procs_per_node == 1:  # no rank launcher: the one process's ranks are here
        env.update(RANK=str(layout.first_rank), LOCAL_RANK="0")
    return env
