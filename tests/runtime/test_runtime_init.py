"""PID 1 of every container is the small static init (csrc/init.c), executed from a sealed
copy, whatever the agent's size; it finds the command as execvp would."""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

import pytest

from fuzzball_runtime import Bind, Container, ContainerSpec, ContainerStartError
from fuzzball_runtime.native import INIT_PATH

pytestmark = pytest.mark.root


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _sleeper(image: Path, state_dir: Path) -> Container:
    return Container(ContainerSpec(image=image, command=["sleep", "60"], state_dir=state_dir))


def test_pid_1_executes_the_installed_init_binary(image, state_dir) -> None:
    with _sleeper(image, state_dir).start() as handle:
        exe = Path(f"/proc/{handle.pid}/exe")
        assert os.readlink(exe).startswith("/memfd:fbrt-init")
        assert exe.read_bytes() == INIT_PATH.read_bytes()


def test_pid_1_stays_tiny_however_large_the_agent_is(image, state_dir) -> None:
    heap = bytearray(128 << 20)
    heap[:: 1 << 12] = b"\1" * len(heap[:: 1 << 12])  # touch every page: all resident
    assert _status_kib(os.getpid(), "VmRSS") > 128 * 1024
    with _sleeper(image, state_dir).start() as handle:
        # A clone of the agent would start with the agent's whole resident set.
        assert _status_kib(handle.pid, "VmRSS") < 2 * 1024
    del heap


def test_the_init_cannot_be_changed_from_inside_a_container(run) -> None:
    before = INIT_PATH.read_bytes()
    status, output = run("echo x > /proc/1/exe && echo changed || echo refused")
    assert (status.exit_code, output.split()[-1]) == (0, "refused")
    assert INIT_PATH.read_bytes() == before


def test_an_empty_path_element_is_the_working_directory(run) -> None:
    status, output = run(
        "", command=["busybox", "echo", "found"], cwd="/bin", env={"PATH": "/nowhere:"}
    )
    assert (status.exit_code, output) == (0, "found\n")


def test_a_writable_layer_path_too_long_to_build_is_refused_naming_it(
    image, state_dir, tmp_path
) -> None:
    # Just under the kernel's PATH_MAX, so the directory exists but "<it>/upper" cannot fit.
    scratch = tmp_path
    while len(str(scratch)) < 4096 - 260:
        scratch = scratch / ("d" * 200)
    scratch = scratch / ("d" * (4090 - len(str(scratch)) - 1))
    spec = ContainerSpec(image=image, command=["true"], scratch_dir=scratch, state_dir=state_dir)
    with pytest.raises(ContainerStartError) as caught:
        Container(spec).start()
    assert caught.value.errno == errno.ENAMETOOLONG
    assert "directory upper in /" in str(caught.value)


def test_a_signal_the_agent_ignores_has_its_default_action_in_the_command(run) -> None:
    # Python ignores SIGPIPE, and ignored signals survive exec: PID 1 (which runs without
    # the C library, on raw system calls) must put it back to the default for the command.
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
    status, _ = run("kill -PIPE $$; echo survived")
    assert status.signal == signal.SIGPIPE


def test_a_real_time_signal_the_agent_ignores_has_its_default_action_in_the_command(
    run,
) -> None:
    # Ignored signals come back from the agent's SigIgn, all 64 of them, not only 1-31.
    sig = signal.SIGRTMIN + 5
    previous = signal.signal(sig, signal.SIG_IGN)
    try:
        status, _ = run(f"kill -{int(sig)} $$; echo survived")
    finally:
        signal.signal(sig, previous)
    assert status.signal == sig


def test_a_failure_in_pid_1_is_reported_with_the_errors_description(
    image, state_dir, tmp_path
) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    spec = ContainerSpec(
        image=image,
        command=["true"],
        uid=65534,
        gid=65534,
        cwd="/private",
        binds=[Bind(str(private), "/private")],
        state_dir=state_dir,
    )
    with pytest.raises(ContainerStartError) as caught:
        Container(spec).start()
    assert "chdir /private (working directory, as uid 65534): Permission denied" in str(
        caught.value
    )
    assert caught.value.errno == errno.EACCES


def _cpu_lists(output: str) -> dict[str, set[int]]:
    """``{file: cpus}`` from grep's ``FILE:Cpus_allowed_list:\tLIST`` lines."""
    found: dict[str, set[int]] = {}
    for line in output.splitlines():
        path, _, cpu_list = line.split(":", 2)
        cpus: set[int] = set()
        for part in cpu_list.strip().split(","):
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
        found[path] = cpus
    return found


def _affinities_inside(run) -> dict[str, set[int]]:
    status, output = run("grep Cpus_allowed_list /proc/1/status /proc/self/status")
    assert status.exit_code == 0, output
    return _cpu_lists(output)


def test_pid_1_and_the_command_run_with_the_starting_threads_cpu_affinity(run) -> None:
    # the start itself is pinned to the thread's CPU: both take the whole affinity back
    mine = os.sched_getaffinity(0)
    assert _affinities_inside(run) == {"/proc/1/status": mine, "/proc/self/status": mine}


def test_a_thread_restricted_to_some_cpus_starts_containers_restricted_to_them(run) -> None:
    mine = os.sched_getaffinity(0)
    some = set(sorted(mine)[-2:]) if len(mine) > 2 else {max(mine)}
    os.sched_setaffinity(0, some)
    try:
        inside = _affinities_inside(run)
    finally:
        os.sched_setaffinity(0, mine)
    assert inside == {"/proc/1/status": some, "/proc/self/status": some}


def test_pid_1_holds_no_standard_descriptor_while_the_command_runs(run) -> None:
    # The job's pipes end with the command's processes: PID 1 keeps none of 0..2.
    status, output = run("ls /proc/1/fd")
    assert status.exit_code == 0
    assert not {"0", "1", "2"} & set(output.split())


def test_the_command_holds_only_its_standard_descriptors(run) -> None:
    # PID 1's error, status and lifeline pipes and its signalfd are not inherited.
    # Two commands, so that the shell forks ls instead of becoming it: $$ is the shell.
    status, output = run("ls /proc/$$/fd; true")
    assert (status.exit_code, sorted(output.split())) == (0, ["0", "1", "2"])
