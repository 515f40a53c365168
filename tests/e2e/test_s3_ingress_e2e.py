"""S3 volume ingress on a real cluster: a job's volume is filled from an object in moto's
server mode (the stand-in for S3, speaking its wire protocol over HTTP, signatures enforced:
``support.s3_stand_in``) with a cluster s3 secret, the job reads it, the workflow's events say
how many bytes moved, and no event or log line shows the secret key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.cluster import Cluster
from support.s3_stand_in import S3StandIn

from fuzzball_core.service.secrets import Family

pytestmark = [pytest.mark.root, pytest.mark.slow]

BUCKET = "e2e-inputs"
CONTENT = b"lattice 0.8442\n" * 1000
SPEC = """\
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    ingress:
      - source: {uri: "s3://e2e-inputs/runs/in.lj.txt", secret: "secret://cluster/SECRET"}
        destination: {uri: "file://inputs/in.lj.txt"}
jobs:
  read:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "wc -c < /data/inputs/in.lj.txt"]
    mounts: {/data: {volume: data}}
"""


@pytest.fixture(scope="module")
def s3() -> Iterator[S3StandIn]:
    stand_in = S3StandIn.start()
    client = stand_in.client()
    client.create_bucket(Bucket=BUCKET)
    client.put_object(Bucket=BUCKET, Key="runs/in.lj.txt", Body=CONTENT)
    yield stand_in
    stand_in.stop()


def _secret(cluster: Cluster, name: str, fields: dict[str, str]) -> None:
    orchestrate = cluster.orchestrate
    body = {"name": name, "s3": fields}
    orchestrate.call(
        lambda: orchestrate.orchestrate.secrets.create(orchestrate.admin, Family.CLUSTER, body)
    )


def test_a_job_reads_an_object_fetched_from_s3_with_an_s3_secret(cluster, s3) -> None:
    _secret(cluster, "e2e-bucket", s3.secret_fields())

    workflow_id = cluster.orchestrate.start_workflow(
        SPEC.replace("SECRET", "e2e-bucket"), name="s3-in"
    )
    view = cluster.orchestrate.wait_for(workflow_id, timeout=120)
    events = cluster.orchestrate.events(workflow_id)
    messages = " ".join(str(getattr(e, "message", e)) for e in events)

    assert view.status == "FINISHED", messages
    assert cluster.orchestrate.logs(workflow_id).strip() == str(len(CONTENT))
    assert "volumes.data.ingress[0]: fetched s3://e2e-inputs/runs/in.lj.txt" in messages
    assert s3.secret_access_key not in messages + cluster.orchestrate.logs(workflow_id)


def test_a_wrong_s3_secret_fails_the_job_naming_the_transfer(cluster, s3) -> None:
    _secret(cluster, "e2e-wrong", {**s3.secret_fields(), "secretAccessKey": "not-it-4Kq"})

    workflow_id = cluster.orchestrate.start_workflow(
        SPEC.replace("SECRET", "e2e-wrong"), name="s3-bad"
    )
    view = cluster.orchestrate.wait_for(workflow_id, timeout=120)
    messages = " ".join(
        str(getattr(e, "message", e)) for e in cluster.orchestrate.events(workflow_id)
    )

    assert view.status == "FAILED", messages
    assert "volumes.data.ingress[0]: could not fetch s3://e2e-inputs/runs/in.lj.txt" in messages
    assert "not-it-4Kq" not in messages
