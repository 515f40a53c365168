"""Services in the engine: jobs waiting on a RUNNING service start once its container runs,
and services stop once every job of the workflow has ended."""

import pytest

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import InvalidArgument

SERVICE_AND_CLIENT = """
version: v4
services:
  db:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
jobs:
  client:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    depends-on: [{name: db, status: RUNNING}]
"""


def test_a_job_waiting_on_a_running_service_starts_once_the_service_runs(harness) -> None:
    node = harness.node()
    harness.submit(SERVICE_AND_CLIENT)
    (service,) = harness.assignments()
    assert service.stage_name == "services.db"
    harness.engine.step()
    assert harness.assignments() == []

    harness.start(node, service.run_id)
    harness.engine.step()

    assert [a.stage_name for a in harness.assignments()] == ["jobs.client"]


def test_services_stop_and_finish_once_every_job_ended(harness) -> None:
    node, workflow_id, service = harness.started(SERVICE_AND_CLIENT)
    (client,) = harness.assignments()

    harness.run_to_end(node, client)

    assert harness.stages(workflow_id) == {"services.db": "FINISHED", "jobs.client": "FINISHED"}
    assert harness.status(workflow_id) == "FINISHED"
    assert [(n, m.cancel.run_id) for n, m in harness.sent("cancel")] == [(node, service.run_id)]
    # the stopped container's report afterwards changes nothing
    harness.exit(node, service.run_id, code=-1, canceled=True)
    harness.engine.step()
    assert harness.status(workflow_id) == "FINISHED"


def test_a_service_failing_before_it_runs_skips_the_jobs_waiting_on_it(harness) -> None:
    node = harness.node()
    workflow_id = harness.submit(SERVICE_AND_CLIENT)
    (service,) = harness.assignments()

    harness.exit(node, service.run_id, message="the container could not start: no such file")
    harness.engine.step()

    assert harness.stages(workflow_id) == {"services.db": "FAILED", "jobs.client": "CANCELED"}
    assert harness.status(workflow_id) == "FAILED"


def test_a_workflow_of_services_alone_runs_until_stopped(harness) -> None:
    _, workflow_id, _ = harness.started(SERVICE_AND_CLIENT.split("jobs:")[0])

    assert harness.status(workflow_id) == "STARTED"
    harness.service.stop_workflow(harness.user, workflow_id)
    assert harness.status(workflow_id) == "CANCELED"


PROBED = SERVICE_AND_CLIENT.replace(
    '    command: [sleep, "600"]\n',
    '    command: [sleep, "600"]\n'
    "    readiness-probe: {tcp-socket: {port: 5432}, period-seconds: 1}\n",
)


def test_a_service_with_a_readiness_probe_releases_its_jobs_once_ready(harness) -> None:
    node, workflow_id, service = harness.started(PROBED)
    assert harness.assignments() == []

    harness.report(node, ready=node_pb2.RunReady(run_id=service.run_id))
    harness.engine.step()

    assert [a.stage_name for a in harness.assignments()] == ["jobs.client"]
    assert "service_ready" in harness.events(workflow_id)


@pytest.mark.parametrize(
    ("probe", "field"),
    [
        ("readiness-probe: {exec: {command: [pg_isready]}}", "readiness-probe.exec"),
        ("readiness-probe: {grpc: {port: 50051}}", "readiness-probe.grpc"),
        ("liveness-probe: {tcp-socket: {port: 5432}}", "liveness-probe"),
    ],
)
def test_probes_nodes_cannot_run_are_refused(harness, probe: str, field: str) -> None:
    harness.node()
    text = SERVICE_AND_CLIENT.replace(
        '    command: [sleep, "600"]\n', f'    command: [sleep, "600"]\n    {probe}\n'
    )
    with pytest.raises(InvalidArgument) as refused:
        harness.submit(text)
    assert [d["field"] for d in refused.value.details] == [f"services.db.{field}"]


V1_REQUIRES_A_SERVICE = """
version: v1
services:
  db:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
jobs:
  client:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    requires: [db]
"""


def test_a_v1_job_requiring_a_service_starts_once_the_service_runs(harness) -> None:
    node, workflow_id, _ = harness.started(V1_REQUIRES_A_SERVICE)
    (client,) = harness.assignments()
    assert client.stage_name == "jobs.client"

    harness.run_to_end(node, client)

    assert harness.stages(workflow_id) == {"services.db": "FINISHED", "jobs.client": "FINISHED"}
    assert harness.status(workflow_id) == "FINISHED"


def test_a_job_depending_on_a_service_without_a_status_starts_once_the_service_runs(
    harness,
) -> None:
    harness.started(SERVICE_AND_CLIENT.replace(", status: RUNNING", ""))

    assert [a.stage_name for a in harness.assignments()] == ["jobs.client"]


def test_a_job_depending_on_a_service_without_a_status_waits_for_its_readiness(harness) -> None:
    node, _, service = harness.started(PROBED.replace(", status: RUNNING", ""))
    assert harness.assignments() == []

    harness.report(node, ready=node_pb2.RunReady(run_id=service.run_id))
    harness.engine.step()

    assert [a.stage_name for a in harness.assignments()] == ["jobs.client"]


SERVICE_THEN_ARCHIVE = """
version: v4
services:
  db:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
jobs:
  client:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    depends-on: [{name: db}]
  archive:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    depends-on: [{name: db, status: FINISHED}]
  report:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    depends-on: [{name: archive}]
"""


def test_a_job_waiting_for_a_service_to_finish_runs_once_the_other_jobs_stopped_it(
    harness,
) -> None:
    node, workflow_id, service = harness.started(SERVICE_THEN_ARCHIVE)
    (client,) = harness.assignments()

    harness.run_to_end(node, client)

    assert [(n, m.cancel.run_id) for n, m in harness.sent("cancel")] == [(node, service.run_id)]
    assert harness.stages(workflow_id)["services.db"] == "FINISHED"
    (archive,) = harness.assignments()
    assert archive.stage_name == "jobs.archive"
    harness.run_to_end(node, archive)
    (report,) = harness.assignments()
    harness.run_to_end(node, report)
    assert harness.status(workflow_id) == "FINISHED"


def test_a_job_waiting_for_a_service_to_fail_is_skipped_once_the_other_jobs_stopped_it(
    harness,
) -> None:
    text = SERVICE_THEN_ARCHIVE.replace(
        "{name: db, status: FINISHED}", "{name: db, status: FAILED}"
    )
    node, workflow_id, _ = harness.started(text)
    (client,) = harness.assignments()

    harness.run_to_end(node, client)

    assert harness.stages(workflow_id) == {
        "services.db": "FINISHED",
        "jobs.client": "FINISHED",
        "jobs.archive": "CANCELED",
        "jobs.report": "CANCELED",
    }
    assert harness.status(workflow_id) == "FINISHED"


def test_a_job_waiting_for_a_service_whose_command_exits_runs_after_it(harness) -> None:
    node, workflow_id, service = harness.started(SERVICE_THEN_ARCHIVE)
    harness.assignments()  # the client, still running

    harness.exit(node, service.run_id)
    harness.engine.step()

    assert harness.stages(workflow_id)["services.db"] == "FINISHED"
    assert [a.stage_name for a in harness.assignments()] == ["jobs.archive"]
