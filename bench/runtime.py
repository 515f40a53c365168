"""Benchmark of the node runtime against bubblewrap and runc on the same busybox rootfs.

Prints, from one run on this machine:
- median start-to-exit of ``/bin/true`` over N runs (default 200) for
  ``fuzzball_runtime.Container`` (image already converted; with the image mount shared by a
  long-running container, as on a busy node, and with a mount + unmount per run),
  ``bwrap --unshare-all`` and ``runc run``, and the ratios;
- with the runtime's state directory on a tmpfs, as its default ``/run/fuzzball-runtime`` is
  on a node (``--state-on-disk`` puts it in the temporary directory instead: each container
  creates and removes a few small files there);
- the agent's (this process's) CPU time per container (user + system, from ``getrusage``),
  optionally with ``--agent-heap-mb`` of touched heap so that the bench process is as large
  as a running agent (the cost of creating the container's first process grows with it);
- conversion time of the tree by ``fuzzball_runtime.erofs.build_from_dir`` vs bare
  ``mkfs.erofs`` with the same arguments (medians of several runs) and the overhead.

Needs root, Debian's busybox-static, erofs-utils, bubblewrap and runc. Usage:
    python bench/runtime.py [--runs 200] [--agent-heap-mb 0] [--state-on-disk]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

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


def median_ms(action: Callable[[], None], runs: int, warmup: int = 5) -> float:
    for _ in range(warmup):
        action()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def agent_cpu_ms_per_run(action: Callable[[], None], runs: int) -> float:
    """CPU time (user + system) this process spends per call of ``action``."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(runs):
        action()
    after = resource.getrusage(resource.RUSAGE_SELF)
    spent = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return spent / runs * 1000


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


def bench_start(
    image: Path, rootfs: Path, state_dir: Path, workdir: Path, runs: int
) -> dict[str, object]:
    spec = ContainerSpec(image=image, command=["/bin/true"], state_dir=state_dir)

    def ours() -> None:
        handle = Container(spec).start()
        status = handle.wait()
        handle.close()
        assert status.exit_code == 0, status

    results: dict[str, object] = {}
    results["fuzzball_mount_per_run_ms"] = median_ms(ours, runs)
    keeper = Container(
        ContainerSpec(image=image, command=["/bin/sleep", "3600"], state_dir=state_dir)
    ).start()
    try:
        results["fuzzball_shared_mount_ms"] = median_ms(ours, runs)
        results["agent_cpu_ms"] = agent_cpu_ms_per_run(ours, runs)
    finally:
        keeper.close()

    bwrap = [
        "bwrap",
        "--unshare-all",
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
    results["bwrap_ms"] = median_ms(lambda: subprocess.run(bwrap, check=True), runs)

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
        results["runc_ms"] = None
        results["runc_error"] = probe.stderr.strip()
    else:
        counter = iter(range(10**9))
        results["runc_ms"] = median_ms(
            lambda: subprocess.run(
                ["runc", "run", "-b", str(bundle), f"fbrt-bench-{next(counter)}"], check=True
            ),
            runs,
        )
    return results


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
    args = parser.parse_args()
    # Every page is written so that it is resident, as an agent's live heap is.
    heap = bytearray(args.agent_heap_mb << 20)
    heap[:: 1 << 12] = b"\1" * len(heap[:: 1 << 12])
    with tempfile.TemporaryDirectory(prefix="fbrt-bench-") as tmp:
        workdir = Path(tmp)
        rootfs = workdir / "rootfs"
        make_rootfs(rootfs, args.extra_files)
        image = build_from_dir(rootfs, workdir / "busybox.erofs")
        conversion = bench_conversion(rootfs, workdir, args.conversion_rounds)
        with state_directory(workdir, args.state_on_disk) as state_dir:
            start = bench_start(image, rootfs, state_dir, workdir, args.runs)

    where = "on disk" if args.state_on_disk else "on a tmpfs"
    print(f"start-to-exit of /bin/true, median of {args.runs} runs (state directory {where}):")
    shared = start["fuzzball_shared_mount_ms"]
    per_run = start["fuzzball_mount_per_run_ms"]
    bwrap = start["bwrap_ms"]
    runc = start["runc_ms"]
    print(f"  fuzzball (image mount shared)   {shared:8.2f} ms")
    print(f"  fuzzball (mount per run)        {per_run:8.2f} ms")
    print(f"  bwrap --unshare-all             {bwrap:8.2f} ms")
    if runc is None:
        print(f"  runc run                        could not run here: {start['runc_error']}")
    else:
        print(f"  runc run                        {runc:8.2f} ms")
    print("ratios (target: fuzzball <= 0.6 x bwrap, fuzzball <= runc / 5):")
    for label, ours in (("shared mount", shared), ("mount per run", per_run)):
        line = f"  {label:14s} fuzzball/bwrap = {ours / bwrap:5.2f}"
        if runc is not None:
            line += f"   fuzzball/runc = {ours / runc:5.3f} (runc is {runc / ours:4.1f}x slower)"
        print(line)
    print(
        f"agent CPU per container (image mount shared, agent heap {args.agent_heap_mb} MiB): "
        f"{start['agent_cpu_ms']:.2f} ms"
    )
    overhead = conversion["build_from_dir_ms"] / conversion["mkfs_erofs_ms"] - 1
    print(f"conversion of the same tree ({args.extra_files} extra files), median:")
    print(f"  mkfs.erofs -zlz4                {conversion['mkfs_erofs_ms']:8.2f} ms")
    print(f"  erofs.build_from_dir            {conversion['build_from_dir_ms']:8.2f} ms")
    print(f"  overhead                        {overhead * 100:+7.1f} % (target <= 10 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
