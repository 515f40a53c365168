"""orchestrate.logs on a real cluster: a job printing far more than its limit leaves only what
fits and a line saying where it was cut and how much was dropped, read back whole with the
``fuzzball`` CLI; the rest of the workflow's limit is shared by its tasks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cluster import Cluster

pytestmark = [pytest.mark.root, pytest.mark.slow]

FUZZBALL = [sys.executable, "-m", "fuzzball_core.cli"]

#: What the job prints, the numbers 1 to COUNT: 1.2 MB, far past the job's limit below.
COUNT = 200_000
EVERYTHING = "".join(f"{n}\n" for n in range(1, COUNT + 1))
JOB_LIMIT = 64 * 1024

SEQ = f"""
version: v1
jobs:
  chatty:
    image: {{uri: docker://alpine:latest}}
    command: [sh, -c, 'i=1; while [ $i -le {COUNT} ]; do echo $i; i=$((i+1)); done']
"""

MARKER = re.compile(
    r"\[fuzzball\] output cut here: (?P<key>\S+) \((?P<limit>\d+) bytes\) reached;"
    r" (?P<bytes>\d+) bytes \((?P<lines>\d+) lines?\) more were counted, not stored\n$"
)


def cli(cluster: Cluster, home: Path) -> Callable[..., str]:
    """``fuzzball ARGS`` as a user of the cluster, in a process of its own; its stdout."""
    orchestrate = cluster.orchestrate
    _, token = orchestrate.call(lambda: orchestrate.service.create_account(f"logs-{home.name}"))
    env = {**os.environ, "XDG_CONFIG_HOME": str(home)}

    def run(*args: str) -> str:
        done = subprocess.run(
            [*FUZZBALL, *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run("context", "create", "e2e", "--address", orchestrate.rest_url, "--token", token)
    return run


def finished(cluster: Cluster, fuzzball: Callable[..., str], spec: str, path: Path) -> str:
    path.write_text(spec)
    workflow_id = json.loads(fuzzball("workflow", "start", str(path), "-o", "json"))["id"]
    view = cluster.orchestrate.wait_for(workflow_id, timeout=120)
    assert view.status == "FINISHED", view
    return workflow_id


def stored_part(output: str, cut: re.Match[str]) -> str:
    """What was stored before the cut: the output up to the marker, less the newline the
    marker opens with when the output was cut in the middle of a line."""
    stored = output[: len(EVERYTHING) - int(cut["bytes"])]
    assert output[len(stored) : cut.start()] in ("", "\n")
    return stored


def test_a_job_past_its_limit_keeps_what_fits_and_says_how_much_was_dropped(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = make_cluster(agents=1, orchestrate={"logs": {"max-bytes-per-job": "64KiB"}})
    fuzzball = cli(cluster, tmp_path / "home")
    workflow_id = finished(cluster, fuzzball, SEQ, tmp_path / "seq.yaml")

    output = fuzzball("workflow", "logs", workflow_id, "chatty")

    cut = MARKER.search(output)
    assert cut is not None, output[-500:]
    stored = stored_part(output, cut)
    assert EVERYTHING.startswith(stored)
    # cut after the last whole line that fit, or at the limit when the output that fit
    # ended inside a line
    assert JOB_LIMIT - 8 < len(stored) <= JOB_LIMIT
    assert cut["key"] == "orchestrate.logs.max-bytes-per-job"
    assert int(cut["limit"]) == JOB_LIMIT
    assert int(cut["lines"]) == COUNT - len(stored.splitlines())


def test_the_tasks_of_a_workflow_share_its_limit(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    room_left = 1000
    cluster = make_cluster(
        agents=1,
        orchestrate={"logs": {"max-bytes-per-workflow": len(EVERYTHING) + room_left}},
    )
    fuzzball = cli(cluster, tmp_path / "home")
    # one task after the other: the first prints all it has, the second finds the rest
    pair = SEQ.replace(
        "    command:", "    task-array: {start: 1, end: 2, concurrency: 1}\n    command:"
    )
    workflow_id = finished(cluster, fuzzball, pair, tmp_path / "pair.yaml")

    first, second = (
        fuzzball("workflow", "logs", workflow_id, "chatty", "--task", task) for task in ("1", "2")
    )

    assert first == EVERYTHING
    cut = MARKER.search(second)
    assert cut is not None, second[-500:]
    stored = stored_part(second, cut)
    assert EVERYTHING.startswith(stored)
    assert room_left - 8 < len(stored) <= room_left
    assert cut["key"] == "orchestrate.logs.max-bytes-per-workflow"
