"""Volume egress on a real cluster: once every job and service mounting a volume has ended,
its ``egress`` files are sent to S3 from the node holding the volume's data.

Orchestrate runs in this process with two Substrate agents of their own work directories,
so a per-workflow volume lives on one node only and an egress placed on the other would
find nothing to send. S3 is moto's server mode (``support.s3_stand_in``): it speaks S3's
wire protocol over HTTP on loopback and refuses requests not signed with its one access key,
which makes it the best stand-in for S3 here; the key reaches the node only through a
cluster s3 secret.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.cluster import Cluster, LocalRegistry
from support.s3_stand_in import S3StandIn

from fuzzball_core.orchestrate.transfer_events import size_text
from fuzzball_core.service.secrets import Family

pytestmark = [pytest.mark.root, pytest.mark.slow]

BUCKET = "e2e-results"
SECRET = "egress-bucket"
#: what the writing job puts in the volume: 1..40000, one number a line
NUMBERS = "".join(f"{n}\n" for n in range(1, 40_001)).encode()

WRITE_ON_NODE_2 = """\
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    egress:
      - source: {uri: "file://out/numbers.txt"}
        destination: {uri: "s3://e2e-results/KEY", secret: "secret://cluster/egress-bucket"}
jobs:
  write:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "mkdir -p /data/out && seq 1 40000 > /data/out/numbers.txt"]
    resource: {annotations: {e2e/node: "2"}}
    mounts: {/data: data}
"""

SERVICE_AND_JOB = """\
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    egress:
      - source: {uri: "file://service.log"}
        destination: {uri: "s3://e2e-results/KEY", secret: "secret://cluster/egress-bucket"}
services:
  writer:
    image: {uri: docker://alpine:latest}
    command:
      - /bin/sh
      - -c
      - >-
        trap 'sleep 1; echo stopped >> /data/service.log; exit 0' TERM;
        while true; do echo tick >> /data/service.log; sleep 0.1; done
    mounts: {/data: data}
jobs:
  work:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "sleep 1"]
    mounts: {/data: data}
    depends-on: [{name: writer, status: RUNNING}]
"""

MISSING = """\
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    egress:
      - source: {uri: "file://never/written.txt"}
        destination: {uri: "s3://e2e-results/KEY", secret: "secret://cluster/egress-bucket"}
jobs:
  idle:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "true"]
    mounts: {/data: data}
"""

FAILING_JOB = """\
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    egress:
      - source: {uri: "file://partial.txt"}
        destination: {uri: "s3://e2e-results/KEY", secret: "secret://cluster/egress-bucket"}
jobs:
  crash:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo partial results > /data/partial.txt; exit 3"]
    mounts: {/data: data}
"""

INGRESS_AND_EGRESS = """\
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    ingress:
      - source: {uri: "s3://e2e-results/inputs/lower.txt", secret: "secret://cluster/egress-bucket"}
        destination: {uri: "file://in/lower.txt"}
    egress:
      - source: {uri: "file://out/upper.txt"}
        destination: {uri: "s3://e2e-results/KEY", secret: "secret://cluster/egress-bucket"}
jobs:
  shout:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "cd /data; mkdir -p out; tr a-z A-Z < in/lower.txt > out/upper.txt"]
    mounts: {/data: data}
"""

HOLD = """\
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    egress:
      - source: {uri: "file://held.txt"}
        destination: {uri: "s3://e2e-results/KEY", secret: "secret://cluster/egress-bucket"}
jobs:
  hold:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo held > /data/held.txt; sleep 600"]
    mounts: {/data: data}
"""


@pytest.fixture(scope="module")
def s3() -> Iterator[S3StandIn]:
    stand_in = S3StandIn.start()
    stand_in.client().create_bucket(Bucket=BUCKET)
    yield stand_in
    stand_in.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, s3: S3StandIn) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("egress")
    registry = LocalRegistry(directory / "registry")
    built = Cluster(directory / "cluster", registry.url, agents=2, annotations_per_node=True)
    try:
        orchestrate = built.orchestrate
        body = {"name": SECRET, "s3": s3.secret_fields()}
        orchestrate.call(
            lambda: orchestrate.orchestrate.secrets.create(orchestrate.admin, Family.CLUSTER, body)
        )
        yield built
    finally:
        built.close()
        registry.stop()


def _object(s3: S3StandIn, key: str) -> bytes | None:
    try:
        return bytes(s3.client().get_object(Bucket=BUCKET, Key=key)["Body"].read())
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise


def _run(cluster: Cluster, spec: str, key: str, timeout: float = 120) -> tuple[Any, str]:
    """Start ``spec`` sending to ``key``; its final view and its events' messages."""
    workflow_id = cluster.orchestrate.start_workflow(spec.replace("KEY", key), name=key)
    view = cluster.orchestrate.wait_for(workflow_id, timeout=timeout)
    return view, _messages(cluster, workflow_id)


