"""The Federate article's scenario end to end, every part a real process or service on loopback.

- **aws**: an Orchestrate (``orchestrate.cluster-name: aws``) with no node of its own and one
  ``aws`` provisioner definition (``ec2``, m5.xlarge spot, at most one node) against moto's
  EC2; the boot hook (``support.cloud_boot``) turns each instance moto keeps into a real
  Substrate from its user data, as cloud-init would.
- **on-prem**: an Orchestrate (``on-prem``) with one static Substrate of 4 cores and one
  simulated GPU: the NVIDIA device plugin reads a device tree with ``nvidia0`` (a character
  device) and the driver's ``/proc`` tree beside it, naming the model.
- **federate**: ``fuzzball_federation.main.serve`` (gateway, member polling, failover) with no
  configured member. Both members join through registration with ``fuzzball cluster join``
  while it runs; it routes to each from the next decision.

The scenario is one test of steps in the article's order (each step needs the state the
previous ones left: a volume made on aws, a busy aws node), then two small tests of who may
act on member nodes. Needs root, docker-registry and busybox-static, as tests/e2e does.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from google.protobuf import json_format
from support.cloud_boot import BootHook, ec2_view, wait_until
from support.cluster import (
    HELLO_WORLD,
    Cluster,
    InProcessOrchestrate,
    LocalRegistry,
    cluster_config,
    free_port,
    have_prerequisites,
)
from support.federation_harness import ServedFederation, serve_federation
from support.moto_ec2 import MotoEc2

from fuzzball_core.cli import cluster_cmd, context_cmd
from fuzzball_core.cli.main import cli
from fuzzball_core.client import FuzzballClient
from fuzzball_core.errors import PermissionDenied
from fuzzball_core.service.audit import AuditQuery
from fuzzball_core.vocabulary import AuditAction, EventKind

pytestmark = [pytest.mark.root, pytest.mark.slow]

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)

context_cmd.register(cli.commands["context"])
cluster_cmd.register(cli.commands["cluster"])

GPU_MODEL = "NVIDIA H100 80GB HBM3"

#: a GPU job asking for the model by the annotation the device plugin gives the node
GPU_JOB = f"""\
version: v1
jobs:
  train:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/sh, -c, 'echo "gpu $NVIDIA_VISIBLE_DEVICES"']
    resource:
      cpu: {{cores: 1}}
      memory: {{size: 512MiB}}
      devices: {{nvidia.com/gpu: 1}}
      annotations: {{nvidia.com/gpu.model: {GPU_MODEL}}}
"""


def volume_job(command: str, cores: int = 3) -> str:
    """A job mounting the persistent volume ``results`` at /data."""
    return f"""\
version: v1
volumes:
  data:
    reference: volume://user/persistent/results
jobs:
  work:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/sh, -c, '{command}']
    mounts:
      data: {{location: /data}}
    resource: {{cpu: {{cores: {cores}}}, memory: {{size: 512MiB}}}}
"""


#: waits on aws while its one node is busy (2 of 4 cores, 3 taken) and it may add no other
WAITING = """\
version: v1
jobs:
  waits:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, 'echo finished where it was re-routed']
    resource: {cpu: {cores: 2}, memory: {size: 512MiB}}
