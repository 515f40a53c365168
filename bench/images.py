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

``--second-node-mb N`` then measures a second node's cold start of an N MB image (random
data, uncompressed layers of 256 MB): node A pulls it and writes it back to the object cache
(Orchestrate's real node-objects routes, ``tests/support/object_cache_server.py``); node B,
with an empty cache, gets it (a) from the registry, as before, and (b) from the object cache,
as a pull stage whose payload names the written-back copy does; rounds alternate.

Targets (issue 19): fuzzball <= 0.5 x peer; cached < 50 ms; a second node's cold start
from the first node's cache faster than from the registry.
Run: ``python bench/images.py [--mb 200] [--text-mb 0] [--second-node-mb 2048]``.
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

from support.object_cache_server import ObjectCacheServer
from support.oci_pusher import Pusher, busybox_entries, file, layer
from support.registry_server import RegistryServer

from fuzzball_core.orchestrate.image_stages import write_back_name
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.images import NodeImages
from fuzzball_plugins.images.docker_backend import DockerBackend
from fuzzball_plugins.images.object_cache_backend import ObjectCacheBackend
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


def second_node(registry: RegistryServer, workdir: Path, mb: int, runs: int) -> None:
    """Node B's cold start of an ``mb`` MB image: from the registry vs from the copy node A
    wrote back to the object cache, alternating."""
    layer_mb = 256
    layers = [layer(busybox_entries())]
    for index in range(max(1, mb // layer_mb)):
        # uncompressed: gzip of random data would only slow the set-up
        blob = os.urandom(layer_mb << 20)
        layers.append(layer([file(f"data/part-{index}.bin", blob)], compress=False))
        del blob
    pusher = Pusher(registry.url)
    pusher.push_image("bench/huge", "1", layers, chunk_size=64 << 20)
    pusher.close()
    size_mb = sum(len(item.blob) for item in layers) / 1e6
    del layers
    uri = f"docker://{registry.host}/bench/huge:1"
    backend = DockerBackend({"platform": "linux/amd64"})
    image = backend.resolve(uri)
    server = ObjectCacheServer(workdir / "orchestrate")
    try:
        start = time.perf_counter()
        erofs = backend.fetch(image, workdir / "node-a")
        pulled = time.perf_counter() - start
        target = {
            "owner": "",
            "scope": "group",
            "name": write_back_name(uri),
            "definition-hash": image.digest,
        }
        start = time.perf_counter()
        stored = ObjectCacheBackend({"object-cache-url": server.url}).store(
            target, erofs, timeout=600
        )
        uploaded = time.perf_counter() - start
        cached_uri = f"fuzzball://group/{target['name']}@{stored['digest']}"
        shutil.rmtree(workdir / "node-a")
        config = {"platform": "linux/amd64", "object-cache-url": server.url}
        results: dict[str, list[tuple[float, float]]] = {"registry": [], "object cache": []}
        for run in range(runs):
            for source, cached in (("registry", ""), ("object cache", cached_uri)):
                node_b = workdir / f"node-b-{run}-{source.replace(' ', '-')}"
                images = NodeImages(get_registry(), config, node_b)
                start, cpu = time.perf_counter(), _cpu()
                images.ensure(uri, digest=image.digest, cached=cached)
                results[source].append((time.perf_counter() - start, _cpu() - cpu))
                shutil.rmtree(node_b)
    finally:
        server.close()
    print(
        f"second node: {size_mb:.0f} MB image ({size_mb / 1.073741824e3:.2f} GiB); node A "
        f"pulled it in {pulled:.1f} s and wrote it back in {uploaded:.1f} s"
    )
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for source, measured in results.items():
        walls = ", ".join(f"{wall:.1f}" for wall, _ in measured)
        cpus = ", ".join(f"{cpu:.1f}" for _, cpu in measured)
        print(f"  node B cold start from the {source}: {walls} s (CPU {cpus} s)")
    best_registry = min(wall for wall, _ in results["registry"])
    best_cache = min(wall for wall, _ in results["object cache"])
    print(f"  object cache / registry, wall: {best_cache / best_registry:.2f} (target: below 1.00)")


def main() -> None:
    """Build, push, time and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="approximate image size in MB")
    parser.add_argument("--text-mb", type=int, default=0, help="MB of compressible text to add")
    parser.add_argument("--runs", type=int, default=3, help="repetitions; the best run counts")
    parser.add_argument(
        "--second-node-mb", type=int, default=0, help="MB of the second-node cold-start image"
    )
    parser.add_argument("--skip-pull", action="store_true", help="only the second-node measurement")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="fuzzball-bench-images-"))
    registry = RegistryServer(workdir / "registry")
    registry.start()
    try:
        if args.second_node_mb:
            second_node(registry, workdir, args.second_node_mb, max(1, min(args.runs, 2)))
        if args.skip_pull:
            return
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
