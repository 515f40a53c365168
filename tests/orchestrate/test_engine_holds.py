"""Node holds: cordon, evict and deprovision, kept alongside the node's status."""

import pytest

from fuzzball_core.errors import FailedPrecondition, PermissionDenied

JOB = """
version: v4
jobs:
  work:
    image: {{uri: docker://alpine:latest}}
    command: ["true"]
{policy}"""


def test_cordon_keeps_new_work_off_while_running_work_finishes(harness):
    n1 = harness.node("n1")
    wf1 = harness.submit(JOB.format(policy=""))
    (running,) = harness.assignments()
    assert running.node_ids == [n1]
    harness.start(n1, running.run_id)
    harness.engine.step()
    harness.service.add_hold(harness.admin, "n1", "cordon", "disk check")
    harness.submit(JOB.format(policy=""))
    assert harness.assignments() == []
    assert harness.hub.take("cancel") == []
    harness.exit(n1, running.run_id)
    harness.engine.step()
    assert harness.status(wf1) == "FINISHED"


def test_cordoned_node_still_reports_ready(harness):
    harness.node("n1")
    harness.service.add_hold(harness.admin, "n1", "cordon", "maintenance")
    node = harness.service.get_node(harness.admin, "n1")
    assert node.status == "READY"
    (hold,) = node.holds
    assert (hold.effect, hold.source, hold.reason, hold.placed_by) == (
        "cordon",
        "admin",
        "maintenance",
        harness.admin.name,
    )


def test_evict_requeues_a_step_retrying_on_node_onto_another_node(harness):
    n1 = harness.node("n1")
    wf = harness.submit(JOB.format(policy="    policy: {retry: {on: [node]}}"))
    (first,) = harness.assignments()
    harness.start(n1, first.run_id)
    harness.engine.step()
    n2 = harness.node("n2")
    harness.service.add_hold(harness.admin, "n1", "evict", "ECC errors")
    (cancel,) = harness.hub.take("cancel")
    assert cancel[0] == n1
    harness.engine.step()
    (second,) = harness.assignments()
    assert second.node_ids == [n2]
    harness.run_to_end(n2, second)
    assert harness.status(wf) == "FINISHED"
    assert "evicted" in harness.events(wf)
    assert "preempted" not in harness.events(wf)


def test_evict_fails_a_step_without_retry_with_the_holds_reason(harness):
    n1 = harness.node("n1")
    wf = harness.submit(JOB.format(policy=""))
    (first,) = harness.assignments()
    harness.start(n1, first.run_id)
    harness.engine.step()
    harness.service.add_hold(harness.admin, "n1", "evict", "ECC errors")
    harness.engine.step()
    (stage,) = harness.service.get_workflow(harness.user, wf).stages
    assert stage.status == "FAILED"
    assert "ECC errors" in stage.message


def test_deprovision_waits_for_the_node_to_empty(harness):
    n1 = harness.node("n1")
    harness.submit(JOB.format(policy=""))
    (running,) = harness.assignments()
    harness.start(n1, running.run_id)
    harness.engine.step()
    harness.service.add_hold(harness.admin, "n1", "deprovision", "retiring")
    harness.engine.step()
    assert harness.hub.take("shutdown") == []
    harness.exit(n1, running.run_id)
    harness.engine.step()
    (shutdown,) = harness.hub.take("shutdown")
    assert shutdown[0] == n1
    assert harness.service.get_node(harness.admin, "n1").status == "DEPROVISIONED"


def test_uncordon_releases_admin_cordons_but_not_monitoring_holds(harness):
    harness.node("n1")
    monitoring, _ = harness.service.create_account("monitoring", kind="monitoring")
    harness.service.add_hold(monitoring, "n1", "cordon", "FuzzballNodeMemoryErrors")
    harness.service.add_hold(harness.admin, "n1", "cordon", "maintenance")
    assert harness.service.uncordon(harness.admin, "n1") == 1
    (left,) = harness.service.get_node(harness.admin, "n1").holds
    assert left.source == "monitoring"


def test_offline_node_keeps_admin_and_monitoring_holds(harness):
    harness.node("n1")
    monitoring, _ = harness.service.create_account("monitoring", kind="monitoring")
    provisioner, _ = harness.service.create_account("provisioner", kind="provisioner")
    harness.service.add_hold(monitoring, "n1", "cordon", "memory errors")
    harness.service.add_hold(harness.admin, "n1", "cordon", "repair")
    harness.service.add_hold(provisioner, "n1", "cordon", "spot reclaim")
    harness.clock.now += 60
    harness.engine.step()
    harness.node("n1")  # comes back
    sources = sorted(h.source for h in harness.service.get_node(harness.admin, "n1").holds)
    assert sources == ["admin", "monitoring"]


def test_remove_clears_an_offline_node_and_its_holds(harness):
    harness.node("n1")
    harness.service.add_hold(harness.admin, "n1", "cordon", "retired")
    harness.clock.now += 60
    harness.engine.step()
    harness.service.remove_node(harness.admin, "n1")
    assert [n.name for n in harness.service.list_nodes(harness.admin)] == []


def test_remove_refuses_a_node_that_is_up(harness):
    harness.node("n1")
    with pytest.raises(FailedPrecondition, match="still up"):
        harness.service.remove_node(harness.admin, "n1")


def test_ordinary_users_may_not_place_holds(harness):
    harness.node("n1")
    with pytest.raises(PermissionDenied):
        harness.service.add_hold(harness.user, "n1", "cordon", "mine")


def test_hold_events_record_placement_and_release(harness):
    harness.node("n1")
    harness.service.add_hold(harness.admin, "n1", "cordon", "x")
    harness.service.uncordon(harness.admin, "n1")
    with harness.engine.sessions() as session:
        from sqlalchemy import select

        from fuzzball_core.store.models import Event

        kinds = list(session.scalars(select(Event.kind).where(Event.node_id.is_not(None))))
    assert "node_hold_added" in kinds
    assert "node_hold_released" in kinds
