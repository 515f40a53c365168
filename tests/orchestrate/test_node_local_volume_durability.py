"""A node-local persistent volume's only copy lives on its node: that node is never torn
down or forgotten while it holds one, a volume whose node is nonetheless gone is LOST and
refused by name, a multinode job cannot split one across nodes, and a volume a workflow not
yet ended declares cannot be deleted under it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from sqlalchemy import delete, select

from fuzzball_core.errors import FailedPrecondition, InvalidArgument
from fuzzball_core.orchestrate import volume_removal, volumes
from fuzzball_core.orchestrate.provisioner_runner import ProvisionerRunner
from fuzzball_core.orchestrate.volumes import VolumeOwner
from fuzzball_core.store.models import Node, NodeHold, Volume, Workflow

PERSISTENT = """version: v4
volumes:
  results: {reference: volume://user/persistent/results}
jobs:
  write:
    image: {uri: docker://alpine:latest}
    command: [touch, /results/out]
    mounts: {/results: results}
"""

#: a first job that mounts nothing, then one that mounts the persistent volume
LATER_MOUNT = """version: v4
volumes:
  results: {reference: volume://user/persistent/results}
jobs:
  prepare:
    image: {uri: docker://alpine:latest}
    command: ["true"]
  read:
    image: {uri: docker://alpine:latest}
    command: [cat, /results/out]
    mounts: {/results: results}
    depends-on: [{name: prepare}]
"""

MULTINODE = """version: v4
volumes:
  results: {reference: volume://user/CLASS/results}
jobs:
  ranks:
    image: {uri: docker://alpine:latest}
    command: [touch, /results/out]
    multinode: {nodes: 2, implementation: mpich}
    mounts: {/results: results}
"""


def volume_used_on_first_node(harness) -> tuple[str, str]:
    """n1 registered and PERSISTENT run to its end there: (n1's id, the volume's id)."""
    node = harness.node("n1")
    harness.submit(PERSISTENT)
    ((_, message),) = harness.sent("assign")
    harness.run_to_end(node, message.assign)
    return node, json.loads(message.assign.volumes_json)["results"]["volumeId"]


def volume_row(harness, volume_id: str) -> Volume:
    with harness.engine.sessions() as session:
        row = session.get(Volume, volume_id)
        session.expunge(row)
        return row


def forget_node_record(harness, node_id: str) -> None:
    """The node's record deleted behind Orchestrate's back (as before removal checked)."""
    with harness.engine.sessions() as session:
        session.execute(delete(NodeHold).where(NodeHold.node_id == node_id))
        session.execute(delete(Node).where(Node.id == node_id))
        session.commit()


def delete_volume(harness, workflow_id: str, volume_id: str) -> dict[str, object]:
    def work(tx):
        owner = VolumeOwner.of_workflow(tx.session, tx.session.get(Workflow, workflow_id))
        return volume_removal.delete(harness.engine.context, tx, owner, volume_id)

    return harness.engine.change(work)


def test_a_deprovision_hold_on_a_node_holding_a_volume_is_refused_naming_it(harness) -> None:
    volume_used_on_first_node(harness)
    with pytest.raises(FailedPrecondition, match=r"deprovision node n1: .*persistent/results"):
        harness.service.add_hold(harness.admin, "n1", "deprovision", "scale down")


def test_removing_an_offline_node_holding_a_volume_is_refused_naming_it(harness) -> None:
    volume_used_on_first_node(harness)
    harness.clock.now += 60
    harness.engine.step()  # n1's lease lapses: offline
    with pytest.raises(FailedPrecondition, match=r"remove node n1: .*persistent/results"):
        harness.service.remove_node(harness.admin, "n1")
    assert [n.name for n in harness.service.list_nodes(harness.admin)] == ["n1"]


def test_a_node_under_an_older_deprovision_hold_stays_up_while_it_holds_a_volume(
    harness,
) -> None:
    node, _ = volume_used_on_first_node(harness)

    def older_hold(tx) -> None:
        tx.session.add(
            NodeHold(
                node_id=node,
                effect="deprovision",
                source="admin",
                reason="placed before the volume was used",
                placed_by="admin",
                placed_at=harness.clock.now,
            )
        )

    harness.engine.change(older_hold)
    harness.engine.step()
    assert harness.sent("shutdown") == []
    assert harness.service.get_node(harness.admin, "n1").status == "READY"


def test_the_provisioning_loop_never_counts_a_node_holding_a_volume_idle(harness) -> None:
    volume_used_on_first_node(harness)
    harness.node("n2")
    provisioning = SimpleNamespace(
        records=lambda _states: [SimpleNamespace(name="n1"), SimpleNamespace(name="n2")]
    )
    runner = ProvisionerRunner(harness.engine, provisioning)  # type: ignore[arg-type]
    harness.engine.context.provisioning = None
    idle, holding, torn_down = runner.node_states()
    assert idle["n1"] is None  # busy: the volume's only copy is there
    assert idle["n2"] is not None
    assert holding == {"n1"}
    assert torn_down == []


def test_a_volume_whose_node_record_is_gone_is_lost_and_refused_naming_the_node(
    harness,
) -> None:
    node, _ = volume_used_on_first_node(harness)
    forget_node_record(harness, node)
    harness.node("n2")
    with pytest.raises(FailedPrecondition, match=rf"results lived on node {node}, which is gone"):
        harness.submit(PERSISTENT)


def test_a_later_stage_mounting_a_lost_volume_fails_at_placement_naming_the_node(
    harness,
) -> None:
    first, volume_id = volume_used_on_first_node(harness)
    harness.clock.now += 60
    harness.engine.step()  # n1 offline
    second = harness.node("n2")
    harness.submit(LATER_MOUNT)
    ((_, prepare),) = harness.sent("assign")
    forget_node_record(harness, first)
    harness.run_to_end(second, prepare.assign)
    ((where, read),) = harness.sent("assign")  # not left waiting for the vanished node
    assert where == second
    (refusal,) = json.loads(read.assign.volumes_json).values()
    assert f"lived on node {first}, which is gone: its data is lost" in refusal["error"]
    assert volume_row(harness, volume_id).status == volumes.LOST


def test_deleting_a_lost_volume_ends_at_once_with_no_node_to_ask(harness) -> None:
    node, volume_id = volume_used_on_first_node(harness)
    with harness.engine.sessions() as session:
        (workflow_id,) = session.scalars(select(Workflow.id)).all()
    forget_node_record(harness, node)
    harness.engine.change(
        lambda tx: setattr(tx.session.get(Volume, volume_id), "status", volumes.LOST)
    )
    answer = delete_volume(harness, workflow_id, volume_id)
    assert answer == {"retained": False, "status": volume_removal.DELETED}
    assert harness.sent("remove_volume") == []


def test_a_multinode_job_mounting_a_node_local_volume_is_refused_naming_the_mount(
    harness,
) -> None:
    harness.node("n1")
    harness.node("n2")
    with pytest.raises(
        InvalidArgument,
        match=r"jobs\.ranks\.mounts\./results: volume results .*storage class 'persistent'",
    ):
        harness.submit(MULTINODE.replace("CLASS", "persistent"))


def test_a_multinode_job_may_mount_a_per_workflow_volume(harness) -> None:
    harness.node("n1")
    harness.node("n2")
    spec = MULTINODE.replace("CLASS/results", "ephemeral")
    harness.submit(spec)  # not refused


def test_a_volume_a_pending_workflow_declares_cannot_be_deleted(harness) -> None:
    _, volume_id = volume_used_on_first_node(harness)
    harness.service.add_hold(harness.admin, "n1", "cordon", "maintenance")
    waiting = harness.submit(LATER_MOUNT)  # nothing runs: its only node is cordoned
    with pytest.raises(FailedPrecondition, match=r"declared by workflow\(s\) not yet ended: 'wf'"):
        delete_volume(harness, waiting, volume_id)
    assert volume_row(harness, volume_id).deleted_at is None


def test_a_volume_is_deleted_once_the_workflows_declaring_it_ended(harness) -> None:
    _, volume_id = volume_used_on_first_node(harness)
    with harness.engine.sessions() as session:
        (workflow_id,) = session.scalars(select(Workflow.id)).all()
    answer = delete_volume(harness, workflow_id, volume_id)
    assert answer["status"] == volume_removal.DELETING
