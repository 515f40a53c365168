"""Volume ingress from S3 on a node, against moto's server mode.

moto's server is the stand-in for S3 here: it speaks S3's wire protocol over HTTP on
loopback and, as set up by ``support.s3_stand_in``, refuses requests not signed with its
one access key, so these tests show the s3 secret's credentials really sign the transfer.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.s3_stand_in import REGION, S3StandIn

from fuzzball_core.errors import Unavailable
from fuzzball_core.substrate import s3_transfer
from fuzzball_core.substrate.ingress import fetch_ingress
from fuzzball_core.substrate.s3_transfer import S3Credentials
from fuzzball_core.substrate.volumes import WorkflowVolumes

WORKFLOW = "5d0f7a2e-3c1b-4e8d-9f6a-1b2c3d4e5f60"
BUCKET = "inputs"
DATA = bytes(range(256)) * 40_000  # 10 MiB: more than one multipart part


@pytest.fixture(scope="module")
def s3() -> Iterator[S3StandIn]:
    stand_in = S3StandIn.start()
    client = stand_in.client()
    client.create_bucket(Bucket=BUCKET)
    client.put_object(Bucket=BUCKET, Key="runs/in.bin", Body=DATA)
    yield stand_in
    stand_in.stop()


@pytest.fixture
def volumes(tmp_path: Path) -> WorkflowVolumes:
    return WorkflowVolumes(tmp_path / "volumes")


def _secret(s3: S3StandIn, **changes: str) -> dict[str, S3Credentials]:
    fields = {
        "access_key_id": s3.access_key_id,
        "secret_access_key": s3.secret_access_key,
        "region": REGION,
        "endpoint": s3.endpoint,
        **changes,
    }
    return {"data/0": S3Credentials(**fields)}


def _ingress(source: str, destination: str = "in/in.bin") -> dict[str, list[dict[str, str]]]:
    return {"data": [{"source": source, "destination": destination, "secret": "secret://user/s3"}]}


def test_an_s3_object_lands_at_its_destination_signed_with_the_s3_secret(s3, volumes) -> None:
    fetch_ingress(volumes, WORKFLOW, _ingress(f"s3://{BUCKET}/runs/in.bin"), s3=_secret(s3))

    assert (volumes.volume_dir(WORKFLOW, "data") / "in/in.bin").read_bytes() == DATA


def test_a_wrong_secret_fails_the_transfer_naming_it_and_never_showing_the_key(s3, volumes) -> None:
    wrong = _secret(s3, secret_access_key="not-the-key-Q9z")

    with pytest.raises(Unavailable) as failed:
        fetch_ingress(volumes, WORKFLOW, _ingress(f"s3://{BUCKET}/runs/in.bin"), s3=wrong)

    message = failed.value.message
    assert message.startswith(f"volumes.data.ingress[0]: could not fetch s3://{BUCKET}/runs/in.bin")
    assert "not-the-key-Q9z" not in message and s3.access_key_id not in message
    assert not list(volumes.volume_dir(WORKFLOW, "data").rglob("*.bin"))


def test_a_missing_object_fails_the_transfer_naming_the_object(s3, volumes) -> None:
    with pytest.raises(Unavailable) as failed:
        fetch_ingress(volumes, WORKFLOW, _ingress(f"s3://{BUCKET}/runs/absent"), s3=_secret(s3))

    assert f"s3://{BUCKET}/runs/absent" in failed.value.message
    assert "404" in failed.value.message or "Not Found" in failed.value.message


def test_an_object_larger_than_the_volumes_free_space_is_refused_before_it_is_fetched(
    s3, tmp_path
) -> None:
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)], check=True)
    try:
        volumes = WorkflowVolumes(small)
        with pytest.raises(Unavailable) as refused:
            fetch_ingress(volumes, WORKFLOW, _ingress(f"s3://{BUCKET}/runs/in.bin"), s3=_secret(s3))
        assert f"is {len(DATA)} bytes but the volume has" in refused.value.message
        assert not list(small.rglob("*.partial"))
    finally:
        subprocess.run(["umount", str(small)], check=True)


class _OneObjectBucket:
    """An S3 client serving ``body`` for every key, noting where each download wrote."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.written: list[Path] = []

    def head_object(self, **_: Any) -> dict[str, int]:
        return {"ContentLength": len(self.body)}

    def download_file(self, _bucket: str, _key: str, filename: str, **_: Any) -> None:
        self.written.append(Path(filename))
        Path(filename).write_bytes(self.body)


def test_two_s3_fetches_into_one_destination_each_write_a_temporary_file_of_their_own(
    tmp_path, monkeypatch
) -> None:
    bucket = _OneObjectBucket(b"units lj\n")
    monkeypatch.setattr(S3Credentials, "client", lambda _self: bucket)
    target = tmp_path / "in.bin"
    for _ in range(2):
        s3_transfer.download(f"s3://{BUCKET}/in.bin", target, S3Credentials(), field="f")
    first, second = bucket.written
    assert first != second
    assert first.parent == second.parent == tmp_path
    assert target.read_bytes() == b"units lj\n"
    assert [p.name for p in tmp_path.iterdir()] == ["in.bin"]
