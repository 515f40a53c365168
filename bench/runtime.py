"""Benchmark of the node runtime against bubblewrap and runc on the same busybox rootfs.

Prints, from one run on this machine, with every peer measured in the same rounds (the
machine's load changes by the second, so each round compares like with like; the rounds go
through every order of their actions, because the place in a round and the action just
before bias wall time):
- what the instance metadata guard (``metadata_guard=True``) adds to a start, in rounds of
  its own: to a container like an agent's job (a memory limit and metering, so a cgroup and
  metering's attach without it), and to a bare one (where the guard's cgroup is made for it);
- median start-to-exit of ``/bin/true`` over N rounds (default 200) for
  ``fuzzball_runtime.Container`` (image already converted; with the image mount shared by a
  long-running container, as on a busy node, and with a mount + unmount per run),
  ``bwrap --unshare-all`` and ``runc run``, and the ratios. Two pairs are like for like:
  the default container (no network namespace of its own) against
  ``bwrap --unshare-all --share-net --new-session``, and a container with ``network=True``
  (a new network namespace, lo up) against ``bwrap --unshare-all --new-session``. The
  container's PID 1 leads a session of its own (``setsid``, so that nothing in it can reach
  the agent's terminal), which bwrap does only with ``--new-session``; where the kernel
  groups tasks by session for scheduling (``kernel.sched_autogroup_enabled``, the default
  of many distributions, for tasks outside a ``cpu`` cgroup), a new session is a scheduling
  group of its own, which on a loaded machine costs bwrap about as much wall time again;
- the CPU time per container of each (user + system, from ``getrusage``): this process's
  (the agent's, or Python's spawning the peer) and its children's (the container's
  processes, or the peer's), which the load average does not inflate as it does wall time;
- with the runtime's state directory on a tmpfs, as its default ``/run/fuzzball-runtime`` is
  on a node (``--state-on-disk`` puts it in the temporary directory instead: each container
  creates and removes a few small files there);
- optionally with ``--agent-heap-mb`` of touched heap so that the bench process is as large
  as a running agent (the cost of creating the container's first process grows with it);
- conversion time of the tree by ``fuzzball_runtime.erofs.build_from_dir`` vs bare
  ``mkfs.erofs`` with the same arguments (medians of several runs) and the overhead;
- the load average before and after;
- with ``--baseline DIR`` (a directory where ``import fuzzball_runtime`` finds other code, e.g.
  the ``build/mypy-path`` of a ``git worktree`` of an older commit, with its C parts built),
  that code against this tree's and ``bwrap --unshare-all``, in the same rounds: each of the
  three runs in a worker process of its own (the baseline's started with that directory
  first on ``PYTHONPATH``) that times its container and its CPU itself, so that all are
  measured alike.

The two comparisons differ in where the starts come from, and on a loaded machine that moves
wall time, for ours and bwrap alike: the main comparison starts everything from this
process, which is busy (it runs every action of a round), and under load the child its
``clone`` makes waits in the run queue behind other processes (``perf sched`` at load 5: the
container's first process runnable for 2.4 ms median before and between its turns, against
0.17 ms for a start from a worker, with the same 0.8-0.9 ms of CPU); a worker sleeps until
its line arrives and its child runs at once. So the workers' figures are lower for every
contestant (bwrap 4.3-4.9 ms from a worker against 8.2-12.7 ms from this process in the same
runs, at load 8-10), and each comparison is like for like only within itself.

Needs root, Debian's busybox-static, erofs-utils, bubblewrap and runc. Usage:
    python bench/runtime.py [--runs 200] [--agent-heap-mb 0] [--state-on-disk]
                            [--baseline DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fuzzball_runtime import Container, ContainerSpec, sweep
from fuzzball_runtime.erofs import build_from_dir, mkfs_command


def make_rootfs(root: Path, extra_files: int) -> None:
    """busybox-static and its applets, plus ``extra_files`` small files for conversion."""
    for directory in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "proc", "dev", "tmp"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    subprocess.run(["chroot", str(root), "/bin/busybox", "--install", "-s"], check=True)
    data = root / "usr" / "share" / "data"
    data.mkdir(parents=True)
    for i in range(extra_files):
        (data / f"file-{i:05d}.txt").write_text(f"payload {i}\n" * (i % 200 + 1))


def _cpu_ms() -> tuple[float, float]:
    """CPU time so far (user + system, ms) of this process and of its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        (own.ru_utime + own.ru_stime) * 1000,
        (children.ru_utime + children.ru_stime) * 1000,
    )


