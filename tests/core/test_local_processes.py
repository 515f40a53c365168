"""``fuzzball local``: a pid file names a running process of ours only when /proc agrees.

The real commands start Orchestrate and Substrate (tests/e2e/test_local_deployment.py runs
them); here the deployment's command is a sleeping Python, so a test can make it a zombie or
put a stranger's pid in its pid file within milliseconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzzball_core.cli import detached_processes, local
from fuzzball_core.cli.local import Deployment


class SleepingDeployment(Deployment):
    """A deployment whose every process is ``python -c <sleep> --config FILE``."""

    def argv(self, process: str) -> list[str]:
        code = "import time; time.sleep(60)"
        return [sys.executable, "-c", code, "--config", str(self.config_file), process]


@pytest.fixture
def deployment(tmp_path: Path) -> SleepingDeployment:
    return SleepingDeployment(tmp_path)


@pytest.fixture
def started(deployment: SleepingDeployment) -> Iterator[subprocess.Popen[bytes]]:
    """The deployment's ``orchestrate``, started the way ``local up`` starts it."""
    child = local._start(deployment, "orchestrate")
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def _zombie(child: subprocess.Popen[bytes]) -> None:
    """Kill ``child`` and leave it unreaped: a zombie, as after a crash nobody has waited on."""
    os.kill(child.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while detached_processes.process_state(child.pid) != "Z":
        assert time.monotonic() < deadline, "the killed child never became a zombie"
        time.sleep(0.01)


def test_a_live_process_started_by_the_deployment_is_running(deployment, started):
    assert deployment.pid("orchestrate") == started.pid


def test_a_zombie_is_not_running(deployment, started):
    _zombie(started)
    assert deployment.pid("orchestrate") is None


def test_a_strangers_process_under_a_recorded_pid_is_not_running(deployment):
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deployment.pid_file("orchestrate").write_text(f"{stranger.pid}\n")
        assert deployment.pid("orchestrate") is None
    finally:
        stranger.kill()
        stranger.wait()


def test_another_deployments_process_is_not_running(deployment, started, tmp_path):
    other = SleepingDeployment(tmp_path / "other")
    other.directory.mkdir()
    other.pid_file("orchestrate").write_text(f"{started.pid}\n")
    assert other.pid("orchestrate") is None


def test_a_pid_nobody_has_is_not_running(deployment):
    deployment.pid_file("orchestrate").write_text(f"{2**22 + 1}\n")  # above pid_max's ceiling
    assert deployment.pid("orchestrate") is None


def test_down_leaves_a_stranger_alone_and_forgets_its_pid(deployment, monkeypatch):
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deployment.pid_file("substrate").write_text(f"{stranger.pid}\n")
        monkeypatch.setattr(local, "deployment_for", lambda _config: deployment)
        monkeypatch.setattr(local, "load_config", lambda _path: None)
        assert local.down(None) == []
        assert stranger.poll() is None
        assert not deployment.pid_file("substrate").exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_a_start_returns_only_once_proc_shows_the_new_command(deployment, monkeypatch):
    # the kernel sets a new program's command line a moment after the exec that lets Popen
    # return; here that moment lasts five reads, as it can on a loaded machine
    reads = {"left": 5}
    real = detached_processes.command_line

    def not_yet_set(pid: int) -> list[str] | None:
        if reads["left"]:
            reads["left"] -= 1
            return []
        return real(pid)

    monkeypatch.setattr(detached_processes, "command_line", not_yet_set)
    child = local._start(deployment, "orchestrate")
    try:
        assert deployment.pid("orchestrate") == child.pid
    finally:
        child.kill()
        child.wait()
