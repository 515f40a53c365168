"""Orchestrate SIGKILLed and restarted while a job runs: the job keeps running on its node,
finishes, and its result is recorded exactly once."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.cluster import (
    LocalRegistry,
    OrchestrateProcess,
    SubstrateProcess,
    build_orchestrate,
    cluster_config,
    free_port,
    write_config,
)

from fuzzball_core.config import parse_config
from fuzzball_core.orchestrate.server import Orchestrate
from fuzzball_core.service.views import WorkflowView

pytestmark = [pytest.mark.root, pytest.mark.slow]

WORKFLOW = """
version: v1
jobs:
  steady:
    image: {uri: docker://alpine:latest}
    script: |
      #!/bin/sh
      echo start
      sleep 4
      echo done
"""


class Reader:
    """The store as a test sees it while another process serves it."""

    def __init__(self, orchestrate: Orchestrate) -> None:
        self.service = orchestrate.service
        self.admin = self.service.create_account("e2e-admin", admin=True)[0]

    def workflow(self, workflow_id: str) -> WorkflowView:
        return self.service.get_workflow(self.admin, workflow_id)

    def logs(self, workflow_id: str) -> str:
        return "".join(c.data for c in self.service.read_logs(self.admin, workflow_id))

    def wait(self, what: str, condition: Callable[[], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting until {what}"
            time.sleep(0.05)


@pytest.fixture
def processes(tmp_path: Path, local_registry: LocalRegistry) -> Iterator[dict[str, object]]:
    port = free_port()
    base = cluster_config(tmp_path, local_registry.url, grpc_port=port)
    orchestrate_config = write_config(tmp_path / "orchestrate.yaml", base)
    agent_config = cluster_config(
        tmp_path,
        local_registry.url,
        grpc_port=port,
        substrate={"node-name": "steady-node", "work-dir": str(tmp_path / "node"), "cores": 2},
    )
    orchestrate = OrchestrateProcess(orchestrate_config, tmp_path / "orchestrate.log")
    write_config(tmp_path / "agent.yaml", agent_config)
    started: dict[str, object] = {"orchestrate": orchestrate, "config": base}
    try:
        yield started
    finally:
        agent = started.get("agent")
        if isinstance(agent, SubstrateProcess):
            agent.stop()
        orchestrate.stop()


def test_orchestrate_killed_mid_run_loses_nothing(
    processes: dict[str, object], tmp_path: Path
) -> None:
    # The workflow is stored before Orchestrate starts; the serving process picks it up
    # from the database, as it would after any restart.
    reader = Reader(build_orchestrate(parse_config(processes["config"])))
    workflow_id = reader.service.start_workflow(reader.admin, raw_specification=WORKFLOW)
    orchestrate = processes["orchestrate"]
    assert isinstance(orchestrate, OrchestrateProcess)
    orchestrate.start()
    processes["agent"] = SubstrateProcess(tmp_path / "agent.yaml", tmp_path / "agent.log")
    # generous: on a loaded machine the image pull and the agent's start take a while
    reader.wait(
        "the job printed its first line", lambda: reader.logs(workflow_id) == "start\n", timeout=180
    )

    orchestrate.kill()
    time.sleep(0.5)
    orchestrate.start()

    reader.wait("the workflow ended", lambda: reader.workflow(workflow_id).status != "STARTED", 60)
    view = reader.workflow(workflow_id)
    assert view.status == "FINISHED", (view, (tmp_path / "agent.log").read_text()[-3000:])
    assert reader.logs(workflow_id) == "start\ndone\n"
    events = reader.service.list_events(reader.admin, workflow_id)
    kinds = [e.kind for e in events if e.stage_name == "jobs.steady"]
    assert kinds.count("scheduled") == 1
    assert kinds.count("container_exited") == 1
    assert kinds.count("stage_finished") == 1
