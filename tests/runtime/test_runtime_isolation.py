"""Containers are isolated, report their exit exactly, and leave nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fuzzball_core.errors import InvalidArgument, NotFound
from fuzzball_runtime import (
    PIPE,
    Bind,
    Container,
    ContainerSpec,
    ContainerStartError,
    sweep,
)
from fuzzball_runtime.state import StateDir, holder_process, is_alive, process_start_time

pytestmark = pytest.mark.root


def test_command_runs_as_child_of_the_runtime_init(run) -> None:
    status, output = run("echo $$ $PPID; cat /proc/1/comm")
    assert status.exit_code == 0
    assert output.split() == ["2", "1", "fbrt-init"]


def test_empty_arguments_reach_the_command(run) -> None:
    status, output = run('echo "[$1]" "$#"', command=["sh", "-c", 'echo "[$1]" "$#"', "sh", ""])
    assert (status.exit_code, output) == (0, "[] 1\n")


def test_an_empty_program_name_is_refused_naming_it(image, state_dir) -> None:
    spec = ContainerSpec(image=image, command=["", "x"], state_dir=state_dir)
    with pytest.raises(InvalidArgument, match=r"spec.command\[0\]"):
        Container(spec).start()


def test_container_sees_its_own_hostname(run) -> None:
    status, output = run("hostname", hostname="job-42")
    assert (status.exit_code, output.strip()) == (0, "job-42")
    assert os.uname().nodename != "job-42"


def test_sysfs_is_mounted_read_only(run) -> None:
    status, output = run("ls /sys/class/net; touch /sys/x 2>/dev/null || echo read-only")
    assert status.exit_code == 0
    assert output.split() == [*sorted(os.listdir("/sys/class/net")), "read-only"]


def test_container_mounts_are_invisible_on_the_host(image, state_dir) -> None:
    spec = ContainerSpec(
        image=image,
        command=["sh", "-c", "mkdir /mnt && mount -t tmpfs scratch /mnt && echo ready && sleep 30"],
        stdout=PIPE,
        state_dir=state_dir,
        capabilities=None,  # every one: only a container that may mount can try to leak one
    )
    with Container(spec).start() as handle:
        assert handle.stdout is not None
        assert handle.stdout.readline() == b"ready\n"
        host_mounts = Path("/proc/self/mountinfo").read_text()
        # Only the shared image mount is on the host; the container's tmpfs, overlay, proc
        # and its own mounts live in its mount namespace.
        ours = [line for line in host_mounts.splitlines() if str(state_dir) in line]
        assert len(ours) == 1 and " - erofs " in ours[0]
        assert " scratch " not in host_mounts


def test_lower_layer_is_read_only_and_upper_writable(run, image, state_dir) -> None:
    status, output = run("echo changed > /bin/new-file && cat /bin/new-file && rm /bin/busybox")
    assert status.exit_code == 0
    assert output == "changed\n"
    # The writes went to the container's own upper layer: the next container sees none.
    status, output = run("ls /bin/new-file 2>&1; ls /bin/busybox")
    assert "No such file" in output
    assert "/bin/busybox" in output
    with Container(
        ContainerSpec(image=image, command=["sleep", "30"], state_dir=state_dir)
    ).start() as handle:
        key = StateDir.image_key(image)
        lower = Path(state_dir) / "images" / key
        with pytest.raises(OSError) as caught:
            (lower / "bin" / "intruder").write_text("x")
        assert caught.value.errno == 30  # EROFS: the shared image mount is read-only
        handle.kill(signal.SIGKILL)


def test_exit_code_reaches_the_caller(run) -> None:
    status, _ = run("exit 42")
    assert (status.exit_code, status.signal) == (42, None)


def test_terminating_signal_reaches_the_caller(run) -> None:
    status, _ = run("kill -SEGV $$")
    assert (status.exit_code, status.signal) == (None, signal.SIGSEGV)
    assert status.returncode == 128 + signal.SIGSEGV


def test_kill_is_forwarded_to_the_command(image, state_dir) -> None:
    spec = ContainerSpec(
        image=image,
        command=["sh", "-c", "trap 'echo got-term; exit 7' TERM; echo ready; sleep 30 & wait"],
        stdout=PIPE,
        state_dir=state_dir,
    )
    with Container(spec).start() as handle:
        assert handle.stdout is not None
        assert handle.stdout.readline() == b"ready\n"
        handle.kill(signal.SIGTERM)
        status = handle.wait(timeout=10)
        assert handle.stdout.read() == b"got-term\n"
    assert status.exit_code == 7


def test_init_reaps_orphans(run) -> None:
    script = "sh -c 'sleep 0.1 &'; sleep 0.5; cat /proc/[0-9]*/stat"
    status, output = run(script)
    states = [line.rsplit(")", 1)[1].split()[0] for line in output.splitlines()]
    assert status.exit_code == 0
    assert "Z" not in states


def test_uid_gid_and_supplementary_groups_are_applied(run) -> None:
    _, output = run("id", uid=1000, gid=1001, groups=[10, 20])
    assert output.strip() == "uid=1000 gid=1001 groups=10,20"


def test_environment_and_working_directory_are_applied(run) -> None:
    _, output = run('echo "$GREETING"; pwd', env={"GREETING": "hello"}, cwd="/tmp")
    assert output == "hello\n/tmp\n"


def test_etc_hosts_names_the_container(run) -> None:
    _, output = run(
        "cat /etc/hosts /etc/resolv.conf", hostname="box", resolv_conf="nameserver 10.9.9.9\n"
    )
    assert "127.0.1.1\tbox" in output
    assert "nameserver 10.9.9.9" in output


def test_bind_mount_shows_host_files_and_read_only_binds_refuse_writes(run, tmp_path) -> None:
    (tmp_path / "data.txt").write_text("from the host\n")
    status, output = run(
        "cat /data/data.txt; echo x > /data/new 2>/dev/null || echo refused",
        binds=[Bind(str(tmp_path), "/data", readonly=True)],
    )
    assert output == "from the host\nrefused\n"
    status, _ = run("echo written > /data/new", binds=[Bind(str(tmp_path), "/data")])
    assert status.exit_code == 0
    assert (tmp_path / "new").read_text() == "written\n"


def test_given_device_nodes_appear_in_dev(run) -> None:
    _, output = run("ls /dev", devices=["/dev/fuse"])
    names = output.split()
    assert "fuse" in names and "null" in names
    assert "kvm" not in names


def test_stdout_to_a_file(image, state_dir, tmp_path) -> None:
    out = tmp_path / "out.log"
    spec = ContainerSpec(
        image=image, command=["echo", "logged"], stdout=str(out), state_dir=state_dir
    )
    with Container(spec).start() as handle:
        handle.wait(timeout=10)
    assert out.read_text() == "logged\n"


def test_missing_command_fails_loudly_and_releases_everything(image, state_dir) -> None:
    spec = ContainerSpec(image=image, command=["/no/such/program"], state_dir=state_dir)
    with pytest.raises(ContainerStartError) as caught:
        Container(spec).start()
    assert "exec /no/such/program: No such file or directory" in str(caught.value)
    assert caught.value.errno == 2


def test_a_command_missing_from_path_fails_naming_the_path_searched(image, state_dir) -> None:
    # the search runs in the command's process before its exec (init_exec.c), on the stack
    # PID 1 starts it on
    spec = ContainerSpec(
        image=image,
        command=["no-such-program"],
        env={"PATH": "/nowhere:/bin"},
        state_dir=state_dir,
    )
    with pytest.raises(ContainerStartError) as caught:
        Container(spec).start()
    assert "exec no-such-program (searched PATH=/nowhere:/bin)" in str(caught.value)
    assert caught.value.errno == 2


def test_nothing_is_left_after_the_container_ends(image, state_dir, find_leftovers) -> None:
    spec = ContainerSpec(
        image=image,
        command=["true"],
        memory=6 << 20,
        pids_limit=50,
        metering=True,
        state_dir=state_dir,
    )
    with Container(spec).start() as handle:
        assert find_leftovers(state_dir, image, timeout=0) != []
        handle.wait(timeout=10)
    assert find_leftovers(state_dir, image) == []
    # No record names the container; what stays is this process's journal, no other file.
    assert StateDir(state_dir).records() == []
    me = (os.getpid(), process_start_time(os.getpid()))
    for path in (Path(state_dir) / "containers").iterdir():
        assert path.suffix == ".records" and holder_process(path.stem) == me, path


AGENT = textwrap.dedent(
    """
    import sys
    from fuzzball_runtime import Container, ContainerSpec
    spec = ContainerSpec(image=sys.argv[1], command=["sleep", "60"], state_dir=sys.argv[2],
                         memory=32 << 20, metering=True)
    handle = Container(spec).start()
    print(handle.pid, flush=True)
    sys.stdin.read()
    """
)


def test_container_ends_with_its_killed_agent_and_sweep_frees_the_rest(
    image, state_dir, find_leftovers
) -> None:
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(image), str(state_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert agent.stdout is not None
    init_pid = int(agent.stdout.readline())
    assert Path(f"/proc/{init_pid}").exists()
    agent.kill()
    agent.wait()
    # PID 1 sees its agent's lifeline close and takes the job down with it...
    deadline = time.monotonic() + 30
    while Path(f"/proc/{init_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not Path(f"/proc/{init_pid}").exists()
    # ...but its cgroups, image mount and record stay until the sweep.
    assert find_leftovers(state_dir, image, timeout=0) != []
    report = sweep(state_dir)
    assert len(report.records) == 1
    assert find_leftovers(state_dir, image) == []


FORKING_AGENT = textwrap.dedent(
    """
    import os, sys, time
    from fuzzball_runtime import Container, ContainerSpec
    spec = ContainerSpec(image=sys.argv[1], command=["sleep", "60"], state_dir=sys.argv[2],
                         memory=32 << 20)
    handle = Container(spec).start()
    helper = os.fork()  # inherits the lifeline's write end and keeps it open
    if helper == 0:
        time.sleep(60)
        os._exit(0)
    print(handle.pid, helper, flush=True)
    sys.stdin.read()
    """
)


def test_sweep_kills_a_container_that_outlived_its_agent(image, state_dir, find_leftovers) -> None:
    agent = subprocess.Popen(
        [sys.executable, "-c", FORKING_AGENT, str(image), str(state_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert agent.stdout is not None
    init_pid, helper_pid = (int(n) for n in agent.stdout.readline().split())
    start = process_start_time(init_pid)
    try:
        agent.kill()
        agent.wait()
        time.sleep(0.1)
        assert Path(f"/proc/{init_pid}").exists()
        report = sweep(state_dir)
        assert init_pid in report.killed
        assert not is_alive(init_pid, start)
        assert find_leftovers(state_dir, image) == []
    finally:
        os.kill(helper_pid, signal.SIGKILL)


def test_sweep_leaves_containers_of_a_live_agent_alone(image, state_dir) -> None:
    spec = ContainerSpec(image=image, command=["sleep", "30"], state_dir=state_dir)
    with Container(spec).start() as handle:
        report = sweep(state_dir)
        assert report.killed == []
        assert handle.poll() is None


def test_a_bad_spec_is_rejected_naming_the_field(image, state_dir) -> None:
    with pytest.raises(InvalidArgument, match=r"spec\.memory"):
        Container(
            ContainerSpec(image=image, command=["true"], memory=-1, state_dir=state_dir)
        ).start()
    with pytest.raises(NotFound, match=r"spec\.image"):
        Container(
            ContainerSpec(image="/nonexistent.erofs", command=["true"], state_dir=state_dir)
        ).start()


def test_writable_layer_can_live_in_a_scratch_directory(run, tmp_path) -> None:
    status, _ = run("echo kept > /result", scratch_dir=str(tmp_path / "scratch"))
    assert status.exit_code == 0
    assert (tmp_path / "scratch" / "upper" / "result").read_text() == "kept\n"


def _image_mounts(state_dir: Path) -> list[str]:
    mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
    return [line for line in mountinfo if str(state_dir) in line and " - erofs " in line]


def test_containers_of_one_image_share_a_single_mount(image, state_dir) -> None:
    spec = ContainerSpec(image=image, command=["sleep", "30"], state_dir=state_dir)
    first = Container(spec).start()
    second = Container(spec).start()
    try:
        assert len(_image_mounts(state_dir)) == 1
        first.close()
        assert len(_image_mounts(state_dir)) == 1  # still used by the second
    finally:
        first.close()
        second.close()
    assert _image_mounts(state_dir) == []


def test_containers_start_concurrently_from_threads(image, state_dir) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def run_one(n: int) -> tuple[int | None, bytes]:
        spec = ContainerSpec(
            image=image, command=["echo", str(n)], stdout=PIPE, state_dir=state_dir
        )
        with Container(spec).start() as handle:
            assert handle.stdout is not None
            output = handle.stdout.read()
            return handle.wait(timeout=30).exit_code, output

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(run_one, range(16)))
    assert results == [(0, f"{n}\n".encode()) for n in range(16)]
