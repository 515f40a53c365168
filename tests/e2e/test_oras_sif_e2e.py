"""A SIF file written from the published SIF layout, pushed as an ORAS artifact to the
local registry, runs as a workflow job's image through ``oras://``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.cluster import Cluster, LocalRegistry
from support.oci_pusher import Pusher
from support.sif_writer import ARCH_CODES, write_sif

from fuzzball_plugins.images.oras_backend import SIF_CONFIG, SIF_LAYER
from fuzzball_plugins.images.platforms import node_platform

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _sif_rootfs(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin/busybox").write_bytes(Path("/bin/busybox").read_bytes())
    (root / "bin/busybox").chmod(0o755)
    for applet in ("sh", "cat"):
        os.symlink("busybox", root / "bin" / applet)
    (root / "opt").mkdir()
    (root / "opt/greeting.txt").write_text("hello from a SIF through oras\n")
    return root


def _node_arch() -> str:
    arch = node_platform().split("/")[1]
    if arch not in ARCH_CODES:
        pytest.skip(f"the SIF writer has no architecture code for {arch}")
    return arch


def _pushed(local_registry: LocalRegistry, sif: Path, repository: str) -> str:
    """Push ``sif`` to the registry as an ORAS artifact, tag 1; its ``oras://`` URI."""
    pusher = Pusher(local_registry.url)
    try:
        pusher.push_artifact(
            repository,
            "1",
            sif.read_bytes(),
            media_type=SIF_LAYER,
            config_media_type=SIF_CONFIG,
            title=sif.name,
        )
    finally:
        pusher.close()
    return f"oras://{local_registry.server.host}/{repository}:1"


def test_a_sif_served_through_oras_runs_a_job_from_its_tree(
    cluster: Cluster, local_registry: LocalRegistry, tmp_path: Path
) -> None:
    sif = write_sif(_sif_rootfs(tmp_path / "rootfs"), tmp_path / "greeter.sif", arch=_node_arch())
    uri = _pushed(local_registry, sif, "tests/greeter")

    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(
        f"version: v1\njobs:\n  greet:\n    image: {{uri: '{uri}'}}\n"
        "    command: [/bin/cat, /opt/greeting.txt]\n",
        name="sif",
    )
    view = orchestrate.wait_for(workflow_id, timeout=120)

    assert view.status == "FINISHED", view
    assert orchestrate.logs(workflow_id, "jobs.greet") == "hello from a SIF through oras\n"
    pull = next(s for s in view.stages if s.name == f"images.{uri}")
    assert pull.status == "FINISHED"


def test_a_sif_jobs_command_runs_after_its_environment_scripts_under_the_jobs_env(
    cluster: Cluster, local_registry: LocalRegistry, tmp_path: Path
) -> None:
    root = _sif_rootfs(tmp_path / "rootfs")
    scripts = root / ".singularity.d/env"
    scripts.mkdir(parents=True)
    # what `apptainer build` writes for %environment
    (scripts / "90-environment.sh").write_text(
        'export PATH="/opt/app/bin:$PATH"\n'
        "export WHO=image\n"
        'export GREETING="hello from %environment"\n'
    )
    (root / "opt/app/bin").mkdir(parents=True)
    (root / "opt/app/bin/greet").write_text('#!/bin/sh\necho "$GREETING, $WHO"\n')
    (root / "opt/app/bin/greet").chmod(0o755)
    sif = write_sif(root, tmp_path / "env.sif", arch=_node_arch())
    uri = _pushed(local_registry, sif, "tests/env-scripts")

    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(
        f"version: v1\njobs:\n  greet:\n    image: {{uri: '{uri}'}}\n"
        "    env: ['WHO=the job']\n    command: [greet]\n",
        name="sif-env",
    )
    view = orchestrate.wait_for(workflow_id, timeout=120)

    assert view.status == "FINISHED", view
    assert orchestrate.logs(workflow_id, "jobs.greet") == "hello from %environment, the job\n"
