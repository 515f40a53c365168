"""Which hosts can give jobs cpusets, a job's cpuset cgroup holding its CPUs, and a container
in every group of its job."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fuzzball_runtime import Container, ContainerSpec
from fuzzball_runtime.cgroups import (
    CgroupLayout,
    JobCgroups,
    detect_layout,
    remove_group_parents,
    supports_cpusets,
)

pytestmark = pytest.mark.root


def _v2_root(tmp_path: Path, controllers: str) -> Path:
    (tmp_path / "cgroup.controllers").write_text(controllers + "\n")
    return tmp_path


def test_cgroup_v2_root_offering_cpuset_supports_cpusets(tmp_path: Path) -> None:
    layout = CgroupLayout(_v2_root(tmp_path, "cpuset cpu io memory pids"))
    assert supports_cpusets(layout)


def test_cgroup_v2_root_without_cpuset_does_not_support_cpusets(tmp_path: Path) -> None:
    layout = CgroupLayout(_v2_root(tmp_path, "cpu io memory pids"))
    assert not supports_cpusets(layout)


def test_hybrid_cgroups_support_cpusets_with_the_v1_cpuset_controller(tmp_path: Path) -> None:
    layout = CgroupLayout(tmp_path, {"cpuset": tmp_path / "cpuset"})
    assert supports_cpusets(layout)


def test_hybrid_cgroups_without_the_v1_cpuset_controller_do_not(tmp_path: Path) -> None:
    layout = CgroupLayout(tmp_path, {"memory": tmp_path / "memory"})
    assert not supports_cpusets(layout)


def test_job_cpuset_cgroup_holds_the_cpus_it_was_given() -> None:
    layout = detect_layout()
    cpu = str(min(os.sched_getaffinity(0)))
    cgroups = JobCgroups(layout, "fbrt-test-cpuset", f"job-{os.getpid()}")
    cgroups.create(memory=None, cpus=None, cpuset=cpu, pids=None, need_v2=False)
    try:
        (directory,) = cgroups.dirs
        assert (directory / "cpuset.cpus").read_text().strip() == cpu
    finally:
        cgroups.remove()
        remove_group_parents(layout, "fbrt-test-cpuset")


def test_container_runs_in_every_group_of_its_job(image, state_dir) -> None:
    # v1 groups are joined through their tasks files, the v2 group by being cloned into it
    # (or through cgroup.procs where the kernel cannot): either way, all of them
    spec = ContainerSpec(
        image=image, command=["sleep", "30"], memory=64 << 20, cpus=1.0, state_dir=state_dir
    )
    with Container(spec).start() as handle:
        job_dirs = {str(directory) for directory in handle._cgroups.dirs}
        membership = Path(f"/proc/{handle.pid}/cgroup").read_text()
    assert job_dirs
    assert job_dirs <= _group_dirs(membership)


def _group_dirs(membership: str) -> set[str]:
    """The directories of the groups a /proc/PID/cgroup text names, in the hierarchies
    :func:`detect_layout` finds (a v1 line may name several controllers: "cpu,cpuacct")."""
    layout = detect_layout()
    found = set()
    for line in membership.splitlines():
        _, controllers, path = line.split(":", 2)
        roots = [layout.v1[c] for c in controllers.split(",") if c in layout.v1]
        if not controllers and layout.unified is not None:
            roots = [layout.unified]
        found.update(f"{root}{path}" for root in roots)
    return found
