"""End to end with the ``local`` provisioner: a workflow whose job fits no node gets a node
provisioned for it (a real Substrate process started from the instance's user data), runs
there, and the idle node is deprovisioned and its instance deleted once.

Needs the ``fuzzball.provisioners`` entry points of setup.py installed (the editable install
after ``./scripts/install.sh``), docker-registry and the node runtime's prerequisites.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cluster import (
    NODE_TOKEN,
    InProcessOrchestrate,
    LocalRegistry,
    cluster_config,
    free_port,
    have_prerequisites,
)

from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.vocabulary import InstanceState

pytestmark = [pytest.mark.root, pytest.mark.slow]

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)

JOB = """\
version: v1
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo provisioned"]
    resource: {cpu: {cores: 3}, memory: {size: 512MiB}}
"""


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LocalRegistry]:
    running = LocalRegistry(tmp_path / "registry")
    yield running
    running.stop()


@pytest.fixture
def make_orchestrate(
    tmp_path: Path, registry: LocalRegistry
) -> Iterator[Callable[..., InProcessOrchestrate]]:
    """Orchestrate with no node and one ``local`` definition of 4 cores (max 2 nodes, idle
    after 2 s unless ``definition`` says otherwise); its instances are deleted afterwards."""
    made: list[InProcessOrchestrate] = []

    def make(**definition: Any) -> InProcessOrchestrate:
        config: dict[str, Any] = cluster_config(tmp_path, registry.url, grpc_port=free_port())
        base = tmp_path / "node-base.yaml"
        base.write_text(yaml.safe_dump({"images": config["images"], "tls": config["tls"]}))
        settings = {
            "id": "small",
            "driver": "local",
            "cores": 4,
            "memory": "2GiB",
            "max-nodes": 2,
            "idle-timeout": 2,
            "annotations": {"pool": "small"},
            "config": {"state-dir": str(tmp_path / "instances"), "base-config": str(base)},
            **definition,
        }
        config["provisioner"] = {"definitions": [settings]}
        made.append(InProcessOrchestrate(config))
        return made[-1]

    yield make
    for running in made:
        provisioning = loop_of(running)
        for record in provisioning.records([InstanceState.CREATING, InstanceState.CREATED]):
            running.call(lambda r=record, p=provisioning: p.delete(r.id))
        running.close()


@pytest.fixture
def orchestrate(make_orchestrate: Callable[..., InProcessOrchestrate]) -> InProcessOrchestrate:
    return make_orchestrate()


def loop_of(orchestrate: InProcessOrchestrate) -> Provisioning:
    provisioning = orchestrate.orchestrate.engine.context.provisioning
    assert provisioning is not None
    return provisioning


def until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {timeout}s"
        time.sleep(0.2)


def test_a_job_no_node_could_hold_runs_on_a_provisioned_node_deleted_once_idle(orchestrate):
    workflow = orchestrate.start_workflow(JOB)
    view = orchestrate.wait_for(workflow, timeout=120)
    assert view.status == "FINISHED", view
    assert "provisioned" in orchestrate.logs(workflow)
    provisioning = loop_of(orchestrate)
    records = provisioning.records()
    assert len(records) == 1, [(r.state, r.history) for r in records]
    (record,) = records
    until(lambda: record.state is InstanceState.DELETED, 60, "deleted after idling")
    kinds = [kind for _, kind, _ in record.history]
    assert kinds == [
        "instance_requested",
        "instance_registered",
        "instance_idle",
        "instance_deleting",
        "instance_deleted",
    ]
    (node,) = orchestrate.nodes()
    assert node.annotations["pool"] == "small"
    assert node.name == record.name


def test_the_nodes_credentials_are_absent_from_its_log_and_user_data_file(orchestrate, tmp_path):
    workflow = orchestrate.start_workflow(JOB)
    orchestrate.wait_for(workflow, timeout=120)
    (home,) = (tmp_path / "instances").iterdir()
    assert NODE_TOKEN not in (home / "substrate.log").read_text()
    config = yaml.safe_load((home / "config.yaml").read_text())
    token = config["substrate"]["node-token"]
    assert token != NODE_TOKEN
    assert token not in (home / "substrate.log").read_text()
    assert oct((home / "config.yaml").stat().st_mode & 0o777) == "0o600"


def test_a_job_no_definition_could_hold_is_refused_naming_the_definition(orchestrate):
    too_big = JOB.replace("cores: 3", "cores: 64")
    with pytest.raises(Exception, match="small: 64 cores asked, its nodes have 4"):
        orchestrate.start_workflow(too_big)


def test_a_burst_of_20_workflows_never_gets_more_than_max_nodes(make_orchestrate):
    orchestrate = make_orchestrate(**{"max-nodes": 3, "idle-timeout": 120})
    workflows = [orchestrate.start_workflow(JOB, name=f"burst-{n}") for n in range(20)]
    for workflow in workflows:
        assert orchestrate.wait_for(workflow, timeout=240).status == "FINISHED"
    records = loop_of(orchestrate).records()
    assert 1 <= len(records) <= 3
    # a node requested late in the burst may still be starting when the first nodes have
    # run every job: each one requested joins the cluster, under a name of its own
    until(
        lambda: len({node.name for node in orchestrate.nodes()}) == len(records),
        120,
        "every requested node registered",
    )
