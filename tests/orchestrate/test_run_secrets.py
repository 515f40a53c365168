"""What a node is told of a run's secrets when it starts it (``NodeAgent.RunSecrets``), over
the real engine with a scripted node: values for live runs only, resolved for the
submitter, one token per workflow, and a child workflow submitted with that token resolving
the same user's secrets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.secret_stack import Person, SecretStack, secret_stack
from support.sql_stack import ADMIN

from fuzzball_core.errors import InvalidArgument, NotFound, PermissionDenied
from fuzzball_core.orchestrate.run_secrets import CallingNode, RunSecretsService, registry_host
from fuzzball_core.service.secrets import Family, Secrets
from fuzzball_core.store.models import Workflow
from fuzzball_core.vocabulary import CredentialKind

VALUE = "run-secret-value-Xv7"
JOB = """\
version: v4
jobs:
  show:
    image: {uri: docker://alpine:latest}
    command: [env]
    env: [PLAIN=1, DB=secret://user/db, KEY=secret://group/conf/key]
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
    body = {"name": "db", "scope": "SECRET_SCOPE_USER", "value": {"value": VALUE}}
    secrets.secrets.create(who, Family.SECRETS, body)
    conf = {"name": "conf", "scope": "SECRET_SCOPE_GROUP", "map": {"map": {"key": "k-value"}}}
    secrets.secrets.create(who, Family.SECRETS, conf)
    return person


def _service(stack: SecretStack) -> RunSecretsService:
    engine = stack.stack.engine
    return stack.stack._on_loop(
        lambda: RunSecretsService.attach(engine, stack.service.accounts, stack.secrets)
    )


def _start(stack: SecretStack, token: str, spec: str = JOB) -> tuple[str, int]:
    who = stack.service.authenticate(token)
    workflow_id = stack.stack.start_workflow(who, raw_specification=spec, name="w")
    return workflow_id, stack.stack._run_id(workflow_id, "jobs.show", None)


def _for_run(stack: SecretStack, service: RunSecretsService, run_id: int) -> Any:
    """What the node the run is placed on (the stack's first) is told as it starts it."""
    node = CallingNode(stack.stack._node_ids[0])
    return stack.stack._on_loop(lambda: service.for_run(run_id, node))


def test_a_live_runs_env_references_are_resolved_for_its_submitter(secrets, alice):
    service = _service(secrets)
    _, run_id = _start(secrets, alice.token)

    reply = _for_run(secrets, service, run_id)

    assert dict(reply.env) == {"DB": VALUE, "KEY": "k-value"}


def test_the_assignment_carries_the_reference_never_the_value(secrets, alice):
    workflow_id, _ = _start(secrets, alice.token)
    stored = secrets.stack.get_workflow(secrets.service.authenticate(alice.token), workflow_id)

    assert VALUE not in repr(stored)
    with secrets.sessions() as session:
        row = session.get(Workflow, workflow_id)
        assert row is not None and "secret://user/db" in row.definition_v4
        assert VALUE not in row.definition_v4 + row.raw_specification


def test_a_run_that_ended_is_told_nothing(secrets, alice):
    service = _service(secrets)
    workflow_id, run_id = _start(secrets, alice.token)
    secrets.stack.set_stage(workflow_id, "jobs.show", "FINISHED")

    with pytest.raises(NotFound):
        _for_run(secrets, service, run_id)


def test_one_token_per_workflow_acting_for_the_submitter_with_the_workflow_credential(
    secrets, alice
):
    service = _service(secrets)
    workflow_id, run_id = _start(secrets, alice.token)

    first = _for_run(secrets, service, run_id).workflow_token
    again = _for_run(secrets, service, run_id).workflow_token
    who = secrets.service.authenticate(first)

    assert first == again
    assert (who.user_id, who.credential, who.workflow_id) == (
        alice.user_id,
        CredentialKind.WORKFLOW,
        workflow_id,
    )


def test_a_child_workflow_submitted_with_the_token_resolves_the_same_users_secrets(secrets, alice):
    service = _service(secrets)
    _, run_id = _start(secrets, alice.token)
    token = _for_run(secrets, service, run_id).workflow_token

    child_id, child_run = _start(secrets, token)
    reply = _for_run(secrets, service, child_run)

    assert child_id
    assert reply.env["DB"] == VALUE


def test_the_workflow_token_may_not_create_secrets(secrets, alice):
    service = _service(secrets)
    _, run_id = _start(secrets, alice.token)
    who = secrets.service.authenticate(_for_run(secrets, service, run_id).workflow_token)
    body = {"name": "x", "scope": "SECRET_SCOPE_USER", "value": {"value": "v"}}

    with pytest.raises(PermissionDenied):
        secrets.secrets.create(who, Family.SECRETS, body)


def test_a_reference_to_a_missing_secret_names_the_field_and_reference(secrets, alice):
    service = _service(secrets)
    _, run_id = _start(secrets, alice.token, JOB.replace("secret://user/db", "secret://user/no"))

    with pytest.raises(NotFound, match=r"jobs\.show\.env\.DB: secret://user/no: no such secret"):
        _for_run(secrets, service, run_id)


def test_a_map_secret_without_a_key_says_which_keys_there_are(secrets, alice):
    service = _service(secrets)
    spec = JOB.replace("secret://group/conf/key", "secret://group/conf")
    _, run_id = _start(secrets, alice.token, spec)

    with pytest.raises(InvalidArgument, match=r"needs a key .*keys: key"):
        _for_run(secrets, service, run_id)


@pytest.mark.parametrize(
    ("uri", "host"),
    [
        ("docker://alpine:latest", "docker.io"),
        ("docker://library/alpine", "docker.io"),
        ("docker://127.0.0.1:5000/private/app:1", "127.0.0.1:5000"),
        ("docker://ghcr.io/org/app", "ghcr.io"),
        ("localhost/app", "localhost"),
    ],
)
def test_the_registry_host_of_an_image_uri(uri, host):
    assert registry_host(uri) == host


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (JOB.replace("secret://user/db", "secret://nowhere/db"), "jobs.show.env[1]"),
        (
            JOB.replace("{uri: docker://alpine:latest}", "{uri: docker://x/y, secret: hunter2}"),
            "jobs.show.image.secret",
        ),
    ],
)
def test_a_malformed_reference_is_refused_at_submission_naming_its_field(
    secrets, alice, spec, field
):
    who = secrets.service.authenticate(alice.token)

    with pytest.raises(InvalidArgument) as refused:
        secrets.stack.start_workflow(who, raw_specification=spec, name="w")

    assert field in [detail["field"] for detail in refused.value.details]
    assert "hunter2" not in str(refused.value)


