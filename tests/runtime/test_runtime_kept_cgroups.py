"""A job's cgroups kept for the next job with the same key (``ContainerSpec.keep_cgroups``):
kept only when empty and quiet, given the next job's limits, metering counted from each job's
start, removed at the agent's stop and by the sweep when their agent died."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzzball_runtime import (
    Container,
    ContainerSpec,
    Metering,
    cgroups,
    kept,
    release_kept_cgroups,
    sweep,
)
from fuzzball_runtime.state import StateDir

pytestmark = pytest.mark.root

KEY = "workflow-1"
QUIET = Metering(0, 0, 0, 0)


@pytest.fixture
def pool(state_dir: Path) -> Iterator[kept.KeptGroups]:
    """This process's kept groups, emptied after the test (before ``state_dir``'s check)."""
    if cgroups.detect_layout().unified is None:
        pytest.skip("no cgroup v2 hierarchy for metered jobs' groups")
    release_kept_cgroups()
    yield kept.KEPT
    release_kept_cgroups()


def _spec(image: Path, state_dir: Path, command: list[str], **fields: object) -> ContainerSpec:
    spec = ContainerSpec(
        image=image, command=command, metering=True, keep_cgroups=KEY, state_dir=state_dir
    )
    for name, value in fields.items():
        setattr(spec, name, value)
    return spec


def _shape(spec: ContainerSpec) -> kept.Shape:
    shape = kept.shape_of(spec, StateDir(spec.state_dir).cgroup_group)
    assert shape is not None
    return shape


def _run(spec: ContainerSpec) -> tuple[list[str], Metering | None]:
    """Run ``spec`` to its end; returns its groups' directories and its metering."""
    with Container(spec).start() as handle:
        assert handle._cgroups is not None
        directories = list(handle._cgroups.dir_names)
        assert handle.wait(timeout=30).exit_code == 0
        return directories, handle.metering()


def _in_group(directory: str, script: str) -> subprocess.Popen[bytes]:
    """A Python process that moves itself into the group ``directory``, then runs
    ``script``."""
    code = textwrap.dedent(
        f"""
        import os, socket, sys, time
        with open({directory!r} + "/cgroup.procs", "w") as procs:
            procs.write(str(os.getpid()))
        """
    ) + textwrap.dedent(script)
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_kept_groups_next_job_reports_only_its_own_metering(image, state_dir, pool) -> None:
    # the group's counters run on across its jobs: traffic counted in it between two jobs
    # (a process put into it by hand) is neither job's; the second job's figures are zero
    spec = _spec(image, state_dir, ["true"])
    first, _ = _run(spec)
    group = pool.take(_shape(spec))
    assert group is not None and group.job.v2_dir_name is not None
    sender = _in_group(
        group.job.v2_dir_name,
        """
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(5):
            sock.sendto(b"x" * 100, ("127.0.0.1", 9))
        """,
    )
    assert sender.wait(timeout=30) == 0
    assert kept.read_counters(group.meter_fd).egress_packets >= 5
    assert pool.keep(_shape(spec), group, QUIET) is None
    second, metering = _run(spec)
    assert second == first
    assert metering == QUIET


def test_a_group_still_populated_is_not_kept(image, state_dir, pool) -> None:
    spec = _spec(image, state_dir, ["true"])
    _run(spec)
    group = pool.take(_shape(spec))
    assert group is not None and group.job.v2_dir_name is not None
    member = _in_group(group.job.v2_dir_name, "time.sleep(60)")
    try:
        deadline = time.monotonic() + 10
        while "populated 1" not in Path(group.job.v2_dir_name, "cgroup.events").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert pool.keep(_shape(spec), group, QUIET) is group
        assert len(pool) == 0
    finally:
        member.kill()
        member.wait()
        group.remove()


def test_a_kept_group_holds_no_process_of_its_last_job(image, state_dir, pool) -> None:
    # the first job leaves a process behind in the background; PID 1's end takes it (its
    # PID namespace goes), and the group is kept only with no process in any of its dirs
    spec = _spec(image, state_dir, ["sh", "-c", "sleep 1000 & sleep 1000 & true"], pids_limit=64)
    first, _ = _run(spec)
    assert len(pool) == 1
    for directory in first:
        assert Path(directory, "cgroup.procs").read_text() == ""
    probe = _spec(image, state_dir, ["sleep", "30"], pids_limit=64)
    with Container(probe).start() as handle:
        assert handle._cgroups is not None
        assert handle._cgroups.dir_names == first
        members = {
            int(pid)
            for directory in first
            for pid in Path(directory, "cgroup.procs").read_text().split()
        }
        assert members == {handle.pid, *_children(handle.pid)}


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found |= {int(child), *_children(int(child))}
    return found


