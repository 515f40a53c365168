"""Which cores of a node a pinned job gets (``resource.cpu.affinity``, ``sockets``, ``threads``).

A node that reported its topology lists its cores (:class:`~fuzzball_core.scheduling.CpuCore`,
numbered from 0) with their socket, NUMA node and logical CPUs. A pinned job asks for ``count``
whole cores laid out as its :class:`~fuzzball_core.scheduling.CpuPinning` says:

* spread over exactly ``sockets`` sockets (one for SOCKET and NUMA affinity when unset), each
  socket giving an even share (the first ``count % sockets`` shares one core larger), or
  anywhere for CORE affinity without ``sockets``;
* with NUMA affinity, each socket's share from a single NUMA node of that socket.

Choices are best fit, so that large free groups stay whole for large requests: the largest
share goes first to the socket (or NUMA node) with the least free room that holds it, and the
lowest-numbered free cores of that group are taken. Unconstrained requests go to the one
socket with the least room that holds them all, or else take the lowest free cores.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet

from fuzzball_core.scheduling import CpuAffinity, CpuCore, CpuPinning


def choose_cores(
    topology: Sequence[CpuCore], free: AbstractSet[int], count: int, pinning: CpuPinning
) -> list[int] | None:
    """The ids of ``count`` free cores (of ``free``) laid out as ``pinning`` asks, or None
    when the free cores allow no such layout. A request for no cores still gets one."""
    count = max(count, 1)
    if len(free) < count:
        return None
    sockets: dict[int, list[CpuCore]] = {}
    for core in topology:
        if core.id in free:
            sockets.setdefault(core.socket, []).append(core)
    spread = pinning.socket_count
    if spread is None:
        whole = [(len(cores), socket) for socket, cores in sockets.items() if len(cores) >= count]
        if whole:
            _, socket = min(whole)
            return [core.id for core in sockets[socket][:count]]
        return sorted(free)[:count]
    if count < spread or len(sockets) < spread:
        return None
    base, extra = divmod(count, spread)
    shares = [base + 1] * extra + [base] * (spread - extra)
    numa = pinning.affinity is CpuAffinity.NUMA
    groups = {socket: _groups(cores, numa) for socket, cores in sockets.items()}
    room = {socket: max(len(group) for group in found) for socket, found in groups.items()}
    chosen: list[int] = []
    for share in shares:
        fitting = [(space, socket) for socket, space in room.items() if space >= share]
        if not fitting:
            return None
        _, socket = min(fitting)
        del room[socket]
        group = min(
            (group for group in groups[socket] if len(group) >= share),
            key=lambda cores: (len(cores), cores[0].id),
        )
        chosen.extend(core.id for core in group[:share])
    return sorted(chosen)


def _groups(cores: list[CpuCore], by_numa: bool) -> list[list[CpuCore]]:
    """A socket's free cores as the groups a share must come from: one group per NUMA node
    for NUMA affinity, else the whole socket."""
    if not by_numa:
        return [cores]
    found: dict[int, list[CpuCore]] = {}
    for core in cores:
        found.setdefault(core.numa, []).append(core)
    return list(found.values())


def logical_cpus(
    topology: Sequence[CpuCore], core_ids: Iterable[int], threads: bool
) -> tuple[int, ...]:
    """The logical CPUs of these cores a cpuset names: every hardware thread with
    ``threads``, else the first thread of each core."""
    cpus: list[int] = []
    for core_id in core_ids:
        core_threads = topology[core_id].threads
        cpus.extend(core_threads if threads else core_threads[:1])
    return tuple(sorted(cpus))


def cores_of(topology: Sequence[CpuCore], cpus: Iterable[int]) -> list[int]:
    """The ids of the cores these logical CPUs belong to (CPUs the topology lacks are
    dropped: a node that re-registered smaller keeps only what it still has)."""
    wanted = set(cpus)
    return [core.id for core in topology if wanted.intersection(core.threads)]
