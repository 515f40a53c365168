"""Image pull benchmark: Fuzzball's docker:// backend against skopeo + umoci + mkfs.erofs.

Builds a ~200 MB three-layer image (busybox plus two layers of random, incompressible data
files) on the fly, pushes it into a local ``docker-registry``, then times:

* ``fuzzball``: ``DockerBackend.fetch`` into an empty cache (pull, verify, apply, mkfs.erofs);
* ``peer``: ``skopeo copy docker://... oci:DIR`` + ``umoci unpack`` + ``mkfs.erofs``;
* ``cached``: a second ``fetch`` of the same image (a cache lookup).

Rounds alternate (ours, peer, ours, peer, ...) so both see the same load; wall time and CPU
time (this process and its children: mkfs.erofs, skopeo, umoci) are printed for each, CPU
being the steadier figure on a shared machine. ``--text-mb N`` adds a layer of compressible
text files, so the image is not all incompressible data.

Targets (issue 19): fuzzball <= 0.5 x peer; cached < 50 ms.
Run: ``python bench/images.py [--mb 200] [--text-mb 0]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # tests/support

from support.oci_pusher import Pusher, busybox_entries, file, layer
from support.registry_server import RegistryServer

from fuzzball_plugins.images.docker_backend import DockerBackend
from fuzzball_runtime.erofs import DEFAULT_COMPRESSION, mkfs_command


def _data_layer(total_bytes: int, prefix: str, files: int = 8) -> object:
    each = total_bytes // files
    return layer([file(f"data/{prefix}-{index}.bin", os.urandom(each)) for index in range(files)])


def _text_layer(total_bytes: int, files: int = 8) -> object:
    """Compressible content: numbered lines of words, as logs and source trees are."""
    words = [f"word{n:04d}" for n in range(2000)]
    lines, size, index = [], 0, 0
    while size < total_bytes // files:
        line = f"{index} {' '.join(words[(index * 7 + k) % len(words)] for k in range(8))}\n"
        lines.append(line)
        size += len(line)
        index += 1
    body = "".join(lines).encode()
    return layer([file(f"text/t-{n}.txt", body + str(n).encode()) for n in range(files)])


def _cpu() -> float:
    """CPU seconds of this process and its reaped children so far."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _timed(command: list[str]) -> tuple[float, float]:
    start, cpu = time.perf_counter(), _cpu()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start, _cpu() - cpu


def main() -> None:
    """Build, push, time and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="approximate image size in MB")
    parser.add_argument("--text-mb", type=int, default=0, help="MB of compressible text to add")
    parser.add_argument("--runs", type=int, default=3, help="repetitions; the best run counts")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="fuzzball-bench-images-"))
    registry = RegistryServer(workdir / "registry")
    registry.start()
    try:
        half = args.mb * 1024 * 1024 // 2
        layers = [layer(busybox_entries()), _data_layer(half, "a"), _data_layer(half, "b")]
        if args.text_mb:
            layers.append(_text_layer(args.text_mb * 1024 * 1024))
        pusher = Pusher(registry.url)
        pusher.push_image("bench/big", "1", layers, chunk_size=32 << 20)
        pusher.close()
        size_mb = sum(len(item.blob) for item in layers) / 1e6
        uri = f"docker://{registry.host}/bench/big:1"
        backend = DockerBackend({"platform": "linux/amd64"})

        ours, peer, cached, parts = [], [], [], []
        ours_cpu, peer_cpu = [], []
        for run in range(args.runs):
            cache = workdir / f"cache-{run}"
            start, cpu = time.perf_counter(), _cpu()
            image = backend.resolve(uri)
            backend.fetch(image, cache)
            ours.append(time.perf_counter() - start)
            ours_cpu.append(_cpu() - cpu)

            start = time.perf_counter()
            backend.fetch(image, cache)
            cached.append(time.perf_counter() - start)
            shutil.rmtree(cache)

            oci, bundle, out = (
                workdir / f"oci-{run}",
                workdir / f"bundle-{run}",
                workdir / "p.erofs",
            )
            copy = _timed(
                [
                    "skopeo",
                    "copy",
                    "--src-tls-verify=false",
                    f"docker://{registry.host}/bench/big:1",
                    f"oci:{oci}:1",
                ]
            )
            unpack = _timed(["umoci", "unpack", "--image", f"{oci}:1", str(bundle)])
            # The same mkfs.erofs options the runtime used before (lz4 compression).
            mkfs = _timed(mkfs_command(bundle / "rootfs", out, DEFAULT_COMPRESSION))
            peer.append(copy[0] + unpack[0] + mkfs[0])
            peer_cpu.append(copy[1] + unpack[1] + mkfs[1])
            parts.append((copy[0], unpack[0], mkfs[0]))
            for path in (oci, bundle):
                shutil.rmtree(path)
            out.unlink()

        best_ours, best_peer = min(ours), min(peer)
        copy, unpack, mkfs = parts[peer.index(best_peer)]
        print(f"image: {len(layers)} layers, {size_mb:.0f} MB compressed, registry {registry.host}")
        print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        runs = ", ".join(f"{t:.2f}" for t in ours)
        print(f"fuzzball pull+convert: {best_ours:.2f} s (runs: {runs})")
        peer_runs = ", ".join(f"{t:.2f}" for t in peer)
        print(
            f"skopeo+umoci+mkfs.erofs: {best_peer:.2f} s "
            f"(copy {copy:.2f} + unpack {unpack:.2f} + mkfs {mkfs:.2f}; runs: {peer_runs})"
        )
        print(f"ratio fuzzball/peer, wall: {best_ours / best_peer:.2f} (target <= 0.50)")
        cpu_ours, cpu_peer = min(ours_cpu), min(peer_cpu)
        print(
            f"CPU seconds: fuzzball {cpu_ours:.2f}, peer {cpu_peer:.2f}; "
            f"ratio {cpu_ours / cpu_peer:.2f}"
        )
        print(f"cached second use: {min(cached) * 1000:.1f} ms (target < 50 ms)")
    finally:
        registry.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