def test_a_smaller_pids_limit_applies_in_a_kept_group(image, state_dir, pool) -> None:
    first, _ = _run(_spec(image, state_dir, ["true"], pids_limit=512))
    spec = _spec(
        image,
        state_dir,
        ["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 30 & done; wait"],
        pids_limit=4,
    )
    with Container(spec).start() as handle:
        assert handle._cgroups is not None
        assert handle._cgroups.dir_names == first
        pids = next(d for d in first if os.path.exists(f"{d}/pids.max"))
        assert Path(pids, "pids.max").read_text().strip() == "4"
        handle.kill(signal.SIGKILL)
        handle.wait(timeout=30)


def test_a_memory_limited_jobs_groups_are_not_kept(image, state_dir, pool) -> None:
    first, _ = _run(_spec(image, state_dir, ["true"], memory=64 << 20))
    assert len(pool) == 0
    assert not any(os.path.exists(directory) for directory in first)


def test_a_job_with_traffic_leaves_its_groups_removed(image, state_dir, pool) -> None:
    # a socket that carried a packet may outlive its job in the group (a TCP orphan)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def answer() -> None:
        connection, _ = listener.accept()
        connection.recv(16)
        connection.close()

    answering = threading.Thread(target=answer)
    answering.start()
    try:
        spec = _spec(image, state_dir, ["sh", "-c", f"echo hi | nc 127.0.0.1 {port}"])
        first, metering = _run(spec)
    finally:
        answering.join(timeout=30)
        listener.close()
    assert metering is not None and metering.egress_packets > 0
    assert len(pool) == 0
    assert not any(os.path.exists(directory) for directory in first)


def test_release_kept_cgroups_removes_the_pool(image, state_dir, pool) -> None:
    first, _ = _run(_spec(image, state_dir, ["true"]))
    assert len(pool) == 1 and all(os.path.isdir(directory) for directory in first)
    assert sorted(release_kept_cgroups()) == sorted(first)
    assert len(pool) == 0
    assert not any(os.path.exists(directory) for directory in first)


@pytest.fixture
def three_keys(image, state_dir, pool, monkeypatch) -> list[ContainerSpec]:
    """Jobs of three keys, for a pool that holds two groups."""
    monkeypatch.setattr(pool, "limit", 2)
    return [_spec(image, state_dir, ["true"], keep_cgroups=key) for key in "abc"]


def test_a_full_pool_lets_its_least_recently_kept_group_go_for_a_new_one(pool, three_keys) -> None:
    # an agent outlives its first owners: their groups give way to the newest key's
    old, newer, newest = three_keys
    oldest_dirs, _ = _run(old)
    newer_dirs, _ = _run(newer)
    newest_dirs, _ = _run(newest)
    assert len(pool) == 2
    assert not any(os.path.exists(directory) for directory in oldest_dirs)
    assert all(os.path.isdir(directory) for directory in newer_dirs + newest_dirs)
    assert pool.take(_shape(old)) is None
    taken = pool.take(_shape(newest))
    assert taken is not None
    taken.remove()


def test_a_group_taken_and_kept_again_is_the_last_to_go(three_keys) -> None:
    # reuse renews a group: the pool lets the one not asked for go first
    first, second, third = three_keys
    first_dirs, _ = _run(first)
    second_dirs, _ = _run(second)
    assert _run(first)[0] == first_dirs
    _run(third)
    assert not any(os.path.exists(directory) for directory in second_dirs)
    assert all(os.path.isdir(directory) for directory in first_dirs)


def test_the_sweep_leaves_a_live_agents_kept_groups(image, state_dir, pool) -> None:
    first, _ = _run(_spec(image, state_dir, ["true"]))
    sweep(state_dir)
    assert all(os.path.isdir(directory) for directory in first)


AGENT = """
import os, signal, sys
from fuzzball_runtime import Container, ContainerSpec
spec = ContainerSpec(image=sys.argv[1], command=["true"], metering=True, keep_cgroups="w",
                     state_dir=sys.argv[2])
with Container(spec).start() as handle:
    directories = list(handle._cgroups.dir_names)
    handle.wait(timeout=30)
print(" ".join(directories), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_sweep_removes_the_kept_groups_of_a_killed_agent(image, state_dir, pool) -> None:
    agent = subprocess.run(
        [sys.executable, "-c", AGENT, str(image), str(state_dir)], capture_output=True
    )
    assert agent.returncode == -signal.SIGKILL, agent.stderr.decode()
    directories = agent.stdout.decode().split()
    assert directories and all(os.path.isdir(d) for d in directories)
    assert all(Path(d).name.startswith(kept.KEPT_PREFIX) for d in directories)
    report = sweep(state_dir)
    assert set(directories) <= set(report.cgroups)
    assert not any(os.path.exists(d) for d in directories)


def test_a_kept_group_whose_reset_fails_is_removed_for_fresh_groups(image, state_dir, pool) -> None:
    first, _ = _run(_spec(image, state_dir, ["true"], pids_limit=64))
    pids = next(d for d in first if os.path.exists(f"{d}/pids.max"))
    os.rmdir(pids)  # the pids limit can no longer be written
    second, _ = _run(_spec(image, state_dir, ["true"], pids_limit=32))
    assert not set(second) & set(first)
    assert not any(os.path.exists(directory) for directory in first)
