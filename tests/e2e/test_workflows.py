"""Workflows from submission to their end, through Orchestrate, two Substrates and real
containers pulled from a local registry."""

from __future__ import annotations

import functools
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.cluster import HELLO_WORLD, Cluster, free_port

from fuzzball_core.errors import InvalidArgument

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _stage(view, name: str):
    return next(s for s in view.stages if s.name == name)


def test_agents_register_the_limits_from_their_configuration(cluster: Cluster) -> None:
    nodes = sorted(cluster.orchestrate.nodes(), key=lambda n: n.name)

    assert [(n.name, n.status, n.cores, n.memory) for n in nodes] == [
        ("node-1", "READY", 4, 4 * 1024**3),
        ("node-2", "READY", 4, 4 * 1024**3),
    ]
    assert nodes[0].annotations == {"e2e/node": "1"}


def test_upstream_hello_world_runs_through_the_local_registry(cluster: Cluster) -> None:
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(HELLO_WORLD.read_text(), name="hello")

    view = orchestrate.wait_for(workflow_id)

    assert view.status == "FINISHED", view
    assert _stage(view, "jobs.hello-world").exit_code == 0
    assert orchestrate.logs(workflow_id) == "Hello, world! Hostname hello-world\n"


def test_three_stage_chain_runs_each_stage_after_the_previous_one_finished(
    cluster: Cluster,
) -> None:
    workflow = """
version: v1
jobs:
  first:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "sleep 0.2; echo one"]
  second:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo two"]
    depends-on: [{name: first}]
  third:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo three"]
    depends-on: [{name: second, status: FINISHED}]
"""
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)

    view = orchestrate.wait_for(workflow_id)

    assert view.status == "FINISHED", view
    first, second, third = (_stage(view, f"jobs.{n}") for n in ("first", "second", "third"))
    assert first.finished_at <= second.started_at
    assert second.finished_at <= third.started_at
    assert [orchestrate.logs(workflow_id, f"jobs.{n}") for n in ("first", "second", "third")] == [
        "one\n",
        "two\n",
        "three\n",
    ]


def test_jobs_of_a_workflow_on_one_node_share_its_ephemeral_volume(cluster: Cluster) -> None:
    workflow = """
version: v1
volumes:
  data:
    reference: volume://user/ephemeral
jobs:
  write:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo written-by-first > /data/note"]
    mounts: {data: {location: /data}}
    resource: {annotations: {e2e/node: "1"}}
  read:
    image: {uri: docker://alpine:latest}
    command: [/bin/cat, /scratch/note]
    mounts: {data: {location: /scratch}}
    resource: {annotations: {e2e/node: "1"}}
    depends-on: [{name: write}]
"""
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)

    view = orchestrate.wait_for(workflow_id)

    assert view.status == "FINISHED", view
    assert orchestrate.logs(workflow_id, "jobs.read") == "written-by-first\n"


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_volume_ingress_is_fetched_before_the_job_starts(cluster: Cluster, tmp_path) -> None:
    (tmp_path / "in.lj.txt").write_text("units lj\n")
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietFiles, directory=str(tmp_path))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    workflow = f"""
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    ingress:
      - source: {{uri: "http://127.0.0.1:{server.server_port}/in.lj.txt"}}
        destination: {{uri: "file://inputs/in.lj.txt"}}
jobs:
  read:
    image: {{uri: docker://alpine:latest}}
    command: [cat, /data/inputs/in.lj.txt]
    mounts: {{/data: {{volume: data}}}}
"""
    try:
        orchestrate = cluster.orchestrate
        workflow_id = orchestrate.start_workflow(workflow)
        view = orchestrate.wait_for(workflow_id)
    finally:
        server.shutdown()

    assert view.status == "FINISHED", [(s.name, s.message) for s in view.stages]
    assert orchestrate.logs(workflow_id, "jobs.read") == "units lj\n"


