"""Volume egress to S3 on a node, against moto's server mode (the stand-in for S3: its wire
protocol over HTTP, signatures enforced; ``support.s3_stand_in``): a volume's files reach
their s3:// destinations signed with the s3 secret, and a link in the volume never sends a
host file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError
from support.s3_stand_in import REGION, S3StandIn

from fuzzball_core.errors import Unavailable
from fuzzball_core.substrate.egress import send_egress
from fuzzball_core.substrate.s3_transfer import S3Credentials

BUCKET = "results"
RESULT = b"energy -4.2\n" * 100_000


@pytest.fixture(scope="module")
def s3() -> Iterator[S3StandIn]:
    stand_in = S3StandIn.start()
    stand_in.client().create_bucket(Bucket=BUCKET)
    yield stand_in
    stand_in.stop()


@pytest.fixture
def volume(tmp_path: Path) -> Path:
    directory = tmp_path / "volume"
    (directory / "out").mkdir(parents=True)
    (directory / "out/result.txt").write_bytes(RESULT)
    return directory


def _secret(s3: S3StandIn, index: int = 0, **changes: str) -> dict[str, S3Credentials]:
    fields = {
        "access_key_id": s3.access_key_id,
        "secret_access_key": s3.secret_access_key,
        "region": REGION,
        "endpoint": s3.endpoint,
        **changes,
    }
    return {f"data/egress/{index}": S3Credentials(**fields)}


def _object(s3: S3StandIn, key: str) -> bytes:
    return bytes(s3.client().get_object(Bucket=BUCKET, Key=key)["Body"].read())


def test_a_volume_file_reaches_its_s3_destination_with_its_size(s3, volume) -> None:
    transfer = {"source": "out/result.txt", "destination": f"s3://{BUCKET}/run-1/result.txt"}

    (report,) = send_egress(volume, "data", [transfer], _secret(s3))

    assert _object(s3, "run-1/result.txt") == RESULT
    assert report.bytes == len(RESULT)


def test_a_wrong_secret_fails_the_transfer_naming_it(s3, volume) -> None:
    transfer = {"source": "out/result.txt", "destination": f"s3://{BUCKET}/run-2/result.txt"}

    with pytest.raises(Unavailable) as failed:
        send_egress(volume, "data", [transfer], _secret(s3, secret_access_key="wrong-Zx1"))

    assert failed.value.message.startswith(
        f"volumes.data.egress[0]: could not send s3://{BUCKET}/run-2/result.txt"
    )
    assert "wrong-Zx1" not in failed.value.message


def test_a_link_to_a_host_file_is_followed_inside_the_volume_never_out(
    s3, volume, tmp_path
) -> None:
    host_file = tmp_path / "shadow"
    host_file.write_bytes(b"root:secret-hash\n")
    (volume / "out/leak").symlink_to(host_file)
    transfer = {"source": "out/leak", "destination": f"s3://{BUCKET}/run-3/leak"}

    with pytest.raises(Unavailable, match=r"volumes\.data\.egress\[0\]: .* is not a file"):
        send_egress(volume, "data", [transfer], _secret(s3))

    with pytest.raises(ClientError, match="404"):
        s3.client().head_object(Bucket=BUCKET, Key="run-3/leak")
