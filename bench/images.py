"""Image pull benchmark: Fuzzball's docker:// backend against skopeo + umoci + mkfs.erofs.

Builds a ~200 MB three-layer image (busybox plus two layers of random, incompressible data
files) on the fly, pushes it into a local ``docker-registry``, then times:

* ``fuzzball``: ``DockerBackend.fetch`` into an empty cache (pull, verify, apply, mkfs.erofs);
* ``peer``: ``skopeo copy docker://... oci:DIR`` + ``umoci unpack`` + ``mkfs.erofs``;
* ``cached``: a second ``fetch`` of the same image (a cache lookup).

Targets: fuzzball <= 1.1 x peer; cached < 50 ms. Run: ``python bench/images.py [--mb 200]``.
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


def _timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    """Build, push, time and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="approximate image size in MB")
    parser.add_argument("--runs", type=int, default=3, help="repetitions; the best run counts")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="fuzzball-bench-images-"))
    registry = RegistryServer(workdir / "registry")
    registry.start()
    try:
        half = args.mb * 1024 * 1024 // 2
        layers = [layer(busybox_entries()), _data_layer(half, "a"), _data_layer(half, "b")]
        pusher = Pusher(registry.url)
        pusher.push_image("bench/big", "1", layers, chunk_size=32 << 20)
        pusher.close()
        size_mb = sum(len(item.blob) for item in layers) / 1e6
        uri = f"docker://{registry.host}/bench/big:1"
        backend = DockerBackend({"platform": "linux/amd64"})

        ours, peer, cached, parts = [], [], [], []
        for run in range(args.runs):
            cache = workdir / f"cache-{run}"
            start = time.perf_counter()
            image = backend.resolve(uri)
            backend.fetch(image, cache)
            ours.append(time.perf_counter() - start)

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
            # The same mkfs.erofs options the runtime uses (compression included).
            mkfs = _timed(mkfs_command(bundle / "rootfs", out, DEFAULT_COMPRESSION))
            peer.append(copy + unpack + mkfs)
            parts.append((copy, unpack, mkfs))
            for path in (oci, bundle):
                shutil.rmtree(path)
            out.unlink()

        best_ours, best_peer = min(ours), min(peer)
        copy, unpack, mkfs = parts[peer.index(best_peer)]
        print(f"image: 3 layers, {size_mb:.0f} MB compressed, registry {registry.host}")
        runs = ", ".join(f"{t:.2f}" for t in ours)
        print(f"fuzzball pull+convert: {best_ours:.2f} s (runs: {runs})")
        print(
            f"skopeo+umoci+mkfs.erofs: {best_peer:.2f} s "
            f"(copy {copy:.2f} + unpack {unpack:.2f} + mkfs {mkfs:.2f})"
        )
        print(f"ratio fuzzball/peer: {best_ours / best_peer:.2f} (target <= 1.10)")
        print(f"cached second use: {min(cached) * 1000:.1f} ms (target < 50 ms)")
    finally:
        registry.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