#: (wall, own CPU, children's CPU) of one call in ms, from an action that measures itself
Measured = tuple[float, float, float]


def interleaved(
    actions: dict[str, Callable[[], Measured | None]], runs: int, warmup: int = 5
) -> dict[str, dict[str, float]]:
    """Run the actions in rounds, each once per round, the rounds going through every order
    of the actions in turn, and return, per action, the median wall time and the mean CPU of
    this process and of its children per call (ms). Every order, not one order and its
    reverse: the place in a round and the action just before bias wall time (two runtimes'
    workers swapped between first and second place measured each 10-25 % faster in second
    place at load 10-15; with an order and its reverse, the first of three actions never
    followed the third, and the same code measured as "this tree" and as the baseline
    differed by 0.3-1 ms of wall).

    An action returning None is measured here; one returning a :data:`Measured` (a worker
    process timing its own container) is taken at its word."""
    for action in actions.values():
        for _ in range(warmup):
            action()
    walls: dict[str, list[float]] = {name: [] for name in actions}
    own_cpu = dict.fromkeys(actions, 0.0)
    child_cpu = dict.fromkeys(actions, 0.0)
    orders = itertools.cycle(itertools.permutations(actions))
    for _ in range(runs):
        for name in next(orders):
            action = actions[name]
            own_before, children_before = _cpu_ms()
            start = time.perf_counter()
            measured = action()
            wall = (time.perf_counter() - start) * 1000
            own_after, children_after = _cpu_ms()
            if measured is None:
                measured = (wall, own_after - own_before, children_after - children_before)
            walls[name].append(measured[0])
            own_cpu[name] += measured[1]
            child_cpu[name] += measured[2]
    return {
        name: {
            "wall_ms": statistics.median(walls[name]),
            "own_cpu_ms": own_cpu[name] / runs,
            "children_cpu_ms": child_cpu[name] / runs,
        }
        for name in actions
    }


@contextlib.contextmanager
def state_directory(workdir: Path, on_disk: bool) -> Iterator[Path]:
    """The runtime's state directory: a private tmpfs unless ``on_disk``; swept at the end."""
    state_dir = workdir / "state"
    state_dir.mkdir()
    if not on_disk:
        subprocess.run(["mount", "-t", "tmpfs", "fbrt-bench-state", str(state_dir)], check=True)
    try:
        yield state_dir
    finally:
        sweep(state_dir)
        if not on_disk:
            subprocess.run(["umount", "--lazy", str(state_dir)], check=True)


