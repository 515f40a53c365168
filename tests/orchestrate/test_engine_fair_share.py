"""Fair share in the engine: one account's 5,000-task array does not hold another account's
small workflows behind it (issue 20, "No fairness"), and ``workflow why`` says who waits for
their share. The node side is played by the test through the messages a Substrate sends."""

import uuid
from collections import Counter
from typing import Any

import pytest

from fuzzball_plugins.schedulers.default import DefaultScheduler

ARRAY = """
version: v1
jobs:
  sweep:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    task-array: {start: 1, end: 5000}
"""

ONE_JOB = """
version: v1
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [echo, hi]
"""

#: 4 nodes of 64 cores: 256 one-core tasks fill the cluster
NODES = 4
CORES = 64
#: tasks of the array that end between two passes
ENDING_PER_PASS = 20


class Cluster:
    """A full cluster running the array of one account, with a second account's workflows
    waiting; each :meth:`next_pass` ends some of the array's tasks and runs one engine pass."""

    def __init__(self, harness: Any) -> None:  # conftest's Harness
        self.harness = harness
        for i in range(NODES):
            harness.node(f"n{i}", cores=CORES)
        self.small: set[str] = set()
        self.small_started: set[str] = set()
        #: run id -> node of every running task of the array
        self.running: dict[int, str] = {}
        self.array = harness.submit(ARRAY)
        self._start(harness.sent("assign"))
        self.other, _ = harness.service.create_account(f"other-{uuid.uuid4().hex[:6]}")
        self.small = {
            harness.service.start_workflow(self.other, raw_specification=ONE_JOB, name=f"s{i}")
            for i in range(50)
        }
        harness.engine.step()
        self._start(harness.sent("assign"))

    def _start(self, assigned) -> None:
        for node_id, message in assigned:
            assignment = message.assign
            self.harness.start(node_id, assignment.run_id)
            if assignment.workflow_id in self.small:
                self.small_started.add(assignment.workflow_id)
            else:
                self.running[assignment.run_id] = node_id

    def next_pass(self) -> None:
        for run_id in sorted(self.running)[:ENDING_PER_PASS]:
            self.harness.exit(self.running.pop(run_id), run_id)
        self.harness.engine.step()
        self._start(self.harness.sent("assign"))


@pytest.fixture
def cluster(harness) -> Cluster:
    return Cluster(harness)


def test_the_array_fills_the_cluster_and_the_small_workflows_wait(cluster):
    assert len(cluster.running) == NODES * CORES
    assert cluster.small_started == set()


def test_another_accounts_small_workflows_start_within_three_passes_of_a_huge_array(cluster):
    for _ in range(3):
        cluster.next_pass()
    assert cluster.small_started == cluster.small


def test_the_array_takes_the_freed_cores_again_once_the_small_workflows_run(cluster):
    for _ in range(3):
        cluster.next_pass()
    before = len(cluster.running)
    cluster.next_pass()
    assert len(cluster.running) == before


def test_why_says_the_array_waits_for_its_accounts_fair_share(cluster):
    harness = cluster.harness
    (sweep,) = harness.service.explain_workflow(harness.user, cluster.array)
    assert sweep.reason == "FAIR_SHARE"
    assert f"account {harness.user.account_id} runs 100% of the cluster" in sweep.message
    assert "against a fair share of 50%" in sweep.message


def test_a_fair_share_wait_is_recorded_as_a_scheduling_blocked_event(cluster):
    harness = cluster.harness
    blocked = [
        event
        for event in harness.service.list_events(harness.user, cluster.array)
        if event.kind == "scheduling_blocked"
    ]
    assert blocked[-1].data["reason"] == "FAIR_SHARE"
    assert "waiting for its fair share" in blocked[-1].message


def test_the_small_workflows_wait_for_room_not_for_their_share(cluster):
    harness = cluster.harness
    reasons = Counter(
        stage.reason
        for workflow_id in cluster.small
        for stage in harness.service.explain_workflow(cluster.other, workflow_id)
    )
    # the first holds the backfill reservation, the others wait behind it
    assert reasons == {"INSUFFICIENT_RESOURCES": 1, "BACKFILL_NO_FIT": 49}


def test_with_fair_share_off_the_small_workflows_wait_behind_the_array(harness_with):
    scheduler = DefaultScheduler({"fair_share": {"enabled": False}})
    cluster = Cluster(harness_with(scheduler=scheduler))
    for _ in range(3):
        cluster.next_pass()
    assert cluster.small_started == set()


WHOLE_NODE = """
version: v1
jobs:
  whole:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    resource: {cpu: {cores: 4}}
"""


def test_passes_with_nothing_waiting_keep_count_of_what_an_account_runs(harness_with):
    harness = harness_with(scheduler=DefaultScheduler({"fair_share": {"half_life": "1m"}}))
    harness.engine.lease_seconds = 3600  # no heartbeats in this test
    node = harness.node("n1", cores=4)
    harness.submit(WHOLE_NODE)
    (first,) = harness.assignments()
    harness.start(node, first.run_id)
    for _ in range(6):  # a half-life of passes with nothing waiting while the job runs
        harness.clock.now += 10
        harness.engine.step()
    harness.exit(node, first.run_id)
    harness.engine.step()
    again = harness.service.start_workflow(harness.user, raw_specification=WHOLE_NODE, name="a")
    harness.clock.now += 1
    other, _ = harness.service.create_account(f"other-{uuid.uuid4().hex[:6]}")
    harness.service.start_workflow(other, raw_specification=WHOLE_NODE, name="b")
    harness.engine.step()
    (whole,) = harness.service.explain_workflow(harness.user, again)
    assert whole.reason == "FAIR_SHARE"
    # a minute at the whole cluster, a one-minute half-life ago: about half (49% a second on)
    assert "ran 49% of it recently (half-life 60s)" in whole.message
