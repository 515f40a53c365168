"""A persistent volume outlives its workflow and the deployment's restart: a workflow writes
to volume://user/persistent/results, and after ``fuzzball local down && fuzzball local up``
a second workflow reads the same bytes (the default ``persistent`` class: node-local volumes
beneath the Substrate's work directory)."""

from __future__ import annotations

import json
from pathlib import Path

from support.local_deployment import fuzzball, local_deployment

WRITE = """version: v4
volumes:
  results: {reference: volume://user/persistent/results}
jobs:
  write:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "printf 'kept-bytes-%s' 7f3a > /results/out.txt"]
    mounts: {/results: results}
"""

READ = WRITE.replace("write:", "read:").replace(
    "\"printf 'kept-bytes-%s' 7f3a > /results/out.txt\"", "'cat /results/out.txt'"
)


def test_a_persistent_volume_keeps_its_bytes_across_workflows_and_a_restart(tmp_path: Path):
    (tmp_path / "write.yaml").write_text(WRITE)
    (tmp_path / "read.yaml").write_text(READ)
    with local_deployment(tmp_path) as (_, env):
        up = fuzzball(env, "local", "up")
        assert up.returncode == 0, up.stdout + up.stderr
        wrote = fuzzball(env, "workflow", "start", "--wait", str(tmp_path / "write.yaml"))
        assert wrote.returncode == 0, wrote.stdout + wrote.stderr

        down = fuzzball(env, "local", "down")
        assert down.returncode == 0, down.stdout + down.stderr
        again = fuzzball(env, "local", "up")
        assert again.returncode == 0, again.stdout + again.stderr

        read = fuzzball(env, "workflow", "start", "--wait", "--logs", str(tmp_path / "read.yaml"))
        assert read.returncode == 0, read.stdout + read.stderr
        assert "kept-bytes-7f3a" in read.stdout
        listed = fuzzball(env, "volume", "list", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        (volume,) = json.loads(listed.stdout)
        assert volume["reference"] == "volume://user/persistent/results"
        assert volume["node"]  # the node-local volume's holding node
