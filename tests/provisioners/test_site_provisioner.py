"""The example site provisioner (examples/site-provisioner), pip-installed as a site would:
``fuzzball plugin list`` shows it, and a workflow scales through it (its batch "jobs" are
Substrates started on this machine by tests/support/batch_node.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from stevedore.extension import ExtensionManager
from support.cluster import (
    InProcessOrchestrate,
    LocalRegistry,
    cluster_config,
    free_port,
    have_prerequisites,
)

from fuzzball_core import plugins
from fuzzball_core.vocabulary import InstanceState

pytestmark = pytest.mark.slow  # pip builds the package; the workflow boots a node

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "examples" / "site-provisioner"
BATCH_NODE = REPO / "tests" / "support" / "batch_node.py"

JOB = """\
version: v1
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo from the batch node"]
    resource: {cpu: {cores: 2}, memory: {size: 256MiB}}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package installed with pip into a directory of its own (a site's site-packages)."""
    target = tmp_path_factory.mktemp("site-provisioner")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(PACKAGE),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    return target


def test_plugin_list_shows_the_site_provisioner(site):
    env = {k: v for k, v in os.environ.items() if k != "FUZZBALL_CONFIG"}
    env["PYTHONPATH"] = str(site)
    listed = subprocess.run(
        [sys.executable, "-m", "fuzzball_core.cli", "plugin", "list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    ).stdout
    (line,) = [line for line in listed.splitlines() if "site-batch" in line]
    assert "provisioner" in line
    assert "fuzzball-site-provisioner" in line
    assert "ok" in line


@pytest.fixture
def orchestrate(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InProcessOrchestrate]:
    missing = have_prerequisites()
    if missing is not None:
        pytest.skip(missing)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(plugins, "_REGISTRY", None)  # discover the newly installed package
    # stevedore keeps the entry points it read per group for the process: read them afresh
    monkeypatch.setattr(ExtensionManager, "ENTRY_POINT_CACHE", {})
    registry = LocalRegistry(tmp_path / "registry")
    config: dict[str, Any] = cluster_config(tmp_path, registry.url, grpc_port=free_port())
    base = tmp_path / "node-base.yaml"
    base.write_text(yaml.safe_dump({"images": config["images"], "tls": config["tls"]}))
    submit = f"{sys.executable} {BATCH_NODE} {{user_data}} {base} {tmp_path / 'nodes'}"
    config["provisioner"] = {
        "definitions": [
            {
                "id": "batch",
                "driver": "site-batch",
                "cores": 2,
                "memory": "1GiB",
                "idle-timeout": 1,
                "config": {
                    "state-dir": str(tmp_path / "batch"),
                    "submit": submit,
                    # a batch node whose processes already ended is deleted, as scancel
                    # of an ended job is not an error
                    "cancel": 'sh -c "kill -TERM -- -{job_id} 2>/dev/null'
                    ' || ! kill -0 -- -{job_id} 2>/dev/null"',
                },
            }
        ]
    }
    running = InProcessOrchestrate(config)
    yield running
    running.close()
    registry.stop()


def test_a_workflow_scales_through_the_site_provisioner(orchestrate):
    workflow = orchestrate.start_workflow(JOB)
    view = orchestrate.wait_for(workflow, timeout=120)
    assert view.status == "FINISHED", view
    assert "from the batch node" in orchestrate.logs(workflow)
    provisioning = orchestrate.orchestrate.engine.context.provisioning
    (record,) = provisioning.records()
    deadline = time.monotonic() + 60
    while record.state is not InstanceState.DELETED:
        assert time.monotonic() < deadline, record.history
        time.sleep(0.2)
    assert record.definition_id == "batch"
