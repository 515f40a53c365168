"""NVLink domains through the engine: ``multinode.nvlink-domain`` reaches the scheduler, a
job that spread over domains says why in its placement event, and a job that requires one
domain and waits says why in ``workflow why``."""

from fuzzball_core.scheduling import NVLINK_DOMAIN, Resources

JOB = """
version: v4
jobs:
  train:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/true]
    resource: {{cpu: {{cores: 4}}}}
    multinode: {{nodes: 2, implementation: generic{policy}}}
"""


def test_a_job_spread_over_domains_says_why_when_it_is_placed(harness) -> None:
    for name, domain in (("a1", "a"), ("b1", "b")):
        harness.engine.register_node(name, Resources(4, 8 << 30, {}), {NVLINK_DOMAIN: domain})

    workflow_id = harness.submit(JOB.format(policy=""))

    messages = [e.message for e in harness.service.list_events(harness.user, workflow_id)]
    (scheduled,) = [m for m in messages if "scheduled on" in m]
    assert scheduled.endswith(
        "; spread over 2 NVLink domains (nvidia.com/nvlink-domain): no NVLink domain has 2"
        " nodes with room (the most: 1 in b; 2 in all)"
    )


def test_a_job_requiring_one_domain_waits_and_workflow_why_says_why(harness) -> None:
    # a one-node job takes a1 (the only node yet: equal nodes are equally good fits)
    harness.engine.register_node("a1", Resources(4, 8 << 30, {}), {NVLINK_DOMAIN: "a"})
    harness.submit(JOB.format(policy="").replace("train", "first").replace("nodes: 2", "nodes: 1"))
    harness.engine.register_node("b1", Resources(4, 8 << 30, {}), {NVLINK_DOMAIN: "b"})
    harness.engine.register_node("a2", Resources(4, 8 << 30, {}), {NVLINK_DOMAIN: "a"})

    workflow_id = harness.submit(JOB.format(policy=", nvlink-domain: require"))

    (stage,) = harness.service.explain_workflow(harness.user, workflow_id)
    assert stage.reason == "INSUFFICIENT_RESOURCES"
    assert stage.message.endswith(
        "no NVLink domain has 2 nodes with room (the most: 1 in b; 2 in all)"
    )


def test_workflow_why_says_why_a_placed_job_spread(harness) -> None:
    for name, domain in (("a1", "a"), ("b1", "b")):
        harness.engine.register_node(name, Resources(4, 8 << 30, {}), {NVLINK_DOMAIN: domain})

    workflow_id = harness.submit(JOB.format(policy=""))

    (stage,) = harness.service.explain_workflow(harness.user, workflow_id)
    assert stage.reason == "STARTING"
    assert stage.message.endswith(
        "starting; spread over 2 NVLink domains (nvidia.com/nvlink-domain): no NVLink domain"
        " has 2 nodes with room (the most: 1 in b; 2 in all)"
    )
