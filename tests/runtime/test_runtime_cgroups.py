"""Which hosts can give jobs cpusets, a job's cpuset cgroup holding its CPUs, and a container
in every group of its job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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


def _metered_job(layout: CgroupLayout, group: str, job_id: str) -> JobCgroups:
    job = JobCgroups(layout, group, job_id)
    job.create(memory=None, cpus=None, cpuset=None, pids=None, need_v2=True)
    return job


def test_a_jobs_group_is_made_again_after_its_parent_was_removed() -> None:
    # a process prepares its jobs' parent group once; when something removed it since (a
    # sweep of another process finding it without jobs), the next job makes it again
    layout = detect_layout()
    if layout.unified is None:
        pytest.skip("no cgroup v2 hierarchy to make metered jobs' groups in")
    group = f"fbrt-test-parent-{os.getpid()}"
    first = _metered_job(layout, group, "job-1")
    first.remove()
    parent = layout.unified / group
    os.rmdir(parent)
    second = _metered_job(layout, group, "job-2")
    try:
        assert second.v2_dir == parent / "job-2"
        assert second.v2_dir.is_dir()
    finally:
        second.remove()
        remove_group_parents(layout, group)
    assert not parent.exists()


def test_a_jobs_groups_are_kept_by_name_and_given_out_as_paths() -> None:
    # made, opened and removed by their names (text), without a Path per step
    layout = detect_layout()
    if layout.unified is None:
        pytest.skip("no cgroup v2 hierarchy to make metered jobs' groups in")
    group = f"fbrt-test-names-{os.getpid()}"
    job = _metered_job(layout, group, "job-1")
    try:
        assert job.dir_names == [os.path.join(layout.unified, group, "job-1")]
        assert job.dirs == [Path(name) for name in job.dir_names]
        assert job.v2_dir == Path(job.dir_names[0])
        assert job.memory_dir is None
    finally:
        job.remove()
        remove_group_parents(layout, group)
    assert job.dir_names == []


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


def test_an_ended_containers_status_is_read_before_its_groups_are_freed(image, state_dir) -> None:
    # the agent reports the exit first and frees the groups off the report's way
    spec = ContainerSpec(image=image, command=["true"], memory=64 << 20, state_dir=state_dir)
    handle = Container(spec).start()
    job_dirs = list(handle._cgroups.dirs)
    deadline = time.monotonic() + 10
    while True:
        try:
            status = handle.ended_status()
            break
        except TimeoutError:
            assert time.monotonic() < deadline, "the container did not end"
            time.sleep(0.01)
    assert status.exit_code == 0
    assert all(directory.is_dir() for directory in job_dirs)
    handle.close()
    assert not any(directory.exists() for directory in job_dirs)


#: Run in a child process: clone3 answers ENOSYS from then on (a seccomp filter, as on a
#: kernel before 5.3 or under a filter that predates clone3), then a job's container is
#: started; prints its job directories and its /proc/PID/cgroup as JSON.
WITHOUT_CLONE3 = """
import ctypes, json, struct, sys
from fuzzball_runtime import Container, ContainerSpec
libc = ctypes.CDLL(None, use_errno=True)
insns = [
    (0x20, 0, 0, 0),  # load the syscall number
    (0x15, 0, 1, 435),  # clone3?
    (0x06, 0, 0, 0x00050000 | 38),  # then fail with ENOSYS
    (0x06, 0, 0, 0x7FFF0000),  # else allow
]
code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in insns))
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = Prog(len(insns), ctypes.addressof(code))
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0  # PR_SET_SECCOMP, a filter
spec = ContainerSpec(image=sys.argv[1], command=["sleep", "30"], memory=64 << 20, cpus=1.0,
                     metering=True, state_dir=sys.argv[2])
with Container(spec).start() as handle:
    dirs = [str(d) for d in handle._cgroups.dirs]
    print(json.dumps([dirs, open(f"/proc/{handle.pid}/cgroup").read()]))
"""


def test_without_clone3_a_container_still_runs_in_every_group_of_its_job(image, state_dir) -> None:
    # the fallback: clone, and the child writes its v2 group's cgroup.procs
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_CLONE3, str(image), str(state_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    job_dirs, membership = json.loads(done.stdout)
    assert job_dirs
    assert set(job_dirs) <= _group_dirs(membership)


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
