"""A process holds one reference on an image mount for all its containers; the sweep drops
the reference of a process that died and keeps a live one's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzball_runtime import Container, ContainerSpec, sweep
from fuzzball_runtime.state import StateDir, holder_process, process_start_time

pytestmark = pytest.mark.root


def _mounted_keys(state: StateDir) -> list[str]:
    return [key for key in state.image_keys() if os.path.ismount(state.images / key)]


def test_containers_of_one_process_share_one_reference_on_their_image(
    image: Path, state_dir: Path
) -> None:
    state = StateDir(state_dir)
    spec = ContainerSpec(image=image, command=["sleep", "30"], state_dir=state_dir)
    handles = [Container(spec).start() for _ in range(3)]
    try:
        (key,) = _mounted_keys(state)
        (holder,) = state.image_refs(key)
        assert holder_process(holder) == (os.getpid(), process_start_time(os.getpid()))
        handles.pop().close()
        handles.pop().close()
        assert state.image_refs(key) == [holder]
        assert _mounted_keys(state) == [key]
    finally:
        for handle in handles:
            handle.close()
    assert state.image_refs(key) == []
    assert _mounted_keys(state) == []


def test_a_forked_child_holds_its_own_reference_and_leaves_its_parents(
    image: Path, state_dir: Path
) -> None:
    state = StateDir(state_dir)
    spec = ContainerSpec(image=image, command=["sleep", "30"], state_dir=state_dir)
    with Container(spec).start():
        (key,) = _mounted_keys(state)
        parents = state.image_refs(key)
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's exit status is the check
            ok = False
            try:
                child_spec = ContainerSpec(image=image, command=["true"], state_dir=state_dir)
                with Container(child_spec).start() as handle:
                    ok = len(state.image_refs(key)) == 2
                    ok = handle.wait(timeout=30).exit_code == 0 and ok
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert state.image_refs(key) == parents
        assert _mounted_keys(state) == [key]
    assert _mounted_keys(state) == []


def test_sweep_drops_a_dead_processes_reference_and_keeps_a_live_ones(
    image: Path, state_dir: Path
) -> None:
    state = StateDir(state_dir)
    gone = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    gone_start = process_start_time(gone.pid)
    assert gone.stdin is not None
    gone.stdin.close()
    gone.wait()
    me = f"process-{os.getpid()}-{process_start_time(os.getpid())}-999"
    key, _ = state.acquire_image(image, f"process-{gone.pid}-{gone_start}-0")
    state.acquire_image(image, me)
    try:
        report = sweep(state_dir)
        assert report.unmounted == []
        assert state.image_refs(key) == [me]
    finally:
        state.release_image(key, me)
    assert _mounted_keys(state) == []


def test_holder_names_that_are_not_a_processes_reference_name_no_process() -> None:
    assert holder_process("process-12-345-0") == (12, 345)
    for holder in ("0123456789abcdef", "agent-hold", "process-12-345", "process-a-1-0"):
        assert holder_process(holder) is None
