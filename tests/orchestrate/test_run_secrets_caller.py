"""``NodeAgent.RunSecrets`` answers a node about the runs placed on it only: a provisioned
instance's registration token speaks for the node registered under its name, the shared node
token for the node the request names. Any other run is refused exactly as a run that does
not exist is (no oracle of which runs are live), whether it would have been answered from
memory or from the store."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc
import pytest
from support.engine_workflows import HELLO
from support.scripted_provisioner import ScriptedProvisioner

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.config import ProvisionerConfig
from fuzzball_core.drivers import NodeBootstrap
from fuzzball_core.orchestrate.node_api import NodeAgentServicer
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.orchestrate.run_secrets import RunSecretsService
from fuzzball_core.service.secrets import Secrets
from fuzzball_core.store.secret_box import SecretBox

NODE_TOKEN = "cluster-node-token"
#: a run id no run has (the largest the runs' id column holds)
UNKNOWN_RUN = 2**31 - 1


class Aborted(Exception):
    """What ``context.abort`` raises, as gRPC's does."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, details)
        self.code, self.details = code, details


@dataclass
class Context:
    """A servicer context presenting ``token``."""

    token: str

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


@dataclass
class Cluster:
    """The engine harness with two provisioned instances registered as nodes: ``busy`` runs
    the workflow's job, ``idle`` runs nothing."""

    servicer: NodeAgentServicer
    tokens: dict[str, str]
    node_ids: dict[str, str]
    run_id: int

    def ask(self, token: str, run_id: int, node_id: str = "") -> node_pb2.RunSecretsResponse:
        request = node_pb2.RunSecretsRequest(run_id=run_id, node_id=node_id)
        return asyncio.run(self.servicer.RunSecrets(request, Context(token)))

    def refusal(self, token: str, run_id: int, node_id: str = "") -> tuple[grpc.StatusCode, str]:
        """The code and details ``run_id`` is refused with (its id written RUN)."""
        with pytest.raises(Aborted) as refused:
            self.ask(token, run_id, node_id)
        return refused.value.code, refused.value.details.replace(str(run_id), "RUN")

    def unknown(self, token: str, node_id: str = "") -> tuple[grpc.StatusCode, str]:
        """The refusal of a run that does not exist."""
        return self.refusal(token, UNKNOWN_RUN, node_id)


def _provisioned(harness, tmp_path, *, secrets_from_memory: bool) -> Cluster:
    config = ProvisionerConfig.model_validate(
        {
            "definitions": [
                {"id": "gce", "driver": "scripted", "cores": 4, "memory": "8GiB", "max-nodes": 3}
            ]
        }
    )
    driver = ScriptedProvisioner()
    provisioning = Provisioning(config, {"scripted": driver}, node_address="127.0.0.1:1")
    provisioning.create("gce", 3)
    busy, idle, unregistered = driver.launches
    tokens = {
        role: NodeBootstrap.parse(launch.user_data).registration_token
        for role, launch in (("busy", busy), ("idle", idle), ("unregistered", unregistered))
    }

    def attach() -> RunSecretsService:
        secrets = Secrets(harness.engine.sessions, SecretBox(tmp_path))
        return RunSecretsService.attach(harness.engine, harness.service.accounts, secrets)

    # attached before the assignment, the workflow's token is minted in its pass and the run
    # answered from memory; attached after, the run is answered from the store
    run_secrets = attach() if secrets_from_memory else None
    node_ids = {"busy": harness.node(busy.name)}
    harness.submit(HELLO)  # placed on the only node there is
    (assignment,) = harness.assignments()
    node_ids["idle"] = harness.node(idle.name)
    servicer = NodeAgentServicer(
        harness.engine,
        harness.hub,
        NODE_TOKEN,
        run_secrets=run_secrets or attach(),
        provisioning=provisioning,
    )
    return Cluster(servicer, tokens, node_ids, assignment.run_id)


@pytest.fixture(params=[True, False], ids=["from-memory", "from-the-store"])
def cluster(request, harness, tmp_path) -> Cluster:
    return _provisioned(harness, tmp_path, secrets_from_memory=request.param)


def test_an_instances_token_is_answered_for_the_run_placed_on_its_node(cluster):
    reply = cluster.ask(cluster.tokens["busy"], cluster.run_id)

    assert reply.workflow_token


def test_an_instances_token_naming_its_own_node_is_answered(cluster):
    reply = cluster.ask(cluster.tokens["busy"], cluster.run_id, cluster.node_ids["busy"])

    assert reply.workflow_token


def test_another_registered_instances_token_is_refused_as_for_an_unknown_run(cluster):
    token = cluster.tokens["idle"]

    assert cluster.refusal(token, cluster.run_id) == cluster.unknown(token)
    assert cluster.unknown(token) == (grpc.StatusCode.NOT_FOUND, "run RUN is not running")


def test_an_instances_token_naming_the_runs_node_is_refused_as_for_an_unknown_run(cluster):
    token, runs_node = cluster.tokens["idle"], cluster.node_ids["busy"]

    assert cluster.refusal(token, cluster.run_id, runs_node) == cluster.unknown(token, runs_node)


def test_an_unregistered_instances_token_is_refused_as_for_an_unknown_run(cluster):
    token = cluster.tokens["unregistered"]

    assert cluster.refusal(token, cluster.run_id) == cluster.unknown(token)


def test_the_node_token_is_answered_for_a_run_placed_on_the_node_it_names(cluster):
    reply = cluster.ask(NODE_TOKEN, cluster.run_id, cluster.node_ids["busy"])

    assert reply.workflow_token


def test_the_node_token_naming_another_node_is_refused_as_for_an_unknown_run(cluster):
    idle = cluster.node_ids["idle"]

    assert cluster.refusal(NODE_TOKEN, cluster.run_id, idle) == cluster.unknown(NODE_TOKEN, idle)


def test_the_node_token_naming_no_node_is_refused_naming_the_field_whatever_the_run(cluster):
    code, details = cluster.refusal(NODE_TOKEN, cluster.run_id)

    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("node_id:")
    assert cluster.unknown(NODE_TOKEN) == (code, details)


def test_a_run_id_past_the_id_columns_range_is_refused_as_an_unknown_run(cluster):
    token = cluster.tokens["busy"]

    assert cluster.refusal(token, 2**63 - 1) == cluster.unknown(token)
