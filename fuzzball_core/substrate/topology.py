"""The cores this node can pin jobs to, read from sysfs, as the agent registers them.

Each logical CPU the agent may use (its own affinity mask) belongs to a physical core
(``topology/physical_package_id`` and ``topology/core_id``) and a NUMA node (the ``nodeN``
entry of its sysfs directory; node 0 on machines without NUMA). Cores are numbered from 0 in
order of their socket and first logical CPU, since the kernel's ``core_id`` repeats across
sockets.

A node that registers a ``cores`` count below its logical CPUs offers only the first
``cores`` of them (their cores, with those threads). A count above what the machine has (an
over-committed node, as test clusters run several agents on one machine) is a count only:
its jobs are counted against it, but the cores pinned jobs get are the machine's own, so it
offers every core it has and no more. A node whose cgroups offer no cpusets reports no
topology and takes no job that asks for a CPU layout.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from fuzzball_core.scheduling import CpuCore
from fuzzball_runtime.cgroups import detect_layout, supports_cpusets

#: where the kernel describes the CPUs
SYS_CPU = Path("/sys/devices/system/cpu")


def _read_int(path: Path, default: int = 0) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return default


def _numa_node(cpu_dir: Path) -> int:
    for entry in cpu_dir.glob("node[0-9]*"):
        return int(entry.name.removeprefix("node"))
    return 0


def pinnable_cores(cores: int | None = None) -> tuple[CpuCore, ...]:
    """What the agent registers: :func:`cpu_topology`, or nothing on a host whose cgroups
    cannot give a job a cpuset (a cgroup v2 tree delegated without ``cpuset``)."""
    if not supports_cpusets(detect_layout()):
        return ()
    return cpu_topology(cores)


def cpu_topology(cores: int | None = None, sys_cpu: Path = SYS_CPU) -> tuple[CpuCore, ...]:
    """This node's cores over the logical CPUs it may use, limited to the first ``cores``
    of them (None, or more than it has: all); empty when sysfs says nothing."""
    allowed = sorted(os.sched_getaffinity(0))
    if cores is not None:
        allowed = allowed[:cores]
    return group_cores(
        (
            cpu,
            _read_int(sys_cpu / f"cpu{cpu}/topology/physical_package_id"),
            _read_int(sys_cpu / f"cpu{cpu}/topology/core_id", cpu),
            _numa_node(sys_cpu / f"cpu{cpu}"),
        )
        for cpu in allowed
        if (sys_cpu / f"cpu{cpu}").is_dir()
    )


def group_cores(cpus: Iterable[tuple[int, int, int, int]]) -> tuple[CpuCore, ...]:
    """Logical CPUs as (cpu, socket, kernel core id, NUMA node) grouped into cores, numbered
    from 0 by socket and first logical CPU."""
    grouped: dict[tuple[int, int], list[int]] = {}
    numa: dict[tuple[int, int], int] = {}
    for cpu, socket, core_id, node in cpus:
        grouped.setdefault((socket, core_id), []).append(cpu)
        numa.setdefault((socket, core_id), node)
    ordered = sorted(grouped, key=lambda key: (key[0], min(grouped[key])))
    return tuple(
        CpuCore(number, key[0], numa[key], tuple(sorted(grouped[key])))
        for number, key in enumerate(ordered)
    )
