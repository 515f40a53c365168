"""The agent's jobs keep their emptied cgroups for the next job of the workflow's owner
(``RunRequest.cgroup_key``): two workflows of one owner reuse a group, two owners never
share one, and an assignment naming no owner (an older Orchestrate) keys by its workflow.
Real containers and cgroups, as root."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.substrate.drivers import NodeServices, RunRequest, driver_for
from fuzzball_runtime import cgroups, kept
from fuzzball_runtime.state import StateDir

ALICE = "7d0c9a4e-account/alice"
BOB = "7d0c9a4e-account/bob"
FIRST = "0b7f3c1e-5d2a-4f6b-8e9d-2c1a0f3b4d51"
SECOND = "0b7f3c1e-5d2a-4f6b-8e9d-2c1a0f3b4d52"


def _request(workflow_id: str, owner: str) -> RunRequest:
    """A ``/bin/true`` job of ``workflow_id`` (owned by ``owner``; "": none named)."""
    definition = {"image": {"uri": "docker://alpine:latest"}, "command": ["/bin/true"]}
    return RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=7,
            workflow_id=workflow_id,
            stage_name="jobs.true",
            job_json=json.dumps(definition),
            owner=owner,
        )
    )


def _run(node: NodeServices, request: RunRequest) -> None:
    """Run ``request``'s job to its end through its driver, as the agent does."""

    async def scenario() -> int:
        execution = driver_for(request, node, lambda _run, _stream, _data: None)
        try:
            outcome = await execution.start()
            if outcome is None:
                outcome = await execution.wait()
            return outcome.exit_code
        finally:
            execution.destroy()

    assert asyncio.run(scenario()) == 0


def _run_and_keep(node: NodeServices, request: RunRequest, kept_after: int) -> None:
    """:func:`_run`, then wait until the pool holds ``kept_after`` groups: an ended job's
    groups are freed (kept) on the start pool after its outcome, so a next job started at
    once could come before they are in the pool."""
    _run(node, request)
    deadline = time.monotonic() + 10
    while len(kept.KEPT) != kept_after:
        assert time.monotonic() < deadline, f"the pool holds {len(kept.KEPT)} groups"
        time.sleep(0.005)


def _kept_groups(node: NodeServices) -> set[str]:
    """The names of the kept groups in the node's v2 group (metered jobs have one there)."""
    unified = cgroups.detect_layout().unified
    assert unified is not None
    parent = unified / StateDir(node.state_dir).cgroup_group
    return {entry.name for entry in parent.iterdir() if entry.name.startswith(kept.KEPT_PREFIX)}


@pytest.fixture
def metered_node(node: NodeServices) -> NodeServices:
    """The node, its pool empty at the start (the fixture empties it at the end)."""
    if cgroups.detect_layout().unified is None:
        pytest.skip("no cgroup v2 hierarchy for metered jobs' groups")
    kept.release_kept_cgroups()
    assert node.metering and node.keep_cgroups
    return node


def test_an_owners_jobs_key_their_groups_by_the_owner() -> None:
    assert _request(FIRST, ALICE).cgroup_key == _request(SECOND, ALICE).cgroup_key


def test_an_assignment_without_owner_keys_its_groups_by_the_workflow() -> None:
    assert _request(FIRST, "").cgroup_key != _request(SECOND, "").cgroup_key
    assert _request(FIRST, "").cgroup_key == _request(FIRST, "").cgroup_key


def test_a_workflow_id_never_equals_an_owners_key() -> None:
    # an owner key and a workflow key are told apart even where the texts are the same
    assert _request(ALICE, "").cgroup_key != _request(FIRST, ALICE).cgroup_key


@pytest.mark.root
def test_two_workflows_of_one_owner_reuse_a_group(metered_node: NodeServices) -> None:
    _run_and_keep(metered_node, _request(FIRST, ALICE), kept_after=1)
    left = _kept_groups(metered_node)
    assert len(left) == 1

    _run_and_keep(metered_node, _request(SECOND, ALICE), kept_after=1)

    assert _kept_groups(metered_node) == left


@pytest.mark.root
def test_two_owners_never_share_a_group(metered_node: NodeServices) -> None:
    _run_and_keep(metered_node, _request(FIRST, ALICE), kept_after=1)
    alices = _kept_groups(metered_node)

    _run_and_keep(metered_node, _request(SECOND, BOB), kept_after=2)

    bobs = _kept_groups(metered_node) - alices
    assert len(bobs) == 1 and alices <= _kept_groups(metered_node)


@pytest.mark.root
def test_an_assignment_without_owner_keys_by_workflow(metered_node: NodeServices) -> None:
    _run_and_keep(metered_node, _request(FIRST, ""), kept_after=1)
    firsts = _kept_groups(metered_node)
    _run_and_keep(metered_node, _request(SECOND, ""), kept_after=2)
    both = _kept_groups(metered_node)
    assert len(firsts) == 1 and len(both) == 2

    _run_and_keep(metered_node, _request(FIRST, ""), kept_after=2)

    assert _kept_groups(metered_node) == both
