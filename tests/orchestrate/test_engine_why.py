"""Scheduling diagnostics: why a stage waits, and scheduling_blocked events."""

WORKFLOW = """
version: v4
jobs:
  first:
    image: {{uri: docker://alpine:latest}}
    command: ["true"]
    resource: {resource}
  second:
    image: {{uri: docker://alpine:latest}}
    command: ["true"]
    depends-on: [{{name: first}}]
"""


def test_job_needing_a_gpu_on_a_cluster_that_has_none_is_refused_naming_it(harness):
    import pytest

    from fuzzball_core.errors import InvalidArgument

    harness.node("n1")
    with pytest.raises(InvalidArgument, match=r"nvidia\.com/gpu"):
        harness.submit(WORKFLOW.format(resource="{devices: {nvidia.com/gpu: 1}}"))


def test_why_names_held_nodes(harness):
    harness.node("n1")
    harness.service.add_hold(harness.admin, "n1", "cordon", "maintenance")
    wf = harness.submit(WORKFLOW.format(resource="{cpu: {cores: 1}}"))
    first, second = harness.service.explain_workflow(harness.user, wf)
    assert first.stage_name == "jobs.first"
    assert first.reason == "INSUFFICIENT_RESOURCES"
    assert "held (cordon by admin)" in first.message
    assert second.reason == "WAITING_ON_DEPENDENCY"
    assert "jobs.first" in second.message


def test_why_names_annotation_mismatch(harness):
    from fuzzball_core.scheduling import Resources

    harness.engine.register_node("n1", Resources(4, 8 << 30), {"zone": "a"})
    harness.engine.register_node("n2", Resources(4, 8 << 30), {"zone": "b"})
    harness.service.add_hold(harness.admin, "n2", "cordon", "maintenance")
    wf = harness.submit(WORKFLOW.format(resource="{annotations: {zone: b}}"))
    first, _ = harness.service.explain_workflow(harness.user, wf)
    assert first.reason == "NODE_ANNOTATIONS_MISMATCH", first.message
    assert "annotations mismatch" in first.message


def test_why_names_the_missing_gpu_when_the_gpu_node_is_offline(harness):
    harness.node("cpu-node")
    harness.node("gpu-node", **{"nvidia.com/gpu": 1})
    harness.clock.now += 10
    harness.node("cpu-node")
    harness.clock.now += 10  # gpu-node's lease ran out
    harness.engine.step()
    wf = harness.submit(WORKFLOW.format(resource="{devices: {nvidia.com/gpu: 1}}"))
    first, _ = harness.service.explain_workflow(harness.user, wf)
    assert "missing device nvidia.com/gpu" in first.message
    assert "not ready" in first.message


def test_scheduling_blocked_is_emitted_once_per_cause(harness):
    harness.node("n1")
    harness.service.add_hold(harness.admin, "n1", "cordon", "maintenance")
    wf = harness.submit(WORKFLOW.format(resource="{cpu: {cores: 1}}"))
    harness.engine.step()
    harness.engine.step()
    assert harness.events(wf).count("scheduling_blocked") == 1


def test_why_all_includes_finished_stages(harness):
    node = harness.node("n1")
    wf = harness.submit(WORKFLOW.format(resource="{cpu: {cores: 1}}"))
    (first,) = harness.assignments()
    harness.run_to_end(node, first)
    waiting = harness.service.explain_workflow(harness.user, wf)
    assert [e.stage_name for e in waiting] == ["jobs.second"]
    everything = harness.service.explain_workflow(harness.user, wf, include_finished=True)
    assert [e.stage_name for e in everything] == ["jobs.first", "jobs.second"]
    assert everything[0].reason == "FINISHED"


EGRESS = """
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    egress:
      - source: {uri: "file://out.txt"}
        destination: {uri: "s3://results/out.txt"}
jobs:
  write:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    mounts: {/data: data}
"""


def test_why_says_a_volumes_egress_waits_for_its_jobs_to_end(harness):
    harness.node("n1")
    harness.service.add_hold(harness.admin, "n1", "cordon", "maintenance")
    wf = harness.submit(EGRESS)
    explained = {e.stage_name: e for e in harness.service.explain_workflow(harness.user, wf)}
    egress = explained["volumes.data.egress"]
    assert egress.reason == "WAITING_ON_DEPENDENCY"
    assert "jobs.write to end" in egress.message


ARRAY = """
version: v1
jobs:
  tasks:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    resource: {cpu: {cores: 1}}
    task-array: {start: 1, end: 4, concurrency: 4}
"""


def test_an_arrays_waiting_tasks_report_their_stages_cause_once(harness):
    # several runs of one stage wait: the first of them diagnosed speaks for the stage
    harness.node("n1")
    harness.service.add_hold(harness.admin, "n1", "cordon", "maintenance")
    wf = harness.submit(ARRAY)
    harness.engine.step()
    harness.engine.step()
    assert harness.events(wf).count("scheduling_blocked") == 1


def test_each_of_many_waiting_single_job_workflows_is_reported_once_as_passes_go_on(harness):
    harness.node("n1")
    harness.service.add_hold(harness.admin, "n1", "cordon", "maintenance")
    first = [harness.submit(WORKFLOW.format(resource="{cpu: {cores: 1}}")) for _ in range(3)]
    harness.engine.step()
    later = harness.submit(WORKFLOW.format(resource="{cpu: {cores: 1}}"))
    harness.engine.step()
    for wf in [*first, later]:
        assert harness.events(wf).count("scheduling_blocked") == 1