ORGANIZATION_JOB = JOB.replace(
    "env: [PLAIN=1, DB=secret://user/db, KEY=secret://group/conf/key]",
    "env: [PW=secret://organization/orgpriv]",
)
PLAIN_JOB = JOB.replace(
    "env: [PLAIN=1, DB=secret://user/db, KEY=secret://group/conf/key]", "env: [PLAIN=1]"
)
CLUSTER_JOB = JOB.replace(
    "env: [PLAIN=1, DB=secret://user/db, KEY=secret://group/conf/key]",
    "env: [PW=secret://cluster/shared]",
)


def _private_organization_secret(stack: SecretStack, owner: Person) -> None:
    who = stack.service.authenticate(owner.token)
    body = {"name": "orgpriv", "private": True, "value": {"value": VALUE}}
    stack.secrets.create(who, Family.ORGANIZATION, body)


def _cluster_secret(stack: SecretStack) -> None:
    body = {"name": "shared", "value": {"value": VALUE}}
    stack.secrets.create(ADMIN, Family.CLUSTER, body)


def test_a_private_organization_secret_resolves_for_a_workflow_of_an_owner(secrets, alice):
    _private_organization_secret(secrets, alice)
    service = _service(secrets)
    _, run_id = _start(secrets, alice.token, ORGANIZATION_JOB)

    assert _for_run(secrets, service, run_id).env["PW"] == VALUE


def test_a_private_organization_secret_is_no_such_secret_to_a_members_workflow(secrets, alice):
    _private_organization_secret(secrets, alice)
    bob = secrets.member("acme", "bob@acme.example")
    service = _service(secrets)
    _, run_id = _start(secrets, bob.token, ORGANIZATION_JOB)

    with pytest.raises(NotFound) as refused:
        _for_run(secrets, service, run_id)

    assert str(refused.value) == "jobs.show.env.PW: secret://organization/orgpriv: no such secret"


def test_a_members_child_workflow_reads_no_private_organization_secret(secrets, alice):
    _private_organization_secret(secrets, alice)
    bob = secrets.member("acme", "bob@acme.example")
    service = _service(secrets)
    _, run_id = _start(secrets, bob.token, PLAIN_JOB)
    token = _for_run(secrets, service, run_id).workflow_token
    _, child_run = _start(secrets, token, ORGANIZATION_JOB)

    with pytest.raises(NotFound, match="no such secret"):
        _for_run(secrets, service, child_run)


def test_a_cluster_secret_is_no_such_secret_to_a_workflow_of_a_user_who_is_no_administrator(
    secrets, alice
):
    _cluster_secret(secrets)
    service = _service(secrets)
    _, run_id = _start(secrets, alice.token, CLUSTER_JOB)

    with pytest.raises(NotFound) as refused:
        _for_run(secrets, service, run_id)

    assert str(refused.value) == "jobs.show.env.PW: secret://cluster/shared: no such secret"


def test_a_cluster_secret_resolves_for_a_workflow_of_a_cluster_administrator(secrets, alice):
    _cluster_secret(secrets)
    carol = secrets.member("acme", "carol@acme.example", cluster_admin=True)
    service = _service(secrets)
    _, run_id = _start(secrets, carol.token, CLUSTER_JOB)

    assert _for_run(secrets, service, run_id).env["PW"] == VALUE


def test_a_refused_image_secret_at_submission_reads_as_a_missing_one(secrets, alice):
    _cluster_secret(secrets)
    who = secrets.service.authenticate(alice.token)

    with pytest.raises(NotFound) as refused:
        secrets.secrets.credentials(
            Secrets.owner_of(who), "secret://cluster/shared", where="jobs.show.image.secret"
        )

    assert str(refused.value) == "jobs.show.image.secret: secret://cluster/shared: no such secret"
