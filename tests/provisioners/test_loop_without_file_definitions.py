"""Orchestrate builds its provisioning loop whether or not its configuration file defines
anything, so definitions from the central configuration alone are used; while there are
none, submission judges jobs by the registered nodes alone, as before."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from support.scripted_provisioner import ScriptedProvisioner

from fuzzball_core.config import parse_config
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate.central_config import CentralConfig
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.node_hub import NodeHub
from fuzzball_core.orchestrate.provisioner_runner import build_provisioning
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.orchestrate.service import SqlOrchestrateService
from fuzzball_core.scheduling import Resources
from fuzzball_core.service.views import Principal
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_plugins.schedulers.default import DefaultScheduler

GIB = 1024**3

BIG_JOB = """\
version: v1
jobs:
  big:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    resource: {cpu: {cores: 16}, memory: {size: 1GiB}}
"""


class Cluster:
    """An engine and its service whose loop was built from a file with no definitions."""

    def __init__(self, directory: Path) -> None:
        database = connect(f"sqlite:///{directory / 'orchestrate.db'}")
        migrate(database)
        self.sessions = session_factory(database)
        self.engine = Engine(self.sessions, DefaultScheduler(), NodeHub(), lease_seconds=15)
        self.service = SqlOrchestrateService(self.sessions, self.engine)
        config = parse_config({"data-dir": str(directory / "data")})
        self.provisioning: Provisioning = build_provisioning(config, self.engine, None)
        self.engine.context.provisioning = self.provisioning
        self.user: Principal = self.service.create_account(f"user-{uuid.uuid4().hex[:6]}")[0]
        self.box = SecretBox(directory / "data")

    def central(self) -> CentralConfig:
        """The central configuration over this loop, its drivers scripted."""
        return CentralConfig(
            self.sessions, self.provisioning, lambda _: ScriptedProvisioner(), box=self.box
        )

    def submit(self, text: str) -> str:
        return self.service.start_workflow(self.user, raw_specification=text, name="wf")


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    return Cluster(tmp_path)


def central_document(definition_id: str, cores: int) -> str:
    definition = {"id": definition_id, "driver": "scripted", "cores": cores, "memory": "8GiB"}
    return yaml.safe_dump({"provisioner": {"definitions": [definition]}})


def test_a_file_without_definitions_still_gets_an_idle_loop(cluster):
    assert cluster.provisioning.definitions == {}
    assert cluster.provisioning.records() == []


def test_with_no_node_and_no_definition_a_job_is_accepted_to_wait(cluster):
    assert cluster.submit(BIG_JOB)


def test_with_no_definition_a_job_no_node_could_hold_is_refused_naming_the_nodes_reason(cluster):
    cluster.engine.register_node("small", Resources(4, 8 * GIB), {})
    with pytest.raises(InvalidArgument) as refused:
        cluster.submit(BIG_JOB)
    assert "jobs.big.resource" in refused.value.message
    assert "provisioner definition" not in refused.value.message


def test_a_central_definition_makes_a_job_only_it_could_hold_acceptable(cluster):
    cluster.engine.register_node("small", Resources(4, 8 * GIB), {})
    central = cluster.central()
    central.set(central_document("wide", 32))
    assert cluster.submit(BIG_JOB)


def test_a_job_no_central_definition_could_hold_is_refused_listing_each(cluster):
    cluster.engine.register_node("small", Resources(4, 8 * GIB), {})
    central = cluster.central()
    central.set(central_document("narrow", 8))
    with pytest.raises(InvalidArgument, match="narrow: 16 cores asked, its nodes have 8"):
        cluster.submit(BIG_JOB)


def test_the_loop_built_from_the_file_takes_central_definitions(cluster):
    central = cluster.central()
    central.set(central_document("wide", 32))
    assert sorted(cluster.provisioning.definitions) == ["wide"]
