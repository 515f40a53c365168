"""Container records: one journal per process, read by the sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from fuzzball_runtime import Container, ContainerSpec, sweep
from fuzzball_runtime.state import ContainerRecord, StateDir, current_pid, process_start_time

pytestmark = pytest.mark.root


def _record(container_id: str, **fields: object) -> ContainerRecord:
    values: dict[str, object] = {
        "id": container_id,
        "pid": 1,
        "pid_start": 1,
        "agent_pid": 1,
        "agent_start": 1,
        "image_key": "k",
    }
    values.update(fields)
    return ContainerRecord(**values)  # type: ignore[arg-type]


def _dead_process() -> tuple[int, int]:
    """(pid, start time) of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE)
    start = process_start_time(child.pid)
    assert start is not None
    child.communicate(b"\n")
    return child.pid, start


def test_a_running_container_is_recorded_until_it_ends(image: Path, state_dir: Path) -> None:
    state = StateDir(state_dir)
    spec = ContainerSpec(image=image, command=["sleep", "30"], state_dir=state_dir)
    with Container(spec).start() as handle:
        (record,) = state.records()
        assert (record.id, record.pid, record.agent_pid) == (handle.id, handle.pid, os.getpid())
        assert record.pid_start == process_start_time(handle.pid)
    assert state.records() == []


def test_a_forked_childs_records_name_the_child_and_its_start_time(
    image: Path, state_dir: Path
) -> None:
    state = StateDir(state_dir)
    spec = ContainerSpec(image=image, command=["sleep", "30"], state_dir=state_dir)
    with Container(spec).start():  # the parent's identity is known before the fork
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's exit status is the check
            ok = False
            try:
                with Container(spec).start() as handle:
                    mine = [r for r in state.records() if r.id == handle.id]
                    me = (os.getpid(), process_start_time(os.getpid()))
                    ok = [(r.agent_pid, r.agent_start) for r in mine] == [me]
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0


def test_current_pid_is_a_forked_childs_own() -> None:
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's exit status is the check
        os._exit(0 if current_pid() == os.getpid() else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert current_pid() == os.getpid()


def test_a_journal_leaves_ended_records_and_a_torn_last_line_out(state_dir: Path) -> None:
    lines = [
        b"+" + json.dumps(asdict(_record("a"))).encode(),
        b"+" + json.dumps(asdict(_record("b"))).encode(),
        b"-a",
        b"+" + json.dumps(asdict(_record("c")))[:20].encode(),  # the writer died here
    ]
    journal = Path(state_dir) / "containers" / "process-1-1-0.records"
    journal.write_bytes(b"\n".join(lines))
    try:
        assert [r.id for r in StateDir(state_dir).records()] == ["b"]
    finally:
        journal.unlink()


def test_a_journal_is_rewritten_with_its_live_records_once_ended_ones_pile_up(
    state_dir: Path,
) -> None:
    state = StateDir(state_dir).ensure()
    state.JOURNAL_SLACK = 8
    containers = Path(state_dir) / "containers"
    before = set(containers.glob("*.records"))
    state.write_record(_record("kept"))
    (journal,) = set(containers.glob("*.records")) - before
    for n in range(40):
        state.write_record(_record(f"gone{n}"))
        state.remove_record(f"gone{n}")
    try:
        assert len(journal.read_bytes().splitlines()) <= 8 + 3
        assert "kept" in [r.id for r in state.records()]
        assert [r.id for r in state._journal_records(journal.read_bytes())] == ["kept"]
    finally:
        state.remove_record("kept")
        journal.unlink()


def _journals_left_by_a_process_that(state_dir: Path, ends: bool) -> set[Path]:
    """The journals a process leaves that records a container and exits normally, having
    recorded its end when ``ends``."""
    containers = Path(state_dir) / "containers"
    before = set(containers.glob("*.records"))
    code = (
        "import sys\n"
        "from fuzzball_runtime.state import ContainerRecord, StateDir\n"
        "state = StateDir(sys.argv[1]).ensure()\n"
        "state.write_record(ContainerRecord('c1', 1, 1, 1, 1, 'k'))\n"
        "if sys.argv[2] == 'ends':\n"
        "    state.remove_record('c1')\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(state_dir), "ends" if ends else "runs"], check=True
    )
    return set(containers.glob("*.records")) - before


def test_a_process_whose_containers_all_ended_deletes_its_journal_at_exit(
    state_dir: Path,
) -> None:
    assert _journals_left_by_a_process_that(state_dir, ends=True) == set()


def test_a_process_exiting_with_a_container_recorded_leaves_its_journal_for_the_sweep(
    state_dir: Path,
) -> None:
    (journal,) = _journals_left_by_a_process_that(state_dir, ends=False)
    try:
        assert [r.id for r in StateDir(state_dir)._journal_records(journal.read_bytes())] == ["c1"]
    finally:
        journal.unlink()


def test_sweep_frees_a_dead_processes_records_and_deletes_its_journal(
    image: Path, state_dir: Path
) -> None:
    state = StateDir(state_dir).ensure()
    key, _ = state.acquire_image(image, "test-holder")
    agent_pid, agent_start = _dead_process()
    pid, pid_start = _dead_process()
    record = _record(
        "0123456789abcdef",
        pid=pid,
        pid_start=pid_start,
        agent_pid=agent_pid,
        agent_start=agent_start,
        image_key=key,
    )
    journal = Path(state_dir) / "containers" / f"process-{agent_pid}-{agent_start}-0.records"
    journal.write_bytes(b"+" + json.dumps(asdict(record)).encode() + b"\n")
    try:
        report = sweep(state_dir)
        assert report.records == [record.id]
        assert not journal.exists()
    finally:
        state.release_image(key, "test-holder")


def test_each_record_names_its_containers_start_time_as_proc_gives_it(
    image: Path, state_dir: Path
) -> None:
    state = StateDir(state_dir)
    spec = ContainerSpec(image=image, command=["sleep", "30"], state_dir=state_dir)
    for _ in range(40):
        with Container(spec).start() as handle:
            (record,) = (r for r in state.records() if r.id == handle.id)
            assert record.pid_start == process_start_time(handle.pid)
