"""A node speaks only for its own work: a report about a run placed on another node, or about
a volume another node holds, changes nothing (it is dropped, logged naming the node and the
run, and counted), while the same report from the run's own node is applied as before, late
ones from the node a run ended on included."""

from __future__ import annotations

import json
import logging

import pytest
from sqlalchemy import select

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate import volume_removal
from fuzzball_core.orchestrate.orchestrate_metrics import OrchestrateCollector, exposition
from fuzzball_core.store.models import Run, Volume

JOB = """
version: v1
jobs:
  victim:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
"""

RETRIED_ON_NODE_LOSS = JOB + "    policy: {retry: {on: [node]}}\n"

PROBED_SERVICE = """
version: v4
services:
  db:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
    readiness-probe: {tcp-socket: {port: 5432}, period-seconds: 1}
jobs:
  client:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    depends-on: [{name: db, status: RUNNING}]
"""

PERSISTENT = """
version: v4
volumes:
  data: {reference: volume://user/persistent/results}
jobs:
  write:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
    mounts: {/data: data}
"""

METERED = {"ingress_bytes": 10, "ingress_packets": 1, "egress_bytes": 20, "egress_packets": 2}


def placed_on_a(harness, text: str = JOB) -> tuple[str, str, str, node_pb2.Assignment]:
    """Node A (one core) with ``text``'s first run placed on it, filling it, then node B:
    (A, B, workflow id, the run's assignment)."""
    node_a = harness.node("a", cores=1)
    workflow_id = harness.submit(text)
    (assignment, *_) = harness.assignments()
    node_b = harness.node("b")
    return node_a, node_b, workflow_id, assignment


def prints(harness, node: str, run_id: int, data: bytes, seq: int = 0) -> None:
    harness.report(node, log=node_pb2.LogData(run_id=run_id, stream="stdout", data=data, seq=seq))


def log_text(harness, workflow_id: str) -> str:
    return "".join(c.data for c in harness.service.read_logs(harness.user, workflow_id))


def run_row(harness, run_id: int) -> Run:
    with harness.engine.sessions() as session:
        row = session.get(Run, run_id)
        session.expunge(row)
        return row


def volume_row(harness) -> Volume:
    with harness.engine.sessions() as session:
        (row,) = session.scalars(select(Volume))
        session.expunge(row)
        return row


def test_a_log_line_from_another_node_is_not_stored(harness) -> None:
    _, node_b, workflow_id, assignment = placed_on_a(harness)
    prints(harness, node_b, assignment.run_id, b"forged\n")
    prints(harness, node_b, assignment.run_id, b"forged too\n", seq=1)
    harness.engine.step()
    assert log_text(harness, workflow_id) == ""
    assert harness.sent("logs_stored") == []


def test_a_log_line_from_the_runs_node_is_stored(harness) -> None:
    node_a, _, workflow_id, assignment = placed_on_a(harness)
    prints(harness, node_a, assignment.run_id, b"mine\n", seq=1)
    harness.engine.step()
    assert log_text(harness, workflow_id) == "mine\n"


def test_a_started_report_from_another_node_leaves_the_run_assigned(harness) -> None:
    _, node_b, workflow_id, assignment = placed_on_a(harness)
    harness.start(node_b, assignment.run_id)
    harness.engine.step()
    assert run_row(harness, assignment.run_id).status == "ASSIGNED"
    assert harness.stages(workflow_id) == {"jobs.victim": "PENDING"}


def test_a_started_report_from_the_runs_node_starts_it(harness) -> None:
    node_a, _, workflow_id, assignment = placed_on_a(harness)
    harness.start(node_a, assignment.run_id)
    harness.engine.step()
    assert run_row(harness, assignment.run_id).status == "STARTED"
    assert harness.stages(workflow_id) == {"jobs.victim": "STARTED"}


@pytest.mark.parametrize("code", [0, 3])
def test_an_exit_report_from_another_node_leaves_the_run_running(harness, code: int) -> None:
    node_a, node_b, workflow_id, assignment = placed_on_a(harness)
    harness.start(node_a, assignment.run_id)
    harness.engine.step()
    harness.exit(node_b, assignment.run_id, code, message="forged" if code else "")
    harness.engine.step()
    assert run_row(harness, assignment.run_id).status == "STARTED"
    assert harness.status(workflow_id) == "STARTED"


def test_an_exit_report_from_the_runs_node_ends_it(harness) -> None:
    node_a, _, workflow_id, assignment = placed_on_a(harness)
    harness.start(node_a, assignment.run_id)
    harness.exit(node_a, assignment.run_id, 3)
    harness.engine.step()
    assert harness.status(workflow_id) == "FAILED"


def test_another_nodes_exit_report_for_an_ended_run_keeps_none_of_its_metering(harness) -> None:
    node_a, node_b, _, assignment = placed_on_a(harness)
    harness.run_to_end(node_a, assignment)
    harness.exit(node_b, assignment.run_id, metering_json=json.dumps(METERED))
    harness.engine.step()
    assert run_row(harness, assignment.run_id).metering is None


