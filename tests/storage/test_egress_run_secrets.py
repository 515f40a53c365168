"""An egress destination's s3 secret reaches the node as the egress run starts
(``RunSecretsResponse.transfer_s3`` by ``VOLUME/egress/INDEX``), resolved for the submitter,
over the real engine with a scripted node that ends the job mounting the volume."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from support.secret_stack import Person, SecretStack, secret_stack

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate.run_secrets import CallingNode, RunSecretsService
from fuzzball_core.service.secrets import Family

SECRET_KEY = "s3-egress-key-Zr8"
SPEC = """\
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    egress:
      - source: {uri: "file://out.bin"}
        destination: {uri: "s3://results/out.bin"}
      - source: {uri: "file://log.txt"}
        destination: {uri: "s3://results/log.txt", secret: "secret://user/bucket"}
jobs:
  show:
    image: {uri: docker://alpine:latest}
    command: [ls, /data]
    mounts: {/data: {volume: data}}
"""


@pytest.fixture
def secrets(tmp_path) -> Iterator[SecretStack]:
    with secret_stack(tmp_path) as stack:
        stack.stack.add_node("node-1", 8, 16 * 1024**3)
        yield stack


@pytest.fixture
def alice(secrets: SecretStack) -> Person:
    person = secrets.tenant("acme", "alice@acme.example")
    who = secrets.service.authenticate(person.token)
    fields = {
        "accessKeyId": "AKIDALICE",
        "secretAccessKey": SECRET_KEY,
        "region": "eu-west-1",
        "endpoint": "http://127.0.0.1:9",
    }
    body = {"name": "bucket", "scope": "SECRET_SCOPE_USER", "s3": fields}
    secrets.secrets.create(who, Family.SECRETS, body)
    web = {"name": "web", "scope": "SECRET_SCOPE_USER", "http": {"token": "t"}}
    secrets.secrets.create(who, Family.SECRETS, web)
    return person


def _egress_secrets(stack: SecretStack, token: str, spec: str = SPEC):
    """The RunSecrets answer of the workflow's egress run, once its job has finished."""
    service = stack.stack._on_loop(
        lambda: RunSecretsService.attach(stack.stack.engine, stack.service.accounts, stack.secrets)
    )
    who = stack.service.authenticate(token)
    workflow_id = stack.stack.start_workflow(who, raw_specification=spec, name="w")
    job = stack.stack._run_id(workflow_id, "jobs.show", None)
    stack.stack._send(
        node_pb2.NodeMessage(started=node_pb2.RunStarted(run_id=job, time=time.time())),
        node_pb2.NodeMessage(exited=node_pb2.RunExited(run_id=job, exit_code=0, time=time.time())),
    )
    egress = stack.stack._run_id(workflow_id, "volumes.data.egress", None)
    return stack.stack._on_loop(
        lambda: service.for_run(egress, CallingNode(stack.stack._node_ids[0]))
    )


def test_an_egress_destinations_s3_secret_reaches_the_node_by_its_index(secrets, alice) -> None:
    reply = _egress_secrets(secrets, alice.token)

    assert set(reply.transfer_s3) == {"data/egress/1"}
    found = reply.transfer_s3["data/egress/1"]
    assert (found.access_key_id, found.secret_access_key) == ("AKIDALICE", SECRET_KEY)
    assert (found.region, found.endpoint) == ("eu-west-1", "http://127.0.0.1:9")


def test_an_egress_destination_with_an_http_secret_is_refused_naming_the_field(
    secrets, alice
) -> None:
    spec = SPEC.replace("secret://user/bucket", "secret://user/web")

    with pytest.raises(InvalidArgument) as refused:
        _egress_secrets(secrets, alice.token, spec)

    assert "volumes.data.egress[1].destination.secret" in refused.value.message
    assert SECRET_KEY not in refused.value.message


def test_an_egress_destination_secret_that_is_no_reference_is_refused_at_submission(
    secrets, alice
) -> None:
    spec = SPEC.replace("secret://user/bucket", "bucket")

    with pytest.raises(InvalidArgument) as refused:
        _egress_secrets(secrets, alice.token, spec)

    assert "volumes.data.egress[1].destination.secret" in refused.value.message
