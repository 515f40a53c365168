"""Memory, memlock, CPU and pids limits are applied, and their outcomes reported."""

from __future__ import annotations

import resource
import warnings

import pytest

from fuzzball_runtime import Container, ContainerSpec, RuntimeWarningMessage

pytestmark = pytest.mark.root

MIB = 1 << 20


def test_process_allocating_past_the_memory_limit_is_killed_and_reported_oom(run) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarningMessage)
        status, output = run(
            'x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo survived', memory=16 * MIB
        )
    assert status.oom_killed
    assert "survived" not in output


def test_job_within_its_memory_limit_is_not_reported_oom(run) -> None:
    status, output = run("echo fine", memory=4 * MIB)
    assert (status.exit_code, status.oom_killed, output) == (0, False, "fine\n")


def test_memlock_is_the_memory_allocation_within_the_hard_limit(run) -> None:
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    memory = 4 * MIB
    assert memory <= hard
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarningMessage)
        status, output = run("ulimit -l; ulimit -H -l", memory=memory)
    assert output.split() == [str(memory // 1024)] * 2
    assert status.warnings == ()


def test_memlock_beyond_the_hard_limit_is_clamped_with_a_warning(run) -> None:
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    memory = hard + 64 * MIB
    with pytest.warns(RuntimeWarningMessage, match="RLIMIT_MEMLOCK") as caught:
        status, output = run("ulimit -l", memory=memory)
    assert output.strip() == str(hard // 1024)
    assert f"RLIMIT_MEMLOCK = {hard} bytes" in str(caught[0].message)
    assert any("CAP_SYS_RESOURCE" in note for note in status.warnings)


def test_memlock_default_is_kept_without_a_memory_request(run) -> None:
    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    _, output = run("ulimit -l")
    assert output.strip() == str(soft // 1024)


def test_cpuset_restricts_the_job_to_its_cores(run) -> None:
    _, output = run("grep Cpus_allowed_list /proc/self/status", cpuset="0")
    assert output.split() == ["Cpus_allowed_list:", "0"]


def test_cpu_quota_is_applied(image, state_dir) -> None:
    spec = ContainerSpec(image=image, command=["sleep", "30"], cpus=0.5, state_dir=state_dir)
    with Container(spec).start() as handle:
        cpu_dirs = [d for d in handle._cgroups.dirs if (d / "cpu.cfs_quota_us").exists()]
        assert [(d / "cpu.cfs_quota_us").read_text().strip() for d in cpu_dirs] == ["50000"]


def test_pids_limit_stops_forks_beyond_it(run) -> None:
    status, output = run(
        "exec 2>&1; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 5 & done; echo started",
        pids_limit=5,
    )
    assert "can't fork" in output
    assert status.exit_code != 0
    assert "started" not in output  # busybox sh gives up at the first refused fork