def _messages(cluster: Cluster, workflow_id: str) -> str:
    return "\n".join(e.message for e in cluster.orchestrate.events(workflow_id))


def _stage(view: Any, name: str) -> Any:
    return next(stage for stage in view.stages if stage.name == name)


def test_a_file_a_job_wrote_is_sent_to_s3_from_the_node_holding_the_volume(cluster, s3) -> None:
    view, messages = _run(cluster, WRITE_ON_NODE_2, "runs/numbers.txt")

    assert view.status == "FINISHED", messages
    assert _object(s3, "runs/numbers.txt") == NUMBERS
    egress = _stage(view, "volumes.data.egress")
    assert egress.kind == "file" and egress.status == "FINISHED"
    assert egress.node_ids == _stage(view, "jobs.write").node_ids
    size = size_text(len(NUMBERS))
    sent = f"volumes.data.egress[0]: sent s3://{BUCKET}/runs/numbers.txt, {size} in"
    assert sent in messages


def test_egress_waits_for_a_service_writing_to_the_volume_to_stop(cluster, s3) -> None:
    view, messages = _run(cluster, SERVICE_AND_JOB, "runs/service.log")

    assert view.status == "FINISHED", messages
    sent = _object(s3, "runs/service.log")
    assert sent is not None and sent.startswith(b"tick\n")
    # the service's last words, written a second after it was told to stop, were sent
    assert sent.endswith(b"stopped\n")
    service, egress = _stage(view, "services.writer"), _stage(view, "volumes.data.egress")
    assert egress.started_at is not None and service.finished_at is not None
    assert egress.started_at >= service.finished_at


def test_egress_of_a_file_that_is_not_there_fails_the_workflow_naming_the_transfer(
    cluster, s3
) -> None:
    view, messages = _run(cluster, MISSING, "runs/missing.txt")

    assert view.status == "FAILED", messages
    assert "volumes.data.egress[0]" in view.error
    assert "written.txt is not a file in the volume" in view.error
    assert _object(s3, "runs/missing.txt") is None


def test_the_results_of_a_failed_job_are_still_sent_and_the_workflow_fails_naming_the_job(
    cluster, s3
) -> None:
    view, messages = _run(cluster, FAILING_JOB, "runs/partial.txt")

    assert view.status == "FAILED", messages
    assert view.error.startswith("jobs.crash failed")
    assert _stage(view, "volumes.data.egress").status == "FINISHED"
    assert _object(s3, "runs/partial.txt") == b"partial results\n"


def test_the_s3_secret_never_appears_in_events_logs_or_the_agents_log(cluster, s3) -> None:
    workflow_id = cluster.orchestrate.start_workflow(
        WRITE_ON_NODE_2.replace("KEY", "runs/secret-check.txt"), name="secret-check"
    )
    view = cluster.orchestrate.wait_for(workflow_id, timeout=120)
    events = cluster.orchestrate.events(workflow_id)
    shown = json.dumps(
        [{"message": e.message, "data": dict(getattr(e, "data", None) or {})} for e in events],
        default=str,
    )
    shown += cluster.orchestrate.logs(workflow_id)
    shown += "".join(agent.log() for agent in cluster.agents)

    assert view.status == "FINISHED", shown
    assert "volume_transfer" in {e.kind for e in events}
    assert s3.secret_access_key not in shown


def test_a_file_fetched_by_ingress_and_changed_by_the_job_is_sent_by_egress(cluster, s3) -> None:
    s3.client().put_object(Bucket=BUCKET, Key="inputs/lower.txt", Body=b"lattice spacing\n")

    view, messages = _run(cluster, INGRESS_AND_EGRESS, "runs/upper.txt")

    assert view.status == "FINISHED", messages
    assert "volumes.data.ingress[0]: fetched" in messages
    assert _object(s3, "runs/upper.txt") == b"LATTICE SPACING\n"


def test_a_workflow_stopped_by_its_user_sends_nothing(cluster, s3) -> None:
    workflow_id = cluster.orchestrate.start_workflow(
        HOLD.replace("KEY", "runs/held.txt"), name="held"
    )
    cluster.orchestrate.wait_for(
        workflow_id,
        lambda w: _stage(w, "jobs.hold").status == "STARTED",
        timeout=120,
    )
    cluster.orchestrate.stop_workflow(workflow_id)
    view = cluster.orchestrate.wait_for(workflow_id, timeout=60)
    # give a wrongly started egress the time to reach the bucket
    time.sleep(2)

    assert view.status == "CANCELED"
    assert _stage(view, "volumes.data.egress").status == "CANCELED"
    assert _object(s3, "runs/held.txt") is None


def test_a_volume_named_like_another_volumes_egress_is_refused_naming_it(cluster) -> None:
    spec = HOLD.replace("KEY", "x").replace(
        "jobs:", "  data.egress: {reference: volume://user/ephemeral}\njobs:"
    )

    with pytest.raises(Exception, match=r"volumes\.data\.egress: the volume data\.egress"):
        cluster.orchestrate.start_workflow(spec)
