"""Storage benchmark: S3 volume ingress and egress against plain boto3, and volume set-up time.

1. Ingress: one object (1 GiB by default) in moto's server mode, the S3 stand-in speaking
   S3's wire protocol over HTTP on loopback (``tests/support/s3_stand_in.py``), fetched into a
   workflow's volume by the node's ingress (``fetch_ingress`` with the object's s3
   credentials, as a job's start does) and downloaded by plain boto3 (``download_file`` with
   its default transfer settings: what ``aws s3 cp`` does), alternating which goes first,
   in the same run.
   The target is ingress <= 1.1x the plain download (medians).
2. Egress: the same object, as a file of a workflow's volume, sent by the node's egress
   (``send_egress`` with the destination's s3 credentials, as an egress stage's run does)
   and uploaded by plain boto3 (``upload_file``, its default transfer settings: ``aws s3
   cp``), alternating which goes first, in the same run. The target is the same, <= 1.1x.
3. Volume set-up per job: making a fresh workflow's volume directory on a node (the first
   job of a workflow), and a later job of the same workflow finding it and its ingress done.

Usage:
    python bench/storage.py [--size-mib 1024] [--rounds 3] [--jobs 500]
    python bench/storage.py --only egress
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))  # tests/support

from support.s3_stand_in import REGION, S3StandIn  # noqa: E402

from fuzzball_core.substrate.egress import send_egress  # noqa: E402
from fuzzball_core.substrate.ingress import fetch_ingress  # noqa: E402
from fuzzball_core.substrate.s3_transfer import S3Credentials  # noqa: E402
from fuzzball_core.substrate.volumes import WorkflowVolumes  # noqa: E402

BUCKET = "bench"
KEY = "inputs/object.bin"
TARGET = 1.1


def _object(path: Path, size: int) -> None:
    """Write ``size`` bytes that do not compress away (a repeated random MiB)."""
    block = uuid.uuid4().bytes * (1 << 16)
    with path.open("wb") as out:
        for _ in range(size >> 20):
            out.write(block)
        out.write(block[: size & ((1 << 20) - 1)])


def bench_ingress(s3: S3StandIn, work: Path, size: int, rounds: int) -> tuple[float, float]:
    """Median seconds of (ingress, plain boto3 download) of one ``size``-byte object."""
    source = work / "source.bin"
    _object(source, size)
    client = s3.client()
    client.create_bucket(Bucket=BUCKET)
    client.upload_file(str(source), BUCKET, KEY)
    source.unlink()
    credentials = {
        "data/0": S3Credentials(
            access_key_id=s3.access_key_id,
            secret_access_key=s3.secret_access_key,
            region=REGION,
            endpoint=s3.endpoint,
        )
    }
    ingress = {"data": [{"source": f"s3://{BUCKET}/{KEY}", "destination": "object.bin"}]}
    ours: list[float] = []
    plain: list[float] = []
    for index in range(rounds):
        # alternate which goes first: the first read after the upload pays for moto
        # assembling the object, and a busy machine's load drifts
        kinds = ("ingress", "plain") if index % 2 == 0 else ("plain", "ingress")
        for kind in kinds:
            if kind == "ingress":
                ours.append(_timed_ingress(work / f"node-{index}", ingress, credentials, size))
            else:
                plain.append(_timed_plain(s3, work / f"plain-{index}.bin", size))
        print(f"  round {index + 1}: ingress {ours[-1]:.2f}s, plain boto3 {plain[-1]:.2f}s")
    return statistics.median(ours), statistics.median(plain)


def _timed_ingress(
    node: Path, ingress: dict[str, list[dict[str, str]]], credentials: Any, size: int
) -> float:
    """Seconds the node's ingress takes to fetch the object into a fresh workflow's volume."""
    volumes = WorkflowVolumes(node)
    workflow = str(uuid.uuid4())
    started = time.perf_counter()
    fetch_ingress(volumes, workflow, ingress, s3=credentials)
    seconds = time.perf_counter() - started
    fetched = volumes.volume_dir(workflow, "data") / "object.bin"
    assert fetched.stat().st_size == size, "ingress fetched the wrong size"
    fetched.unlink()
    return seconds


def _timed_plain(s3: S3StandIn, target: Path, size: int) -> float:
    """Seconds a plain boto3 ``download_file`` takes (``aws s3 cp``'s defaults)."""
    started = time.perf_counter()
    s3.client().download_file(BUCKET, KEY, str(target))
    seconds = time.perf_counter() - started
    assert target.stat().st_size == size, "boto3 downloaded the wrong size"
    target.unlink()
    return seconds


def bench_egress(s3: S3StandIn, work: Path, size: int, rounds: int) -> tuple[float, float]:
    """Median seconds of (egress, plain boto3 upload) of one ``size``-byte file."""
    volumes = WorkflowVolumes(work / "egress-node")
    workflow = str(uuid.uuid4())
    directory = volumes.volume_dir(workflow, "data")
    _object(directory / "result.bin", size)
    client = s3.client()
    if BUCKET not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
        client.create_bucket(Bucket=BUCKET)
    credentials = {
        "data/egress/0": S3Credentials(
            access_key_id=s3.access_key_id,
            secret_access_key=s3.secret_access_key,
            region=REGION,
            endpoint=s3.endpoint,
        )
    }
    ours: list[float] = []
    plain: list[float] = []
    for index in range(rounds):
        kinds = ("egress", "plain") if index % 2 == 0 else ("plain", "egress")
        for kind in kinds:
            key = f"results/{kind}-{index}.bin"
            started = time.perf_counter()
            if kind == "egress":
                transfer = {"source": "result.bin", "destination": f"s3://{BUCKET}/{key}"}
                send_egress(directory, "data", [transfer], credentials)
                ours.append(time.perf_counter() - started)
            else:
                # a client of its own, as each `aws s3 cp` (and each egress run) makes one
                s3.client().upload_file(str(directory / "result.bin"), BUCKET, key)
                plain.append(time.perf_counter() - started)
            sent = client.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
            assert sent == size, f"{kind} sent the wrong size"
            client.delete_object(Bucket=BUCKET, Key=key)  # moto keeps objects in memory
        print(f"  round {index + 1}: egress {ours[-1]:.2f}s, plain boto3 {plain[-1]:.2f}s")
    return statistics.median(ours), statistics.median(plain)


def bench_setup(work: Path, jobs: int) -> tuple[float, float]:
    """Median seconds of (a workflow's first job making its volume, a later job of the same
    workflow finding it and its ingress done)."""
    volumes = WorkflowVolumes(work / "setup")
    done: dict[str, list[dict[str, str]]] = {"data": []}  # nothing to fetch: only the marker
    first, later = [], []
    for _ in range(jobs):
        workflow = str(uuid.uuid4())
        started = time.perf_counter()
        volumes.volume_dir(workflow, "data")
        fetch_ingress(volumes, workflow, done)
        first.append(time.perf_counter() - started)
        started = time.perf_counter()
        volumes.volume_dir(workflow, "data")
        fetch_ingress(volumes, workflow, done)
        later.append(time.perf_counter() - started)
    return statistics.median(first), statistics.median(later)


def main() -> int:
    """Run the benchmarks; exit 1 when ingress or egress misses its target."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="object size (MiB)")
    parser.add_argument("--rounds", type=int, default=3, help="transfers of each kind")
    parser.add_argument("--jobs", type=int, default=500, help="jobs timed for volume set-up")
    parser.add_argument(
        "--only", choices=("ingress", "egress", "setup"), help="run one benchmark alone"
    )
    args = parser.parse_args()
    size = args.size_mib << 20
    ratios = []
    with tempfile.TemporaryDirectory(prefix="fb-bench-storage-") as scratch:
        work = Path(scratch)
        s3 = S3StandIn.start()
        try:
            for kind, bench, plain_kind in (
                ("ingress", bench_ingress, "download"),
                ("egress", bench_egress, "upload"),
            ):
                if args.only not in (None, kind):
                    continue
                print(f"S3 {kind} of {args.size_mib} MiB, moto's server ({s3.endpoint}):")
                ours, plain = bench(s3, work, size, args.rounds)
                ratios.append(ours / plain)
                rate = size / ours / (1 << 20)
                print(
                    f"{kind} median {ours:.2f}s ({rate:.0f} MiB/s), plain boto3 {plain_kind}"
                    f" median {plain:.2f}s: {ours / plain:.2f}x (target <= {TARGET}x)"
                )
        finally:
            s3.stop()
        if args.only in (None, "setup"):
            first, later = bench_setup(work, args.jobs)
            print(
                f"volume set-up per job ({args.jobs} jobs): first job of a workflow"
                f" {first * 1e6:.0f} us, a later job {later * 1e6:.0f} us (medians)"
            )
    return 0 if all(ratio <= TARGET for ratio in ratios) else 1


if __name__ == "__main__":
    sys.exit(main())