def test_a_late_exit_from_the_node_a_run_was_lost_on_is_kept_and_spares_its_retry(
    harness,
) -> None:
    node_a, node_b, workflow_id, lost = placed_on_a(harness, RETRIED_ON_NODE_LOSS)
    harness.start(node_a, lost.run_id)
    harness.engine.step()
    harness.clock.now += 60  # node A stops responding; B still heartbeats
    harness.report(node_b, heartbeat=node_pb2.Heartbeat())
    harness.engine.step()
    (retry,) = harness.assignments()
    assert (run_row(harness, lost.run_id).status, retry.node_ids) == ("FAILED", [node_b])

    harness.exit(node_a, lost.run_id, 3, metering_json=json.dumps(METERED))
    harness.engine.step()

    assert run_row(harness, lost.run_id).metering == {node_a: METERED}
    assert run_row(harness, retry.run_id).status == "ASSIGNED"
    assert harness.status(workflow_id) == "STARTED"


def test_a_ready_report_from_another_node_releases_no_dependents(harness) -> None:
    node_a, node_b, workflow_id, service = placed_on_a(harness, PROBED_SERVICE)
    harness.start(node_a, service.run_id)
    harness.engine.step()
    harness.report(node_b, ready=node_pb2.RunReady(run_id=service.run_id))
    harness.engine.step()
    assert harness.assignments() == []
    assert "service_ready" not in harness.events(workflow_id)


def test_a_ready_report_from_the_services_node_releases_its_dependents(harness) -> None:
    node_a, _, _, service = placed_on_a(harness, PROBED_SERVICE)
    harness.start(node_a, service.run_id)
    harness.report(node_a, ready=node_pb2.RunReady(run_id=service.run_id))
    harness.engine.step()
    assert [a.stage_name for a in harness.assignments()] == ["jobs.client"]


def test_a_volume_size_from_a_node_not_holding_the_volume_is_not_kept(harness) -> None:
    node_a, node_b, _, _ = placed_on_a(harness, PERSISTENT)
    volume = volume_row(harness)
    assert volume.node_id == node_a  # a node-local volume, on the node its job was placed
    harness.submit(JOB)
    (elsewhere,) = harness.assignments()
    assert harness.engine.context.live_runs[elsewhere.run_id].node_ids == (node_b,)
    harness.exit(node_b, elsewhere.run_id, volume_sizes={volume.id: 1 << 40})
    harness.engine.step()
    assert volume_row(harness).size_bytes == 0


def test_a_volume_size_from_its_holder_is_kept(harness) -> None:
    node_a, _, _, assignment = placed_on_a(harness, PERSISTENT)
    volume = volume_row(harness)
    harness.exit(node_a, assignment.run_id, volume_sizes={volume.id: 4096})
    harness.engine.step()
    assert volume_row(harness).size_bytes == 4096


def removal_asked(harness) -> str:
    """The persistent volume (held by node A) deleted, its removal asked of its node."""
    with harness.engine.sessions() as session:
        (row,) = session.scalars(select(Volume))
        row.status = volume_removal.DELETING
        session.commit()
        return row.id


def test_a_volume_removal_answered_by_a_node_not_holding_it_changes_nothing(harness) -> None:
    node_a, node_b, _, assignment = placed_on_a(harness, PERSISTENT)
    harness.run_to_end(node_a, assignment)
    volume_id = removal_asked(harness)
    harness.report(node_b, volume_removed=node_pb2.VolumeRemoved(volume_id=volume_id))
    harness.engine.step()
    assert volume_row(harness).status == volume_removal.DELETING


def test_a_volume_removal_answered_by_its_holder_deletes_it(harness) -> None:
    node_a, _, _, assignment = placed_on_a(harness, PERSISTENT)
    harness.run_to_end(node_a, assignment)
    volume_id = removal_asked(harness)
    harness.report(node_a, volume_removed=node_pb2.VolumeRemoved(volume_id=volume_id))
    harness.engine.step()
    assert volume_row(harness).status == volume_removal.DELETED


def test_a_dropped_report_is_logged_naming_the_node_and_run_never_its_content(
    harness, caplog
) -> None:
    _, node_b, _, assignment = placed_on_a(harness)
    with caplog.at_level(logging.WARNING, logger="fuzzball_core.orchestrate.node_reports"):
        prints(harness, node_b, assignment.run_id, b"secret output\n")
        harness.engine.step()
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert f"node b ({node_b}) reported log of run {assignment.run_id}" in record.getMessage()
    assert "secret output" not in caplog.text


def test_dropped_reports_are_counted_by_kind_in_orchestrates_metrics(harness) -> None:
    _, node_b, _, assignment = placed_on_a(harness)
    prints(harness, node_b, assignment.run_id, b"forged\n")
    harness.start(node_b, assignment.run_id)
    harness.exit(node_b, assignment.run_id, 3)
    harness.engine.step()
    engine = harness.engine
    collector = OrchestrateCollector(
        engine.sessions, dropped_reports=lambda: engine.context.dropped_reports
    )
    text = exposition(collector).decode()
    for kind, count in (("log", 1), ("started", 1), ("exited", 1), ("ready", 0)):
        assert f'fuzzball_engine_dropped_node_reports_total{{kind="{kind}"}} {count}.0' in text
