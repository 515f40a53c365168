"""Where a multinode job's ranks run: this node's share of them, and how they are started.

A job with ``multinode: {nodes: N, procs-per-node: P}`` is assigned to N nodes at once; the
node at position ``part`` of the assignment's node list runs ranks ``part * P`` to
``part * P + P - 1`` of ``N * P``, all in one container (ranks on a node share its memory
and /dev/shm, as MPI expects). Each rank finds its process manager through the PMI-1
variables MPICH's libpmi reads (``PMI_PORT``, ``PMI_ID``); see ``substrate.pmi``.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from collections.abc import Collection
from dataclasses import dataclass

from fuzzball_core.spec import Job, Service
from fuzzball_core.spec.resources import job_resources
from fuzzball_core.substrate.network import NodeInterface

#: Starts the node's ranks of a command, run as ``/bin/sh LAUNCHER FIRST COUNT COMMAND...``
#: (only when a node runs several ranks). Each gets its rank (``FB_RANK``, and PMI's
#: ``PMI_ID``/``PMI_RANK``) and its index on the node (``FB_LOCAL_RANK``), plus torchrun's
#: ``RANK`` and ``LOCAL_RANK`` in a generic job. The first rank to fail takes the others down, as
#: Hydra and ``srun --kill-on-bad-exit`` do (the rest would wait for it forever), by
#: signalling the container's process group itself rather than asking the launcher (a
#: signal arriving as a shell enters ``wait`` can go unnoticed until a child exits), and the
#: launcher exits with that rank's status; stopped from outside, it passes SIGTERM on. The
#: group is signalled again a second later by a helper that ignores the signal (inherited
#: from the failing rank's shell, so it survives the first): a rank's shell just forked can
#: miss a signal that arrives before it has reset the launcher's trap (5 of 300 tries of that
#: race here), and its rank then waits for the failed one until the job's timeout.
LAUNCHER_SCRIPT = """\
first=$1 count=$2
shift 2
failed=/tmp/.fuzzball-failed-rank
stopped=0
trap 'trap "" TERM; stopped=1; kill -TERM 0 2>/dev/null' TERM
i=0
while [ "$i" -lt "$count" ]; do
  rank=$((first + i))
  (
    trap - TERM
    if [ "$FB_MULTINODE_IMPLEMENTATION" = generic ]; then
      export RANK=$rank LOCAL_RANK=$i
    fi
    PMI_ID=$rank PMI_RANK=$rank FB_RANK=$rank FB_LOCAL_RANK=$i "$@"
    code=$?
    if [ "$code" -ne 0 ] && [ ! -e "$failed" ]; then
      echo "$code" > "$failed"
      echo "rank $rank exited with code $code" >&2
      trap '' TERM
      ( sleep 1; kill -TERM 0 2>/dev/null ) &
      kill -TERM 0 2>/dev/null
    fi
    exit "$code"
  ) &
  i=$((i + 1))
done
until wait; do :; done
if [ -e "$failed" ]; then
  exit "$(cat "$failed")"
fi
if [ "$stopped" = 1 ]; then
  exit 143
fi
exit 0
"""


@dataclass(frozen=True)
class RankLayout:
    """This node's part of a multinode run."""

    part: int
    nodes: int
    procs_per_node: int

    @classmethod
    def of(cls, job: Job | Service, node_ids: list[str], node_id: str) -> RankLayout | None:
        """The layout for ``node_id``, or None for a job (or service) that is not multinode.

        Without ``procs-per-node`` a node runs one process per core the job has there, as
        the API defines it ("the number of CPUs allocated to the job container")."""
        if job.multinode is None:
            return None
        part = node_ids.index(node_id) if node_id in node_ids else 0
        procs = job.multinode.procs_per_node or job_resources(job).cores
        return cls(part, job.multinode.nodes, procs)

    @property
    def first_rank(self) -> int:
        return self.part * self.procs_per_node

    @property
    def size(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def local_ranks(self) -> range:
        return range(self.first_rank, self.first_rank + self.procs_per_node)

    @property
    def process_mapping(self) -> str:
        """MPICH's ``PMI_process_mapping``: blocks of ``procs_per_node`` ranks per node."""
        return f"(vector,(0,{self.nodes},{self.procs_per_node}))"

    def environment(self, pmi_port: int) -> dict[str, str]:
        """Variables every rank of this node gets (the rank's own are set per process)."""
        env = {
            "PMI_PORT": f"127.0.0.1:{pmi_port}",
            "PMI_SIZE": str(self.size),
            "FB_NODE_INDEX": str(self.part),
            "FB_NODE_COUNT": str(self.nodes),
            "FB_PROCS_PER_NODE": str(self.procs_per_node),
        }
        if self.procs_per_node == 1:
            rank = str(self.first_rank)
            env.update(PMI_ID=rank, PMI_RANK=rank, FB_RANK=rank, FB_LOCAL_RANK="0")
        return env


#: The variables that name the network interface each transport a multinode job's ranks may
#: use sends over: UCX (MPICH's transport on Debian, ch4:ucx), NCCL's and Gloo's bootstrap and
#: socket transports (torchrun). Without them each picks among every interface the node has,
#: a node-local job bridge too, whose address is the same on every node: a rank then
#: "reaches" its peer on its own node and the job fails or hangs.
TRANSPORT_INTERFACE_VARIABLES = ("UCX_NET_DEVICES", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def transport_environment(interface: str, own: Collection[str] = ()) -> dict[str, str]:
    """:data:`TRANSPORT_INTERFACE_VARIABLES` set to ``interface`` (the one holding the node's
    address), except those named in ``own``, the variables the job's ``env`` or its image's
    ``Env`` sets: a job or image that names its interfaces (an InfiniBand device for UCX,
    say) keeps them."""
    return {name: interface for name in TRANSPORT_INTERFACE_VARIABLES if name not in own}


# Linux's ioctls for an interface's IPv4 address and netmask (linux/sockios.h); each takes a
# ``struct ifreq``: the interface's name in 16 bytes, then a ``sockaddr_in`` whose address
# is at bytes 4-8
_SIOCGIFADDR = 0x8915
_SIOCGIFNETMASK = 0x891B
_IFREQ = struct.Struct("16s16s")


def primary_interface(address: str) -> NodeInterface | None:
    """The interface whose (primary) IPv4 address is ``address``, with its subnet; None when
    none is, or ``address`` is not IPv4 (then ask
    :func:`~fuzzball_core.substrate.network.node_interface`, which sees every address).

    One ``SIOCGIFADDR`` per interface and one ``SIOCGIFNETMASK``: a few microseconds each,
    cheap enough for the event loop, where the netlink dump of every address through
    pyroute2 took 2-3 ms of CPU and a worker thread at each multinode part's start."""
    try:
        if ipaddress.ip_address(address).version != 4:
            return None
    except ValueError:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = _IFREQ.pack(name.encode(), b"")
            try:
                held = _IFREQ.unpack(fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, request))[1]
                if socket.inet_ntoa(held[4:8]) != address:
                    continue
                mask = _IFREQ.unpack(fcntl.ioctl(probe.fileno(), _SIOCGIFNETMASK, request))[1]
            except OSError:  # no IPv4 address, or the interface went away meanwhile
                continue
            subnet = ipaddress.ip_interface(f"{address}/{socket.inet_ntoa(mask[4:8])}").network
            return NodeInterface(name=name, subnet=str(subnet))
    return None
