"""The agent's own system calls per container start, left out where they bought nothing:
each costs about half a microsecond on a virtual machine with the SRSO and TSA
mitigations, and, made by one of the agent's start threads, a hand-off of the GIL to the
others. Traced with strace in the process that starts the container (its threads only)."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzball_runtime import PIPE, Container, ContainerSpec
from fuzzball_runtime.cgroups import CgroupJoin

pytestmark = pytest.mark.root

_START = """
import sys
from pathlib import Path
from fuzzball_runtime import PIPE, Container, ContainerSpec
def spec():
    return ContainerSpec(image=Path(sys.argv[1]), command=["true"], state_dir=Path(sys.argv[2]),
                         stdout=PIPE, stderr=PIPE, metering=True)
# the first start makes the per-process state (init memfd, template, programs): traced is
# the second, with the marker between them
with Container(spec()).start() as handle:
    handle.wait(timeout=30)
try:
    open("/fuzzball-second-start-marker")
except OSError:
    pass
with Container(spec()).start() as handle:
    assert handle.wait(timeout=30).exit_code == 0
"""


@pytest.fixture
def agent_calls(image: Path, state_dir: Path, tmp_path: Path) -> str:
    """The calls of the starting process (not its containers') for the second start."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    out = tmp_path / "trace"
    out.mkdir()
    strace = ["strace", "-ff", "-qq", "-o", str(out / "t")]
    subprocess.run(
        [*strace, sys.executable, "-c", _START, str(image), str(state_dir)],
        check=True,
        env=os.environ,
        timeout=60,
    )
    agent = next(
        text
        for text in (path.read_text() for path in out.iterdir())
        if "fuzzball-second-start-marker" in text
    )
    return agent.partition("fuzzball-second-start-marker")[2]


def test_the_job_cgroup_is_opened_once_for_metering_and_the_join(agent_calls: str) -> None:
    # metering's descriptor of the v2 group is the one the child is cloned into
    group_opens = re.findall(r'openat\(AT_FDCWD, "[^"]*/fuzzball-runtime-\w+/\w+", ', agent_calls)
    assert len(group_opens) == 1


def test_the_output_pipes_are_opened_without_a_tty_check_or_a_seek(agent_calls: str) -> None:
    assert "TCGETS" not in agent_calls
    assert "lseek(" not in agent_calls


def test_a_container_id_is_drawn_without_a_system_call(agent_calls: str) -> None:
    assert "getrandom(" not in agent_calls


def test_a_piped_stream_is_a_raw_binary_file_that_reads_lines_and_the_rest(
    image: Path, state_dir: Path
) -> None:
    spec = ContainerSpec(
        image=image,
        command=["sh", "-c", "echo one; echo two; echo three"],
        state_dir=state_dir,
        stdout=PIPE,
    )
    with Container(spec).start() as handle:
        assert isinstance(handle.stdout, io.FileIO)
        assert handle.stdout.readline() == b"one\n"
        assert handle.stdout.read() == b"two\nthree\n"
        assert handle.wait(timeout=30).exit_code == 0


def test_a_metered_job_is_cloned_into_its_own_v2_group(image: Path, state_dir: Path) -> None:
    # joined by metering's descriptor: the group the child lands in is still the job's own
    spec = ContainerSpec(
        image=image,
        command=["cat", "/proc/self/cgroup"],
        state_dir=state_dir,
        stdout=PIPE,
        metering=True,
    )
    with Container(spec).start() as handle:
        assert handle.metering_enabled
        assert handle.stdout is not None
        lines = handle.stdout.read().decode().splitlines()
        assert handle.wait(timeout=30).exit_code == 0
    v2 = next(line for line in lines if line.startswith("0::"))
    assert v2.endswith(f"/{handle.id}")


def test_a_join_by_another_owners_descriptor_leaves_it_open(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        CgroupJoin([], fd, owns_v2=False).close()
        os.fstat(fd)  # still open: raises EBADF otherwise
    finally:
        os.close(fd)