"""


def fake_gpu_tree(root: Path) -> Path:
    """``root/dev`` (``root`` under /dev: the runtime gives containers device nodes under
    /dev only) with the NVIDIA control nodes and ``nvidia0`` (character devices, as the
    driver makes them; here /dev/null's numbers), and ``root/proc`` with the driver's
    information file naming :data:`GPU_MODEL`; the dev root to give Substrate."""
    dev = root / "dev"
    dev.mkdir(parents=True)
    for name in ("nvidiactl", "nvidia-uvm", "nvidia0"):
        os.mknod(dev / name, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    info = root / "proc" / "driver" / "nvidia" / "gpus" / "0000:01:00.0" / "information"
    info.parent.mkdir(parents=True)
    info.write_text(f"Model: \t\t {GPU_MODEL}\nIRQ: \t\t 42\nDevice Minor: \t 0\n")
    return dev


@dataclass
class AwsMember:
    """The aws Orchestrate and the boot hook starting its instances' Substrates."""

    orchestrate: InProcessOrchestrate
    hook: BootHook

    def close(self) -> None:
        try:
            self.hook.close()
        finally:
            self.orchestrate.close()


def start_aws(directory: Path, registry: LocalRegistry, moto: MotoEc2) -> AwsMember:
    settings: dict[str, Any] = cluster_config(
        directory, registry.url, grpc_port=free_port(), orchestrate={"cluster-name": "aws"}
    )
    settings["provisioner"] = {
        "definitions": [
            {
                "id": "ec2",
                "driver": "aws",
                "cores": 4,
                "memory": "2GiB",
                "max-nodes": 1,
                # it stays for the whole scenario: the volume made on it lives on its disk
                "idle-timeout": 600,
                "annotations": {"pool": "ec2"},
                "cost-per-hour-estimate": 0.192,
                "startup-time-estimate": "90s",
                "config": moto.driver_config(
                    cluster="aws",
                    image="ami-0fuzzball0node00",
                    market="spot",
                    **{"instance-type": "m5.xlarge"},
                ),
            }
        ]
    }
    orchestrate = InProcessOrchestrate(settings)
    try:
        hook = BootHook(
            directory / "machines",
            ec2_view(moto),
            substrate={"cores": 4, "memory": "2GiB"},
            base={"images": settings["images"]},
        )
    except BaseException:
        orchestrate.close()
        raise
    return AwsMember(orchestrate, hook)


def admin_token(orchestrate: InProcessOrchestrate) -> str:
    """A token of a new administrator of ``orchestrate`` (who joins it to the Federate)."""
    return orchestrate.call(lambda: orchestrate.service.create_account("ops", admin=True))[1]


@dataclass
class Scenario:
    federation: ServedFederation
    aws: AwsMember
    onprem: Cluster
    home: Path
    moto: MotoEc2

    def fuzzball(self, *args: str, context: str | None = None) -> Any:
        """The ``fuzzball`` CLI with this scenario's contexts (``context`` made active)."""
        if context is not None:
            self.run("context", "use", context)
        return self.run(*args)

    def run(self, *args: str) -> Any:
        result = CliRunner().invoke(cli, list(args), env={"XDG_CONFIG_HOME": str(self.home)})
        assert result.exit_code == 0, (args, result.output, result.exception)
        return result

    def client(self, token: str) -> FuzzballClient:
        return FuzzballClient(f"{self.federation.rest_url}/v3", token, timeout=60)

    def routed(self, token: str, workflow_id: str) -> list[dict[str, Any]]:
        """The workflow's ``workflow_routed`` events' data, in order."""
        with self.client(token) as client:
            events = client.list_events(workflow_id)
        return [
            json_format.MessageToDict(e.data)
            for e in events
            if e.kind == str(EventKind.WORKFLOW_ROUTED)
        ]

    def wait_finished(self, token: str, workflow_id: str, timeout: float = 150) -> Any:
        with self.client(token) as client:
            deadline = time.monotonic() + timeout
            while True:
                workflow = client.get_workflow(workflow_id)
                status = json_format.MessageToDict(workflow).get("status", "")
                if status.endswith(("FINISHED", "FAILED", "CANCELED")):
                    assert status.endswith("FINISHED"), (workflow, self.aws.hook.logs()[-2000:])
                    return workflow
                assert time.monotonic() < deadline, workflow
                time.sleep(0.3)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    directory = tmp_path_factory.mktemp("article")
    registry = LocalRegistry(directory / "registry")
    moto = MotoEc2()
    started: list[Any] = []
    gpu_node = Path("/dev") / f"fuzzball-test-{uuid.uuid4().hex[:8]}"
    try:
        (directory / "aws").mkdir()
        aws = start_aws(directory / "aws", registry, moto)
        started.append(aws)
        (directory / "on-prem").mkdir()
        onprem = Cluster(
            directory / "on-prem",
            registry.url,
            agents=1,
            cores=4,
            memory="4GiB",
            orchestrate={"cluster-name": "on-prem"},
            substrate={"dev-root": str(fake_gpu_tree(gpu_node))},
        )
        started.append(onprem)
        federation = serve_federation(directory, name="federate")
        started.append(federation)
        home = directory / "home"
        running = Scenario(federation, aws, onprem, home, moto)
        for name, url, token in (
            ("federate", federation.rest_url, federation.admin_token),
            ("alice", federation.rest_url, federation.user_token),
            ("aws", aws.orchestrate.rest_url, admin_token(aws.orchestrate)),
            ("on-prem", onprem.orchestrate.rest_url, admin_token(onprem.orchestrate)),
        ):
            running.run("context", "create", name, "--address", url, "--token", token)
        yield running
    finally:
        for part in reversed(started):
            part.close()
        moto.close()
        registry.stop()
        shutil.rmtree(gpu_node, ignore_errors=True)


def _table(output: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.split("|")] for line in output.splitlines() if "|" in line
    ]


