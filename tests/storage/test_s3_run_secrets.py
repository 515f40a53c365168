"""An s3:// ingress source's s3 secret reaches the node as the run starts
(``RunSecretsResponse.transfer_s3``), resolved for the submitter, over the real engine with a
scripted node; the workflow's stored definition keeps the reference only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.secret_stack import Person, SecretStack, secret_stack

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate.run_secrets import CallingNode, RunSecretsService
from fuzzball_core.service.secrets import Family

SECRET_KEY = "s3-secret-key-Wq4"
SPEC = """\
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    ingress:
      - source: {uri: "s3://inputs/runs/in.bin", secret: "secret://user/bucket"}
        destination: {uri: "file://in.bin"}
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


def _for_run(stack: SecretStack, token: str, spec: str = SPEC):
    service = stack.stack._on_loop(
        lambda: RunSecretsService.attach(stack.stack.engine, stack.service.accounts, stack.secrets)
    )
    who = stack.service.authenticate(token)
    workflow_id = stack.stack.start_workflow(who, raw_specification=spec, name="w")
    run_id = stack.stack._run_id(workflow_id, "jobs.show", None)
    return stack.stack._on_loop(
        lambda: service.for_run(run_id, CallingNode(stack.stack._node_ids[0]))
    )


def test_an_s3_sources_secret_reaches_the_node_as_s3_credentials(secrets, alice) -> None:
    reply = _for_run(secrets, alice.token)

    found = reply.transfer_s3["data/0"]
    assert (found.access_key_id, found.secret_access_key) == ("AKIDALICE", SECRET_KEY)
    assert (found.region, found.endpoint) == ("eu-west-1", "http://127.0.0.1:9")
    assert dict(reply.ingress_authorization) == {}


def test_an_s3_source_with_an_http_secret_is_refused_naming_the_field(secrets, alice) -> None:
    spec = SPEC.replace("secret://user/bucket", "secret://user/web")

    with pytest.raises(InvalidArgument) as refused:
        _for_run(secrets, alice.token, spec)

    assert refused.value.message.startswith("volumes.data.ingress[0].source.secret:")
    assert "holds no S3 credentials" in refused.value.message