def test_a_job_reaches_the_ready_service_it_waits_for_which_stops_after_it(
    cluster: Cluster,
) -> None:
    port = free_port()
    workflow = f"""
version: v4
services:
  web:
    image: {{uri: docker://alpine:latest}}
    script: |
      busybox sleep 1
      busybox mkdir -p /www && echo "served by web" > /www/index.html
      exec busybox httpd -f -p 127.0.0.1:{port} -h /www
    readiness-probe: {{http-get: {{port: {port}, path: /index.html}}, period-seconds: 1}}
jobs:
  fetch:
    image: {{uri: docker://alpine:latest}}
    command: [busybox, wget, -qO-, "http://127.0.0.1:{port}/index.html"]
    depends-on: [{{name: web, status: RUNNING}}]
"""
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)

    view = orchestrate.wait_for(workflow_id)

    assert view.status == "FINISHED", [(s.name, s.message) for s in view.stages]
    assert orchestrate.logs(workflow_id, "jobs.fetch") == "served by web\n"
    assert _stage(view, "services.web").message == "stopped: every job of the workflow ended"
    server = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while _processes_mentioning(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_mentioning(server) == []


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(text.encode() in word for word in words) and b"httpd" in words:
            found.append(cmdline.parent.name)
    return found


def test_job_sees_its_script_args_env_cwd_and_task_variables(cluster: Cluster) -> None:
    workflow = """
version: v1
jobs:
  show:
    image: {uri: docker://alpine:latest}
    script: |
      #!/bin/sh
      echo "args=$* cwd=$(pwd) greeting=$GREETING task=$FB_TASK_ID job=$FB_JOB_NAME"
      echo "workflow=$FB_WORKFLOW_ID"
    args: [a, b]
    env: [GREETING=hi there]
    cwd: /tmp
    task-array: {start: 3, end: 3}
"""
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)

    view = orchestrate.wait_for(workflow_id)

    assert view.status == "FINISHED", view
    assert orchestrate.logs(workflow_id) == (
        f"args=a b cwd=/tmp greeting=hi there task=3 job=show\nworkflow={workflow_id}\n"
    )


def test_job_runs_a_script_it_was_given_through_workflow_files(cluster: Cluster) -> None:
    workflow = """
version: v4
files:
  greet.sh: |
    echo "greetings from $(basename $0)"
jobs:
  greet:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, /opt/tools/greet.sh]
    files: {/opt/tools/greet.sh: "file://greet.sh"}
"""
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)

    view = orchestrate.wait_for(workflow_id)

    assert view.status == "FINISHED", view
    assert orchestrate.logs(workflow_id) == "greetings from greet.sh\n"


def test_failed_job_runs_its_on_failure_cleanup_and_cancels_its_on_success_dependent(
    cluster: Cluster,
) -> None:
    workflow = """
version: v1
jobs:
  breaks:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo failing >&2; exit 3"]
  cleanup:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo cleaning up"]
    depends-on: [{name: breaks, status: FAILED}]
  publish:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo should never run"]
    depends-on: [{name: breaks, status: FINISHED}]
"""
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)

    view = orchestrate.wait_for(workflow_id)

    assert view.status == "FAILED"
    breaks = _stage(view, "jobs.breaks")
    assert (breaks.status, breaks.exit_code) == ("FAILED", 3)
    assert breaks.message == "exited with code 3"
    assert _stage(view, "jobs.cleanup").status == "FINISHED"
    assert _stage(view, "jobs.publish").status == "CANCELED"
    assert orchestrate.logs(workflow_id, "jobs.breaks") == "failing\n"
    assert orchestrate.logs(workflow_id, "jobs.cleanup") == "cleaning up\n"
    assert orchestrate.logs(workflow_id, "jobs.publish") == ""