def _runc_action(rootfs: Path, workdir: Path) -> tuple[Callable[[], None] | None, str]:
    """``runc run`` of the same rootfs, or None and why it cannot run here."""
    bundle = workdir / "runc-bundle"
    bundle.mkdir()
    subprocess.run(["runc", "spec", "-b", str(bundle)], check=True)
    config = json.loads((bundle / "config.json").read_text())
    config["process"]["terminal"] = False
    config["process"]["args"] = ["/bin/true"]
    config["root"] = {"path": str(rootfs), "readonly": True}
    (bundle / "config.json").write_text(json.dumps(config))
    probe = subprocess.run(
        ["runc", "run", "-b", str(bundle), "fbrt-bench-probe"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return None, probe.stderr.strip()
    counter = iter(range(10**9))

    def run() -> None:
        subprocess.run(
            ["runc", "run", "-b", str(bundle), f"fbrt-bench-{next(counter)}"], check=True
        )

    return run, ""


def _bwrap(rootfs: Path, *extra: str) -> Callable[[], None]:
    command = [
        "bwrap",
        "--unshare-all",
        *extra,
        "--ro-bind",
        str(rootfs),
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "/bin/true",
    ]

    def run() -> None:
        subprocess.run(command, check=True)

    return run


def _ours(image: Path, state_dir: Path, **fields: Any) -> Callable[[], None]:
    spec = ContainerSpec(image=image, command=["/bin/true"], state_dir=state_dir, **fields)

    def run() -> None:
        handle = Container(spec).start()
        status = handle.wait()
        handle.close()
        assert status.exit_code == 0, status

    return run


def _serve_runs(run: Callable[[], None]) -> None:
    """For each line read, call ``run`` and write its wall time and the CPU of this process
    and of its children (ms)."""
    for _ in sys.stdin:
        own_before, children_before = _cpu_ms()
        start = time.perf_counter()
        run()
        wall = (time.perf_counter() - start) * 1000
        own_after, children_after = _cpu_ms()
        print(wall, own_after - own_before, children_after - children_before, flush=True)


def worker(image: Path, state_dir: Path) -> int:
    """The ``--worker`` mode: for each line read, start ``/bin/true`` in a container (the
    image mount shared with a long-running container, as in the main comparison), and write
    its wall time and the CPU of this process and of its children (ms)."""
    _ours(image, state_dir)()  # the first start makes the per-process init and template
    keeper = Container(
        ContainerSpec(image=image, command=["/bin/sleep", "3600"], state_dir=state_dir)
    ).start()
    try:
        _serve_runs(_ours(image, state_dir))
    finally:
        keeper.close()
    return 0


def bwrap_worker(rootfs: Path) -> int:
    """The ``--bwrap-worker`` mode: the same for ``bwrap --unshare-all`` started from this
    process, so that the peer is started from a worker process as the runtimes are."""
    _serve_runs(_bwrap(rootfs))
    return 0


@contextlib.contextmanager
def worker_action(python_path: str | None, *mode: str) -> Iterator[Callable[[], Measured]]:
    """A worker process in ``mode`` (``--worker IMAGE STATE_DIR`` or ``--bwrap-worker
    ROOTFS``) importing ``fuzzball_runtime`` from ``python_path`` first (None: as this process
    does); yields the action that has it run one container."""
    env = dict(os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([python_path, env.get("PYTHONPATH", "")])
    command = [sys.executable, __file__, *mode]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        stdin, stdout = process.stdin, process.stdout

        def action() -> Measured:
            stdin.write("run\n")
            stdin.flush()
            wall, own, children = (float(x) for x in stdout.readline().split())
            return wall, own, children

        try:
            yield action
        finally:
            stdin.close()
            process.wait(timeout=60)


def bench_baseline(
    baseline: str, image: Path, rootfs: Path, workdir: Path, runs: int, on_disk: bool
) -> dict[str, dict[str, float]]:
    """This tree's runtime, the baseline's and bwrap in the same rounds, each in a worker
    process of its own (the runtimes with a state directory each): a worker sleeps between
    its runs, which a start from the busy bench process does not (see :func:`main`'s notes
    on the two comparisons), so the peer is measured from a worker too."""
    (workdir / "ours").mkdir()
    (workdir / "baseline").mkdir()
    with (
        state_directory(workdir / "ours", on_disk) as ours_state,
        state_directory(workdir / "baseline", on_disk) as baseline_state,
        worker_action(None, "--worker", str(image), str(ours_state)) as ours,
        worker_action(baseline, "--worker", str(image), str(baseline_state)) as theirs,
        worker_action(None, "--bwrap-worker", str(rootfs)) as bwrap,
    ):
        return interleaved({"fuzzball": ours, "baseline": theirs, "bwrap": bwrap}, runs)


def bench_start(
    image: Path, rootfs: Path, state_dir: Path, workdir: Path, runs: int
) -> dict[str, object]:
    """Start-to-exit and CPU per container of ours and the peers, in interleaved rounds."""
    bwrap = _bwrap(rootfs)
    bwrap_share_net = _bwrap(rootfs, "--share-net", "--new-session")
    # The image is mounted and unmounted by each container: nothing else holds it.
    per_run = interleaved({"fuzzball_mount_per_run": _ours(image, state_dir), "bwrap": bwrap}, runs)
    keeper = Container(
        ContainerSpec(image=image, command=["/bin/sleep", "3600"], state_dir=state_dir)
    ).start()
    try:
        shared = interleaved(
            {
                "fuzzball": _ours(image, state_dir),
                "bwrap_share_net": bwrap_share_net,
                "fuzzball_network": _ours(image, state_dir, network=True),
                "bwrap": bwrap,
                "bwrap_new_session": _bwrap(rootfs, "--new-session"),
            },
            runs,
        )
        # what the instance metadata guard adds to a job's start: to an agent's job (a
        # memory limit and metering: a cgroup and metering's attach already), and alone
        # (its cgroup made for it)
        agent_job = {"memory": 256 << 20, "metering": True}
        guard = interleaved(
            {
                "fuzzball": _ours(image, state_dir),
                "fuzzball_guard": _ours(image, state_dir, metadata_guard=True),
                "fuzzball_agent_job": _ours(image, state_dir, **agent_job),
                "fuzzball_agent_job_guard": _ours(
                    image, state_dir, **agent_job, metadata_guard=True
                ),
            },
            runs,
        )
    finally:
        keeper.close()
    runc, runc_error = _runc_action(rootfs, workdir)
    # runc takes tens of milliseconds a run: fewer rounds, still against bwrap in each.
    with_runc = interleaved({"runc": runc, "bwrap": bwrap}, max(10, runs // 4)) if runc else None
    return {
        "per_run": per_run,
        "shared": shared,
        "guard": guard,
        "runc": with_runc,
        "runc_error": runc_error,
    }


def bench_conversion(rootfs: Path, workdir: Path, rounds: int) -> dict[str, float]:
    out = workdir / "conv.erofs"
    bare = mkfs_command(rootfs, out, "lz4")
    ours_s, bare_s = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run(bare, check=True, capture_output=True)
        bare_s.append(time.perf_counter() - start)
        out.unlink()
        start = time.perf_counter()
        build_from_dir(rootfs, out)
        ours_s.append(time.perf_counter() - start)
        out.unlink()
    return {
        "mkfs_erofs_ms": statistics.median(bare_s) * 1000,
        "build_from_dir_ms": statistics.median(ours_s) * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--conversion-rounds", type=int, default=9)
    parser.add_argument("--extra-files", type=int, default=3000)
    parser.add_argument(
        "--state-on-disk", action="store_true", help="state directory in the temporary dir"
    )
    parser.add_argument(
        "--agent-heap-mb", type=int, default=0, help="touched heap to give this process first"
    )
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="also measure the fuzzball_runtime found in DIR (first on PYTHONPATH)",
    )
    parser.add_argument("--worker", nargs=2, metavar=("IMAGE", "STATE_DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--bwrap-worker", metavar="ROOTFS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(Path(args.worker[0]), Path(args.worker[1]))
    if args.bwrap_worker:
        return bwrap_worker(Path(args.bwrap_worker))
    # Every page is written so that it is resident, as an agent's live heap is.
    heap = bytearray(args.agent_heap_mb << 20)
    heap[:: 1 << 12] = b"\1" * len(heap[:: 1 << 12])
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="fbrt-bench-") as tmp:
        workdir = Path(tmp)
        rootfs = workdir / "rootfs"
        make_rootfs(rootfs, args.extra_files)
        image = build_from_dir(rootfs, workdir / "busybox.erofs")
        conversion = bench_conversion(rootfs, workdir, args.conversion_rounds)
        with state_directory(workdir, args.state_on_disk) as state_dir:
            start = bench_start(image, rootfs, state_dir, workdir, args.runs)
        baseline = (
            bench_baseline(args.baseline, image, rootfs, workdir, args.runs, args.state_on_disk)
            if args.baseline
            else None
        )

    where = "on disk" if args.state_on_disk else "on a tmpfs"
    load_after = os.getloadavg()
    print(
        f"start-to-exit of /bin/true, median of {args.runs} interleaved rounds (state "
        f"directory {where}; load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after, on {os.cpu_count()} CPUs):"
    )
    print(" " * 50 + "wall     CPU: agent/spawner + container")

    def row(label: str, figures: dict[str, float]) -> None:
        own, children = figures["own_cpu_ms"], figures["children_cpu_ms"]
        print(
            f"  {label:46s} {figures['wall_ms']:7.2f} ms   {own:5.2f} + {children:5.2f} "
            f"= {own + children:5.2f} ms"
        )

    shared = start["shared"]
    per_run = start["per_run"]
    row("fuzzball (image mount shared)", shared["fuzzball"])
    row("bwrap --unshare-all --share-net --new-session", shared["bwrap_share_net"])
    row("fuzzball, network=True", shared["fuzzball_network"])
    row("bwrap --unshare-all --new-session", shared["bwrap_new_session"])
    row("bwrap --unshare-all", shared["bwrap"])
    row("fuzzball (mount per run)", per_run["fuzzball_mount_per_run"])
    row("bwrap --unshare-all (same rounds)", per_run["bwrap"])
    guard = start["guard"]
    print("the instance metadata guard (metadata_guard=True), in rounds of its own:")
    row("fuzzball", guard["fuzzball"])
    row("fuzzball, metadata guard (and its cgroup)", guard["fuzzball_guard"])
    row("fuzzball, memory limit + metering", guard["fuzzball_agent_job"])
    row("fuzzball, memory limit + metering + guard", guard["fuzzball_agent_job_guard"])
    runc = start["runc"]
    if runc is None:
        print(f"  runc run: could not run here: {start['runc_error']}")
    else:
        row("runc run", runc["runc"])
        row("bwrap --unshare-all (same rounds)", runc["bwrap"])

    def ratio(ours: dict[str, float], peer: dict[str, float]) -> str:
        wall = ours["wall_ms"] / peer["wall_ms"]
        cpu = (ours["own_cpu_ms"] + ours["children_cpu_ms"]) / (
            peer["own_cpu_ms"] + peer["children_cpu_ms"]
        )
        return f"wall {wall:5.2f}x   CPU {cpu:5.2f}x"

    print("ratios, each against the peer of its own rounds (target: wall <= 0.5x bwrap):")
    print(
        "  fuzzball / bwrap --unshare-all              "
        f"{ratio(shared['fuzzball'], shared['bwrap'])}"
    )
    print(
        "  like for like, no network namespace:        "
        f"{ratio(shared['fuzzball'], shared['bwrap_share_net'])}"
    )
    print(
        "  like for like, network namespace:           "
        f"{ratio(shared['fuzzball_network'], shared['bwrap_new_session'])}"
    )
    print(
        "  mount per run / bwrap --unshare-all         "
        f"{ratio(per_run['fuzzball_mount_per_run'], per_run['bwrap'])}"
    )
    if runc is not None:
        runc_over_bwrap = runc["runc"]["wall_ms"] / runc["bwrap"]["wall_ms"]
        ours_over_bwrap = shared["fuzzball"]["wall_ms"] / shared["bwrap"]["wall_ms"]
        print(
            f"  runc is {runc_over_bwrap / ours_over_bwrap:4.1f}x fuzzball (through bwrap, "
            f"runc {runc_over_bwrap:.2f}x bwrap in its rounds)"
        )
    if baseline is not None:
        print(f"this tree against the baseline in {args.baseline}, each in a worker, same rounds:")
        row("fuzzball (this tree)", baseline["fuzzball"])
        row("fuzzball (baseline)", baseline["baseline"])
        row("bwrap --unshare-all (a worker too)", baseline["bwrap"])
        print(
            "  this tree / bwrap --unshare-all            "
            f"{ratio(baseline['fuzzball'], baseline['bwrap'])}"
        )
        print(
            "  baseline / bwrap --unshare-all             "
            f"{ratio(baseline['baseline'], baseline['bwrap'])}"
        )
    print(f"(agent heap {args.agent_heap_mb} MiB)")
    overhead = conversion["build_from_dir_ms"] / conversion["mkfs_erofs_ms"] - 1
    print(f"conversion of the same tree ({args.extra_files} extra files), median:")
    print(f"  mkfs.erofs -zlz4                {conversion['mkfs_erofs_ms']:8.2f} ms")
    print(f"  erofs.build_from_dir            {conversion['build_from_dir_ms']:8.2f} ms")
    print(f"  overhead                        {overhead * 100:+7.1f} % (target <= 10 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
