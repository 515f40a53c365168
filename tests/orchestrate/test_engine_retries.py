"""policy.retry: exit codes and lost nodes run a step again, within one shared budget."""

from fuzzball_core.orchestrate.retries import decide
from fuzzball_core.scheduling import Resources
from fuzzball_core.spec.models import Retry


def workflow(policy: str, *, array: str = "") -> str:
    return f"""
version: v4
jobs:
  flaky:
    image: {{uri: docker://alpine:latest}}
    command: ["true"]
    policy: {policy}
{array}"""


def test_listed_exit_code_retries_then_finishes_after_one_retried_event(harness):
    node = harness.node()
    wf = harness.submit(workflow("{retry: {on: [75], attempts: 3}}"))
    (first,) = harness.assignments()
    harness.run_to_end(node, first, code=75)
    (second,) = harness.assignments()
    assert second.stage_name == "jobs.flaky"
    assert second.run_id != first.run_id
    harness.run_to_end(node, second, code=0)
    assert harness.status(wf) == "FINISHED"
    assert harness.events(wf).count("retried") == 1


def test_unlisted_exit_code_fails_without_retry(harness):
    node = harness.node()
    wf = harness.submit(workflow("{retry: {on: [75], attempts: 3}}"))
    (first,) = harness.assignments()
    harness.run_to_end(node, first, code=1)
    assert harness.assignments() == []
    assert harness.status(wf) == "FAILED"
    assert "retried" not in harness.events(wf)


def test_attempts_exhausted_fails_with_retries_exhausted(harness):
    node = harness.node()
    wf = harness.submit(workflow("{retry: {on: [75], attempts: 2}}"))
    runs = 0
    while batch := harness.assignments():
        for assignment in batch:
            harness.run_to_end(node, assignment, code=75)
            runs += 1
    assert runs == 3
    events = harness.events(wf)
    assert events.count("retried") == 2
    assert events.count("retries_exhausted") == 1
    (stage,) = harness.service.get_workflow(harness.user, wf).stages
    assert stage.status == "FAILED"
    assert "retries exhausted after 3 attempts" in stage.message


def test_lost_node_requeues_a_step_that_retries_on_node(harness):
    first_node = harness.node("n1")
    wf = harness.submit(workflow("{retry: {on: [node], attempts: 2}}"))
    (first,) = harness.assignments()
    harness.start(first_node, first.run_id)
    harness.engine.step()
    harness.clock.now += 10
    second_node = harness.node("n2")
    harness.clock.now += 10  # n1's lease (15 s) has run out, n2's has not
    harness.engine.step()
    (second,) = harness.assignments()
    assert second.node_ids == [second_node]
    harness.run_to_end(second_node, second)
    assert harness.status(wf) == "FINISHED"


def test_lost_node_fails_a_step_without_retry_naming_the_field(harness):
    node = harness.node()
    wf = harness.submit(workflow("{timeout: {execute: 1h}}"))
    (first,) = harness.assignments()
    harness.start(node, first.run_id)
    harness.engine.step()
    harness.clock.now += 60
    harness.engine.step()
    (stage,) = harness.service.get_workflow(harness.user, wf).stages
    assert stage.status == "FAILED"
    assert "set policy.retry.on: [node]" in stage.message


def test_restart_on_node_fault_works_as_retry_on_node():
    assert decide(
        Retry(on=["node"]), "node", reruns=0, node_reruns=0, max_eviction_restarts=3
    ).retry


def test_node_retries_are_capped_by_max_eviction_restarts():
    decision = decide(
        Retry(on=["node"], attempts=10), "node", reruns=2, node_reruns=2, max_eviction_restarts=2
    )
    assert not decision.retry
    assert decision.exhausted
    assert "max-eviction-restarts" in decision.note


def test_attempts_are_one_budget_for_every_cause():
    rule = Retry(on=["node", 75], attempts=2)
    assert not decide(rule, "75", reruns=2, node_reruns=1, max_eviction_restarts=3).retry


def test_one_task_of_an_array_is_retried_alone(harness):
    node = harness.node(cores=16)
    wf = harness.submit(
        workflow("{retry: {on: [75], attempts: 1}}", array="    task-array: {start: 1, end: 3}")
    )
    batch = harness.assignments()
    assert sorted(a.task_id for a in batch) == [1, 2, 3]
    for assignment in batch:
        harness.run_to_end(node, assignment, code=75 if assignment.task_id == 2 else 0)
    (again,) = harness.assignments()
    assert again.task_id == 2
    harness.run_to_end(node, again)
    assert harness.status(wf) == "FINISHED"


def _with_default_retry(harness, rule: Retry):
    from fuzzball_core.orchestrate.engine import Engine
    from fuzzball_plugins.schedulers.default import DefaultScheduler

    harness.engine = Engine(
        harness.engine.sessions,
        DefaultScheduler(),
        harness.hub,
        clock=harness.clock,
        default_retry=rule,
    )
    harness.service.engine = harness.engine
    return harness


def test_cluster_default_retry_applies_to_a_step_with_its_own_policy(harness):
    _with_default_retry(harness, Retry(on=[75], attempts=1))
    node = harness.node()
    wf = harness.submit(workflow("{timeout: {execute: 1h}}"))
    (first,) = harness.assignments()
    harness.run_to_end(node, first, code=75)
    (second,) = harness.assignments()
    harness.run_to_end(node, second)
    assert harness.status(wf) == "FINISHED"


def test_a_steps_own_retry_replaces_the_cluster_default(harness):
    _with_default_retry(harness, Retry(on=[75], attempts=1))
    node = harness.node()
    wf = harness.submit(workflow("{retry: {on: [node]}}"))
    (first,) = harness.assignments()
    harness.run_to_end(node, first, code=75)
    assert harness.assignments() == []
    assert harness.status(wf) == "FAILED"


def test_default_retry_is_read_from_the_configuration():
    from fuzzball_core.config import parse_config

    config = parse_config({"orchestrate": {"default-retry": {"on": ["node"], "attempts": 2}}})
    assert config.orchestrate.default_retry == Retry(on=["node"], attempts=2)


def test_a_multinode_job_that_loses_one_node_reruns_whole(harness):
    nodes = [harness.node(f"n{i}", cores=2) for i in range(3)]
    wf = harness.submit(
        workflow("{retry: {on: [node]}}", array="    multinode: {nodes: 2, implementation: mpich}")
    )
    first, _ = harness.assignments()  # one per node
    assert len(first.node_ids) == 2
    harness.start(first.node_ids[0], first.run_id)
    harness.engine.step()
    lost = first.node_ids[1]
    harness.clock.now += 10
    for node in nodes:
        if node != lost:
            # the others renew their leases; the lost one stays silent
            name = harness.service.get_node(harness.admin, node).name
            harness.engine.register_node(name, Resources(2, 8 << 30), {})
    harness.clock.now += 10
    harness.engine.step()
    (kept, cancel), *_ = harness.sent("cancel")
    assert kept == first.node_ids[0] and cancel.cancel.run_id == first.run_id
    second, _ = harness.assignments()
    assert len(second.node_ids) == 2
    assert lost not in second.node_ids
    for node_id in second.node_ids:
        harness.run_to_end(node_id, second)
    assert harness.status(wf) == "FINISHED"
