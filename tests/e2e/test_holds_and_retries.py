"""Node holds, step retries and scheduling diagnostics on a real cluster: Orchestrate, two
Substrate agents and real containers.

Tests that only place and release holds share the session's cluster and release every hold
they placed; tests that kill an agent, deprovision a node or need their own node settings get
a fresh cluster (``make_cluster``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from support.cluster import Cluster, InProcessOrchestrate

from fuzzball_core.cli import node_cmd
from fuzzball_core.cli.main import cli

pytestmark = [pytest.mark.root, pytest.mark.slow]

#: Annotations pinning a job to one node of a cluster made with ``annotations_per_node``.
ON_NODE_1 = '{e2e/node: "1"}'
ON_NODE_2 = '{e2e/node: "2"}'


class FuzzballCli:
    """``fuzzball ARGS`` in this process, as an administrator, against a cluster's REST API."""

    def __init__(self, orchestrate: InProcessOrchestrate, config_home: Path) -> None:
        self.env = {"XDG_CONFIG_HOME": str(config_home)}
        name = f"cli-admin-{config_home.parent.name}"
        _, token = orchestrate.call(lambda: orchestrate.service.create_account(name, admin=True))
        self.must("context", "create", "e2e", "--address", orchestrate.rest_url, "--token", token)

    def __call__(self, *args: str) -> Result:
        return CliRunner().invoke(cli, list(args), env=self.env)

    def must(self, *args: str) -> str:
        """The output of a command that has to succeed."""
        result = self(*args)
        assert result.exit_code == 0, (args, result.output, result.exception)
        return result.output


@pytest.fixture
def fuzzball(cluster: Cluster, tmp_path: Path) -> FuzzballCli:
    """The CLI against the session's cluster."""
    return FuzzballCli(cluster.orchestrate, tmp_path / "config-home")


@pytest.fixture
def released(cluster: Cluster) -> Iterator[None]:
    """Every hold on the session's nodes is released after the test, passed or not."""
    yield
    engine = cluster.orchestrate.orchestrate.engine
    for node in ("node-1", "node-2"):
        cluster.orchestrate.call(lambda n=node: engine.release_holds(n, released_by="e2e"))


@pytest.fixture(autouse=True)
def fast_deprovision_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_cmd, "DEPROVISION_POLL_INTERVAL", 0.1)


def _stage(view: Any, name: str = "jobs.work") -> Any:
    return next(s for s in view.stages if s.name == name)


def _job_events(orchestrate: InProcessOrchestrate, workflow_id: str) -> list[Any]:
    """The events of the workflow's job (not those of stages pulling its image)."""
    return [e for e in orchestrate.events(workflow_id) if e.stage_name == "jobs.work"]


def _kinds(orchestrate: InProcessOrchestrate, workflow_id: str) -> list[str]:
    return [e.kind for e in _job_events(orchestrate, workflow_id)]


def _node_names(orchestrate: InProcessOrchestrate) -> dict[str, str]:
    return {node.id: node.name for node in orchestrate.nodes()}


def _exit_nodes(orchestrate: InProcessOrchestrate, workflow_id: str) -> list[str]:
    """The node of each container end of the workflow's job, by name, in order."""
    names = _node_names(orchestrate)
    events = _job_events(orchestrate, workflow_id)
    return [names[e.node_id] for e in events if e.kind == "container_exited"]


def _started_on(orchestrate: InProcessOrchestrate, workflow_id: str) -> str:
    """Wait until the job runs; the name of its node."""
    view = orchestrate.wait_for(workflow_id, lambda w: _stage(w).status == "STARTED")
    (node_id,) = _stage(view).node_ids
    return _node_names(orchestrate)[node_id]