def test_task_array_with_one_failing_task_fails_and_leaves_nothing_running(
    cluster: Cluster,
) -> None:
    workflow = """
version: v1
jobs:
  tasks:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "sleep 0.05; test $FB_TASK_ID -ne 12"]
    task-array: {start: 1, end: 50, concurrency: 5}
"""
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)

    view = orchestrate.wait_for(workflow_id, timeout=90)

    assert view.status == "FAILED"
    stage = _stage(view, "jobs.tasks")
    assert stage.status == "FAILED"
    assert stage.message.startswith("task 12 failed: exited with code 1")
    assert stage.tasks_failed == 1
    # every task that was in flight when task 12 failed is reported back by its node
    deadline = time.monotonic() + 30
    while any(node.stages for node in orchestrate.nodes()):
        assert time.monotonic() < deadline, orchestrate.nodes()
        time.sleep(0.1)


def test_execute_timeout_kills_the_job_and_fails_the_stage_saying_so(cluster: Cluster) -> None:
    workflow = """
version: v1
jobs:
  slow:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo started; sleep 60"]
    policy: {timeout: {execute: 1s}}
"""
    orchestrate = cluster.orchestrate
    began = time.monotonic()
    workflow_id = orchestrate.start_workflow(workflow)

    view = orchestrate.wait_for(workflow_id, timeout=30)

    assert view.status == "FAILED"
    assert time.monotonic() - began < 45  # not the 60 s sleep
    stage = _stage(view, "jobs.slow")
    assert stage.status == "FAILED"
    assert stage.message == "killed: exceeded policy.timeout.execute of 1s"
    assert orchestrate.logs(workflow_id) == "started\n"


def test_stopping_a_workflow_kills_its_running_container(cluster: Cluster) -> None:
    workflow = """
version: v1
jobs:
  forever:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo running; sleep 600"]
"""
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)
    orchestrate.wait_for(workflow_id, lambda w: _stage(w, "jobs.forever").status == "STARTED")

    orchestrate.stop_workflow(workflow_id)

    view = orchestrate.wait_for(workflow_id)
    assert view.status == "CANCELED"
    deadline = time.monotonic() + 20
    while True:  # the node reports the container's end once it was killed
        exits = [
            e
            for e in orchestrate.events(workflow_id)
            if e.kind == "container_exited" and e.stage_name == "jobs.forever"
        ]
        if exits:
            break
        assert time.monotonic() < deadline, "the node never reported the container's end"
        time.sleep(0.1)
    assert exits[0].data["status"] == "CANCELED"


def test_two_agents_share_the_work(cluster: Cluster) -> None:
    workflow = """
version: v1
jobs:
  spread:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "sleep 0.5"]
    task-array: {start: 1, end: 12}
"""
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)

    view = orchestrate.wait_for(workflow_id, timeout=60)

    assert view.status == "FINISHED"
    nodes = {e.node_id for e in orchestrate.events(workflow_id) if e.kind == "container_exited"}
    assert nodes == {node.id for node in orchestrate.nodes()}
    assert len(nodes) == 2


def test_job_too_big_for_any_node_is_rejected_at_submission(cluster: Cluster) -> None:
    workflow = """
version: v1
jobs:
  huge:
    image: {uri: docker://alpine:latest}
    command: [/bin/true]
    resource: {cpu: {cores: 64}}
"""
    with pytest.raises(InvalidArgument) as raised:
        cluster.orchestrate.start_workflow(workflow)

    assert "jobs.huge.resource" in raised.value.message


def test_job_over_its_memory_is_reported_as_killed_for_lack_of_memory(cluster: Cluster) -> None:
    workflow = """
version: v1
jobs:
  hungry:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "x=$(head -c 300000000 /dev/zero | tr '\\\\0' a); echo done"]
    resource: {memory: {size: 32MiB}}
"""
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)

    view = orchestrate.wait_for(workflow_id, timeout=60)

    assert view.status == "FAILED"
    assert _stage(view, "jobs.hungry").message == (
        "killed: out of memory (raise resource.memory.size)"
    )
