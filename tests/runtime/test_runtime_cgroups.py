"""Which hosts can give jobs cpusets, and a job's cpuset cgroup holding its CPUs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
