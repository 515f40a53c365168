"""The cores a node registers for pinning, read from sysfs."""

from __future__ import annotations

import os
from pathlib import Path

from fuzzball_core.scheduling import CpuCore
from fuzzball_core.substrate.topology import cpu_topology, group_cores

ALLOWED = sorted(os.sched_getaffinity(0))


def _fake_sysfs(root: Path, socket_of, core_of, numa_of) -> Path:
    """A /sys/devices/system/cpu for this process's CPUs, laid out by the given functions."""
    for cpu in ALLOWED:
        topology = root / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{socket_of(cpu)}\n")
        (topology / "core_id").write_text(f"{core_of(cpu)}\n")
        (root / f"cpu{cpu}" / f"node{numa_of(cpu)}").mkdir()
    return root


def test_hyperthread_siblings_form_one_core() -> None:
    cores = group_cores([(0, 0, 0, 0), (1, 0, 1, 0), (2, 0, 0, 0), (3, 0, 1, 0)])
    assert cores == (CpuCore(0, 0, 0, (0, 2)), CpuCore(1, 0, 0, (1, 3)))


def test_cores_are_numbered_by_socket_then_first_cpu() -> None:
    cores = group_cores([(0, 0, 0, 0), (1, 1, 0, 1), (2, 0, 1, 0), (3, 1, 1, 1)])
    assert [(core.id, core.socket, core.numa, core.threads) for core in cores] == [
        (0, 0, 0, (0,)),
        (1, 0, 0, (2,)),
        (2, 1, 1, (1,)),
        (3, 1, 1, (3,)),
    ]


def test_sysfs_gives_each_cpu_its_socket_and_numa_node(tmp_path: Path) -> None:
    sysfs = _fake_sysfs(
        tmp_path, socket_of=lambda cpu: cpu, core_of=lambda cpu: 0, numa_of=lambda cpu: 7
    )
    cores = cpu_topology(sys_cpu=sysfs)
    assert [(core.socket, core.numa, core.threads) for core in cores] == [
        (cpu, 7, (cpu,)) for cpu in ALLOWED
    ]


def test_a_count_of_cores_offers_the_first_logical_cpus(tmp_path: Path) -> None:
    sysfs = _fake_sysfs(
        tmp_path, socket_of=lambda cpu: 0, core_of=lambda cpu: cpu, numa_of=lambda cpu: 0
    )
    cores = cpu_topology(1, sys_cpu=sysfs)
    assert cores == (CpuCore(0, 0, 0, (ALLOWED[0],)),)


def test_more_cores_than_the_machine_has_offer_every_core_it_has(tmp_path: Path) -> None:
    sysfs = _fake_sysfs(
        tmp_path, socket_of=lambda cpu: 0, core_of=lambda cpu: cpu, numa_of=lambda cpu: 0
    )
    cores = cpu_topology(len(ALLOWED) + 1, sys_cpu=sysfs)
    assert [core.threads for core in cores] == [(cpu,) for cpu in ALLOWED]