def _cluster_rows(scenario: Scenario) -> dict[str, list[str]]:
    rows = _table(scenario.fuzzball("cluster", "list", context="federate").output)
    assert rows[0] == ["ID", "NAME", "KIND", "STATUS"]
    return {row[1]: row for row in rows[1:]}


def _start_pinned(scenario: Scenario, text: str, name: str, cluster: str) -> str:
    """Start ``text`` as alice with the start request's ``clusterId`` naming ``cluster``."""
    with scenario.client(scenario.federation.user_token) as client:
        body = {"rawSpecification": text, "name": name, "clusterId": cluster}
        return str(client.call_json("POST", "/workflows", body=body)["id"])


def _start(scenario: Scenario, path: Path, text: str) -> str:
    path.write_text(text)
    output = scenario.fuzzball("workflow", "start", str(path), context="alice").output
    return output.split('"')[1]


def test_the_articles_scenario(scenario, tmp_path):
    # the aws cluster joins the running Federate through registration
    joined = scenario.fuzzball("cluster", "join", "--from-context", "aws", context="federate")
    assert 'Cluster "aws" joined as' in joined.output
    assert set(_cluster_rows(scenario)) == {"federate", "aws"}

    # on-prem joins too, while the Federate runs; work reaches it without a restart
    scenario.fuzzball("cluster", "join", "--from-context", "on-prem", context="federate")
    rows = _cluster_rows(scenario)
    assert {name: row[2:] for name, row in rows.items()} == {
        "federate": ["CLUSTER_KIND_FEDERATE", "CLUSTER_STATUS_READY"],
        "aws": ["CLUSTER_KIND_ORCHESTRATE", "CLUSTER_STATUS_READY"],
        "on-prem": ["CLUSTER_KIND_ORCHESTRATE", "CLUSTER_STATUS_READY"],
    }

    # hello-world: aws has no node yet, only its ec2 definition ($0.192/h, ready in 90 s);
    # on-prem's free node costs nothing and starts now
    path = tmp_path / "hello-world.fz"
    path.write_text(HELLO_WORLD.read_text())
    started = scenario.fuzzball("workflow", "start", "-w", str(path), context="alice").output
    hello = started.split('"')[1]
    assert "Status: STAGE_STATUS_FINISHED" in started, started
    assert "Cluster: on-prem" in started
    (decision,) = scenario.routed(scenario.federation.user_token, hello)
    assert decision["cluster"] == "on-prem"
    plans = {c["cluster"]: c["jobs"]["jobs.hello-world"] for c in decision["candidates"]}
    assert plans["on-prem"] == {"capacity": "free", "hours": 1.0, "cost": 0.0}
    assert plans["aws"] == {
        "capacity": "provision",
        "definition": "ec2",
        "hours": 1.0,
        "cost": 0.192,
    }

    # a persistent volume made on aws by a workflow pinned there: the ec2 definition's
    # instance comes up in moto and its Substrate runs the job
    made = _start_pinned(scenario, volume_job("echo kept > /data/result"), "aws-volume.fz", "aws")
    scenario.wait_finished(scenario.federation.user_token, made)
    (record,) = scenario.aws.orchestrate.call(
        lambda: scenario.aws.orchestrate.orchestrate.engine.context.provisioning.records()
    )
    assert scenario.moto.states() == {record.driver_id: "running"}

    # the GPU workflow asks for the model: only on-prem's node carries it (from the plugin)
    (node,) = scenario.onprem.orchestrate.nodes()
    assert node.annotations["nvidia.com/gpu.model"] == GPU_MODEL
    gpu = _start(scenario, tmp_path / "gpu.fz", GPU_JOB)
    (decision,) = scenario.routed(scenario.federation.user_token, gpu)
    assert decision["cluster"] == "on-prem"
    assert "nvidia.com/gpu" in decision["rejected"]["aws"]
    scenario.wait_finished(scenario.federation.user_token, gpu)
    with scenario.client(scenario.federation.user_token) as alice:
        output = b"".join(chunk.output for chunk in alice.stream_logs(gpu))
    assert output == b"gpu 0\n"  # the simulated GPU was handed to the container

    # a workflow mounting the volume that lives on aws goes to aws (it keeps aws busy)
    uses = _start(
        scenario, tmp_path / "aws-volume-sleep.fz", volume_job("cat /data/result; sleep 20")
    )
    (decision,) = scenario.routed(scenario.federation.user_token, uses)
    assert decision["cluster"] == "aws"
    assert decision["candidates"][0]["cluster"] == "aws"

    # workflow list -t 10: the article's columns, each workflow's cluster
    listed = _table(scenario.fuzzball("workflow", "list", "-t", "10", context="alice").output)
    assert listed[0] == ["ID", "NAME", "EMAIL", "STATUS", "CLUSTER"]
    clusters = {row[0]: row[4] for row in listed[1:]}
    assert (clusters[made], clusters[gpu], clusters[uses]) == ("aws", "on-prem", "aws")
    assert clusters[hello] == "on-prem"

    # a workflow waiting on aws (its one node busy, no other allowed) when aws is killed:
    # re-routed after the grace period, it finishes on on-prem
    waiting = _start_pinned(scenario, WAITING, "waits.fz", "aws")
    scenario.aws.orchestrate.close()  # Orchestrate gone: every call to aws is refused
    with scenario.client(scenario.federation.user_token) as alice:
        # while aws is away the workflow reads UNKNOWN from Federate's record (not an error)
        wait_until(lambda: alice.get_workflow(waiting).cluster_name == "on-prem", 60, "re-routed")
    scenario.wait_finished(scenario.federation.user_token, waiting)
    first, second = scenario.routed(scenario.federation.user_token, waiting)
    assert (first["cluster"], second["cluster"]) == ("aws", "on-prem")
    listed = _table(scenario.fuzzball("workflow", "list", "-t", "10", context="alice").output)
    row = next(row for row in listed[1:] if row[0] == waiting)
    assert (row[3], row[4]) == ("Finished", "on-prem")


def test_a_non_admin_user_of_the_federate_cannot_hold_or_remove_member_nodes(scenario):
    (node,) = scenario.onprem.orchestrate.nodes()
    with scenario.client(scenario.federation.user_token) as alice:
        with pytest.raises(PermissionDenied, match="hold_nodes"):
            alice.add_hold(node.name, "cordon", "mine now")
        with pytest.raises(PermissionDenied, match="hold_nodes"):
            alice.remove_node(node.name)
    holds = scenario.onprem.orchestrate.call(
        lambda: scenario.onprem.orchestrate.service.list_holds(
            scenario.onprem.orchestrate.admin, node.name
        )
    )
    assert holds == []


def test_the_members_audit_log_names_the_federates_user_not_a_shared_account(scenario):
    (node,) = scenario.onprem.orchestrate.nodes()
    with scenario.client(scenario.federation.admin_token) as root:
        hold = root.add_hold(node.name, "cordon", "firmware")
        root.release_hold(node.name, int(hold.id))
    audit = scenario.onprem.orchestrate.service.audit
    entries = audit.query(AuditQuery(action=AuditAction.HOLD_ADDED)).entries
    assert [entry.actor for entry in entries] == ["root via federate"]