def _wait(what: str, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def _blocked(orchestrate: InProcessOrchestrate, workflow_id: str) -> Callable[[], bool]:
    return lambda: "scheduling_blocked" in _kinds(orchestrate, workflow_id)


def _job(command: str, *, policy: str = "", annotations: str = "", extra: str = "") -> str:
    """A one-job workflow; ``command`` runs under ``/bin/sh -c``."""
    lines = [
        "version: v1",
        "jobs:",
        "  work:",
        "    image: {uri: docker://alpine:latest}",
        f"    command: [/bin/sh, -c, {command!r}]",
    ]
    if policy:
        lines.append(f"    policy: {policy}")
    if annotations:
        lines.append(f"    resource: {{annotations: {annotations}}}")
    return "\n".join(lines) + "\n" + extra


# -- cordon -----------------------------------------------------------------------------------


def test_cordon_keeps_new_work_off_the_node_while_its_running_job_finishes(
    cluster: Cluster, fuzzball: FuzzballCli, released: None
) -> None:
    orchestrate = cluster.orchestrate
    running = orchestrate.start_workflow(
        _job("sleep 2; echo done", annotations=ON_NODE_1), name="running"
    )
    _started_on(orchestrate, running)

    fuzzball.must("node", "cordon", "node-1", "--reason", "firmware update")
    # more tasks than node-2 has cores: without the cordon some would go to node-1
    spread = orchestrate.start_workflow(
        _job("sleep 0.3", extra="    task-array: {start: 1, end: 6}\n"), name="new-work"
    )

    assert orchestrate.wait_for(spread).status == "FINISHED"
    assert set(_exit_nodes(orchestrate, spread)) == {"node-2"}
    view = orchestrate.wait_for(running)
    assert view.status == "FINISHED"
    assert orchestrate.logs(running) == "done\n"
    assert _exit_nodes(orchestrate, running) == ["node-1"]


# -- evict ------------------------------------------------------------------------------------


def test_evict_requeues_a_job_retried_on_node_onto_the_other_node(
    cluster: Cluster, fuzzball: FuzzballCli, released: None
) -> None:
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(
        _job("sleep 2; echo done", policy="{retry: {on: [node]}}")
    )
    first = _started_on(orchestrate, workflow_id)

    fuzzball.must("node", "evict", first, "--reason", "bad DIMM")

    view = orchestrate.wait_for(workflow_id)
    assert view.status == "FINISHED", view
    kinds = _kinds(orchestrate, workflow_id)
    assert "evicted" in kinds
    assert kinds.count("retried") == 1
    assert "preempted" not in kinds
    other = {"node-1": "node-2", "node-2": "node-1"}[first]
    assert _exit_nodes(orchestrate, workflow_id)[-1] == other
    assert orchestrate.logs(workflow_id) == "done\n"


def test_evict_fails_a_job_without_retry_with_the_holds_reason(
    cluster: Cluster, fuzzball: FuzzballCli, released: None
) -> None:
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(_job("sleep 60", annotations=ON_NODE_1))
    _started_on(orchestrate, workflow_id)

    fuzzball.must("node", "evict", "node-1", "--reason", "bad DIMM")

    view = orchestrate.wait_for(workflow_id)
    assert view.status == "FAILED"
    stage = _stage(view)
    assert stage.status == "FAILED"
    assert "bad DIMM" in stage.message
    assert "policy.retry.on: [node]" in stage.message
    kinds = _kinds(orchestrate, workflow_id)
    assert "evicted" in kinds
    assert "retried" not in kinds


# -- deprovision ------------------------------------------------------------------------------


def test_deprovision_waits_for_the_node_to_empty_then_its_agent_exits(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    small = make_cluster(annotations_per_node=True)
    orchestrate = small.orchestrate
    fuzzball = FuzzballCli(orchestrate, tmp_path / "config-home")
    workflow_id = orchestrate.start_workflow(_job("sleep 2; echo done", annotations=ON_NODE_1))
    _started_on(orchestrate, workflow_id)

    output = fuzzball.must("node", "deprovision", "node-1", "--reason", "scale down")

    # the command returned only once the node was empty: the job had finished by then
    assert orchestrate.workflow(workflow_id).status == "FINISHED"
    assert orchestrate.logs(workflow_id) == "done\n"
    assert 'Node "node-1" is empty and was torn down.' in output
    agent = small.agent("node-1")
    assert agent.process.wait(30) == 0
    assert "node node-1 was deprovisioned by Orchestrate" in agent.log()
    statuses = {node.name: node.status for node in orchestrate.nodes()}
    assert statuses == {"node-1": "DEPROVISIONED", "node-2": "READY"}


# -- uncordon ---------------------------------------------------------------------------------


def test_uncordon_leaves_a_monitoring_hold_in_place(
    cluster: Cluster, fuzzball: FuzzballCli, released: None
) -> None:
    orchestrate = cluster.orchestrate
    service = orchestrate.service
    monitoring = orchestrate.call(
        lambda: service.create_account("monitoring", kind="monitoring")[0]
    )
    orchestrate.call(lambda: service.add_hold(monitoring, "node-2", "cordon", "ECC errors"))
    fuzzball.must("node", "cordon", "node-2", "--reason", "maintenance")

    output = fuzzball.must("node", "uncordon", "node-2")

    assert 'Node "node-2" uncordoned (1 admin cordon hold released).' in output
    assert "still held" in output
    holds = orchestrate.call(lambda: service.list_holds(orchestrate.admin, "node-2"))
    assert [(h.effect, h.source, h.reason) for h in holds] == [
        ("cordon", "monitoring", "ECC errors")
    ]
    # and the scheduler still keeps work off the node
    workflow_id = orchestrate.start_workflow(_job("true", annotations=ON_NODE_2))
    _wait("the job was reported blocked", _blocked(orchestrate, workflow_id))
    assert "held (cordon by monitoring)" in fuzzball.must("workflow", "why", workflow_id)
    orchestrate.stop_workflow(workflow_id)


# -- retries on exit codes --------------------------------------------------------------------

MARKER_JOB = """
version: v1
volumes:
  scratch:
    reference: volume://user/ephemeral
jobs:
  work:
    image: {uri: docker://alpine:latest}
    script: |
      #!/bin/sh
      if [ -e /scratch/marker ]; then echo second run; exit 0; fi
      touch /scratch/marker
      echo first run
      exit 75
    mounts: {scratch: {location: /scratch}}
    resource: {annotations: {e2e/node: "1"}}
    policy: {retry: {on: [75], attempts: 3}}
"""


def test_job_exiting_with_a_listed_code_runs_again_and_finishes(cluster: Cluster) -> None:
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(MARKER_JOB)

    view = orchestrate.wait_for(workflow_id)

    assert view.status == "FINISHED", view
    assert _stage(view).exit_code == 0
    kinds = _kinds(orchestrate, workflow_id)
    assert kinds.count("retried") == 1
    assert "retries_exhausted" not in kinds
    assert orchestrate.logs(workflow_id) == "first run\nsecond run\n"


def test_retries_exhausted_fails_the_stage_saying_so(cluster: Cluster) -> None:
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(
        _job("echo attempt; exit 75", policy="{retry: {on: [75], attempts: 2}}")
    )

    view = orchestrate.wait_for(workflow_id)

    assert view.status == "FAILED"
    stage = _stage(view)
    assert stage.exit_code == 75
    assert "retries exhausted after 3 attempts (policy.retry.attempts: 2)" in stage.message
    kinds = _kinds(orchestrate, workflow_id)
    assert kinds.count("retried") == 2
    assert kinds.count("retries_exhausted") == 1
    assert orchestrate.logs(workflow_id) == "attempt\n" * 3


# -- a node lost --------------------------------------------------------------------------------


def test_job_retried_on_node_finishes_on_the_other_node_when_its_node_is_killed(
    make_cluster: Callable[..., Cluster],
) -> None:
    small = make_cluster(lease=2.0)
    orchestrate = small.orchestrate
    workflow_id = orchestrate.start_workflow(
        _job("sleep 3; echo done", policy="{retry: {on: [node]}}")
    )
    first = _started_on(orchestrate, workflow_id)

    small.agent(first).kill()

    view = orchestrate.wait_for(workflow_id)
    assert view.status == "FINISHED", view
    other = {"node-1": "node-2", "node-2": "node-1"}[first]
    assert _exit_nodes(orchestrate, workflow_id) == [first, other]
    kinds = _kinds(orchestrate, workflow_id)
    assert kinds.count("retried") == 1
    assert orchestrate.logs(workflow_id).endswith("done\n")
    assert {n.name: n.status for n in orchestrate.nodes()}[first] == "OFFLINE"


# -- workflow why ---------------------------------------------------------------------------------


def test_why_names_the_missing_device_when_the_only_gpu_node_is_offline(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    small = make_cluster(lease=2.0, per_node=[{}, {"devices": {"nvidia.com/gpu": 1}}])
    orchestrate = small.orchestrate
    fuzzball = FuzzballCli(orchestrate, tmp_path / "config-home")
    small.agent("node-2").stop()
    _wait(
        "node-2 went offline",
        lambda: {n.name: n.status for n in orchestrate.nodes()}["node-2"] == "OFFLINE",
    )
    workflow_id = orchestrate.start_workflow(
        _job("nvidia-smi").replace(
            "    command:", "    resource: {devices: {nvidia.com/gpu: 1}}\n    command:"
        )
    )
    _wait("the job was reported blocked", _blocked(orchestrate, workflow_id))

    output = fuzzball.must("workflow", "why", workflow_id)

    assert "jobs.work" in output
    assert "missing device nvidia.com/gpu" in output
    assert "not ready" in output


def test_why_names_the_hold_that_keeps_a_job_waiting(
    cluster: Cluster, fuzzball: FuzzballCli, released: None
) -> None:
    orchestrate = cluster.orchestrate
    fuzzball.must("node", "cordon", "node-1", "--reason", "rack move")
    workflow_id = orchestrate.start_workflow(_job("echo ran", annotations=ON_NODE_1))
    _wait("the job was reported blocked", _blocked(orchestrate, workflow_id))

    output = fuzzball.must("workflow", "why", workflow_id)

    assert "held (cordon by admin)" in output
    fuzzball.must("node", "uncordon", "node-1")
    assert orchestrate.wait_for(workflow_id).status == "FINISHED"
    assert orchestrate.logs(workflow_id) == "ran\n"


def test_why_says_annotations_mismatch_when_the_matching_node_is_cordoned(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    small = make_cluster(per_node=[{"annotations": {"zone": "b"}}, {"annotations": {"zone": "a"}}])
    orchestrate = small.orchestrate
    fuzzball = FuzzballCli(orchestrate, tmp_path / "config-home")
    fuzzball.must("node", "cordon", "node-1")
    workflow_id = orchestrate.start_workflow(_job("true", annotations="{zone: b}"))
    _wait("the job was reported blocked", _blocked(orchestrate, workflow_id))

    output = fuzzball.must("workflow", "why", workflow_id)

    assert "NODE_ANNOTATIONS_MISMATCH" in output
    assert "held (cordon by admin)" in output
    assert "annotations mismatch" in output
