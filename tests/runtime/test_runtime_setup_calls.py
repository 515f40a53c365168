"""A container's set-up leaves out the system calls it can do without: each one costs about
half a microsecond on a virtual machine with the SRSO and TSA mitigations, and the runtime
makes them for every job. Traced with strace, which sees the set-up child, PID 1 and the
command as processes of their own."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

_START = """
import os, sys
from pathlib import Path
from fuzzball_runtime import Container, ContainerSpec
# As in an agent, whose descriptors are many: the container's pipes come above 0..7.
held = [os.open("/dev/null", os.O_RDONLY) for _ in range(8)]
spec = ContainerSpec(image=Path(sys.argv[1]), command=["true"], state_dir=Path(sys.argv[2]))
with Container(spec).start() as handle:
    assert handle.wait(timeout=30).exit_code == 0
"""


class Traced:
    """The traced calls of one container's processes, from ``strace -ff`` files."""

    def __init__(self, directory: Path) -> None:
        texts = [path.read_text() for path in directory.iterdir()]
        # The set-up child executes the init from its memfd; PID 1 goes on in the same file.
        child = next(text for text in texts if "execveat(" in text)
        self.setup, _, self.pid_1 = child.partition("execveat(")
        self.command = next(text for text in texts if 'execve("/bin/true"' in text)


def _default_dispositions() -> None:
    """Every signal at its default in the traced process before Python sets its own: one
    started by ``nohup`` or as a background job inherits SIGHUP, SIGINT and SIGQUIT ignored,
    and those too would (rightly) be put back."""
    for number in signal.valid_signals():
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)


@pytest.fixture
def traced(image: Path, state_dir: Path, tmp_path: Path) -> Traced:
    """One ``true`` container started and waited for under ``strace -ff``."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    out = tmp_path / "trace"
    out.mkdir()
    strace = ["strace", "-ff", "-qq", "-o", str(out / "t")]
    calls = "trace=fcntl,openat,openat2,chdir,execve,execveat,rt_sigaction"
    subprocess.run(
        [*strace, "-e", calls, sys.executable, "-c", _START, str(image), str(state_dir)],
        check=True,
        env=os.environ,
        timeout=60,
        preexec_fn=_default_dispositions,
    )
    return Traced(out)


def test_the_set_up_places_the_agents_descriptors_without_parking_them(traced) -> None:
    # The agent's pipes sit above the numbers placed (0..7): dup3 puts each on its number
    # directly, close-on-exec in the same call where only the set-up uses it.
    assert "F_DUPFD" not in traced.setup
    assert "F_SETFD" not in traced.setup


def test_pid_1_marks_no_descriptor_close_on_exec_one_by_one(traced) -> None:
    # The command marks what it must not inherit in one close_range of its own.
    assert "F_SETFD" not in traced.pid_1


def test_a_container_working_in_the_root_walks_no_path_for_it(traced) -> None:
    assert 'openat2(10, ".",' not in traced.setup
    assert 'chdir("/")' not in traced.command


def test_dev_pts_is_mounted_from_devs_own_descriptor(traced) -> None:
    assert '"dev/pts"' not in traced.setup


def test_only_the_signals_the_agent_ignores_are_put_back_to_their_default(traced) -> None:
    # Python ignores SIGPIPE and SIGXFSZ; the exec puts the handled ones back by itself.
    reset = re.findall(r"rt_sigaction\((SIG\w+), \{sa_handler=SIG_DFL", traced.setup)
    assert sorted(reset) == ["SIGPIPE", "SIGXFSZ"]
    assert "rt_sigaction" not in traced.pid_1
