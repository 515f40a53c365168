"""A pass past its budget leaves the reports after its current chunk of them to the next
pass, ahead of those that arrive meanwhile. The loop's passes have a budget
(``orchestrate.pass-budget``) so that the requests sharing its loop are served between
them; ``Engine.step()`` without one applies every report, as these tests' other passes do."""

from __future__ import annotations

from support.engine_workflows import HELLO

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.engine import REPORT_CHUNK


def _logged(harness, workflow_id: str) -> str:
    return "".join(chunk.data for chunk in harness.service.read_logs(harness.user, workflow_id))


def _over_budget(harness) -> tuple[str, str, int, list[str]]:
    """A running hello-world whose node reported a chunk of output lines and six more, and
    a pass with no budget left: (node, workflow id, run id, the lines)."""
    node, workflow_id, assignment = harness.started(HELLO)
    lines = [f"{n}\n" for n in range(REPORT_CHUNK + 6)]
    for line in lines:
        harness.report(node, log=node_pb2.LogData(run_id=assignment.run_id, data=line.encode()))
    harness.engine.step(budget=0)
    return node, workflow_id, assignment.run_id, lines


def test_a_pass_past_its_budget_applies_one_chunk_of_reports(harness):
    _, workflow_id, _, lines = _over_budget(harness)
    assert _logged(harness, workflow_id) == "".join(lines[:REPORT_CHUNK])


def test_the_reports_a_pass_left_come_first_in_the_next_pass(harness):
    node, workflow_id, run_id, lines = _over_budget(harness)
    harness.report(node, log=node_pb2.LogData(run_id=run_id, data=b"late\n"))
    harness.exit(node, run_id)
    harness.engine.step()
    assert _logged(harness, workflow_id) == "".join(lines) + "late\n"
    assert harness.status(workflow_id) == "FINISHED"
