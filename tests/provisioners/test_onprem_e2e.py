"""The ``onprem`` provisioner end to end: an inventory of two "machines" whose power-on
command starts a Substrate on this machine from the user data (tests/support/batch_node.py)
and whose power-off command stops it. A workflow whose job fits no node wakes one machine,
runs there, and the idle machine is powered off once."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cluster import (
    InProcessOrchestrate,
    LocalRegistry,
    cluster_config,
    free_port,
    have_prerequisites,
)

from fuzzball_core.vocabulary import InstanceState

pytestmark = [pytest.mark.root, pytest.mark.slow]

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)

BATCH_NODE = Path(__file__).resolve().parents[1] / "support" / "batch_node.py"
JOB = """\
version: v1
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo woken"]
    resource: {cpu: {cores: 2}, memory: {size: 256MiB}}
"""


@pytest.fixture
def orchestrate(tmp_path: Path) -> Iterator[tuple[InProcessOrchestrate, Path]]:
    registry = LocalRegistry(tmp_path / "registry")
    config: dict[str, Any] = cluster_config(tmp_path, registry.url, grpc_port=free_port())
    base = tmp_path / "node-base.yaml"
    base.write_text(yaml.safe_dump({"images": config["images"], "tls": config["tls"]}))
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    power_on = f"{sys.executable} {BATCH_NODE} {{user_data}} {base} {nodes} {nodes}/{{host}}.pid"
    # Substrate exits by itself once Orchestrate deprovisions its node, so the machine may be
    # "off" already; powering off an off machine succeeds, as ipmitool's does
    pid_file = f"{nodes}/{{host}}.pid"
    power_off = (
        f"sh -c '(kill -TERM -$(cat {pid_file}) 2>/dev/null"
        f" || ! kill -0 -$(cat {pid_file}) 2>/dev/null) && rm {pid_file}'"
    )
    config["provisioner"] = {
        "definitions": [
            {
                "id": "rack",
                "driver": "onprem",
                "cores": 2,
                "memory": "1GiB",
                "max-nodes": 2,
                "idle-timeout": 1,
                "config": {
                    "state-dir": str(tmp_path / "onprem"),
                    "inventory": [
                        {"host": f"rack-{n}", "power-on": power_on, "power-off": power_off}
                        for n in (1, 2)
                    ],
                },
            }
        ]
    }
    running = InProcessOrchestrate(config)
    yield running, nodes
    running.close()
    for pid_file in nodes.glob("*.pid"):  # a machine the test left on
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid_file.read_text()), 9)
    registry.stop()


def test_a_job_wakes_one_machine_which_is_powered_off_once_idle(orchestrate):
    running, nodes = orchestrate
    workflow = running.start_workflow(JOB)
    view = running.wait_for(workflow, timeout=120)
    assert view.status == "FINISHED", view
    assert "woken" in running.logs(workflow)
    provisioning = running.orchestrate.engine.context.provisioning
    (record,) = provisioning.records()
    assert record.driver_id == f"{record.name}@rack-1"
    deadline = time.monotonic() + 60
    while record.state is not InstanceState.DELETED:
        assert time.monotonic() < deadline, record.history
        time.sleep(0.2)
    assert list(nodes.glob("*.pid")) == []  # powered off: the power-off command ran once
