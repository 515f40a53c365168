"""The launcher of a node's several ranks (``ranks.LAUNCHER_SCRIPT``): the first rank to fail
takes the others down and the part exits with that rank's code, as ``srun
--kill-on-bad-exit`` does. Run with ``sh`` in a mount namespace of its own with a fresh /tmp
(where the launcher notes the failed rank, as in a container) and a session of its own (its
signals go to its process group)."""

from __future__ import annotations

import subprocess
import time

import pytest

from fuzzball_core.substrate.ranks import LAUNCHER_SCRIPT

pytestmark = pytest.mark.root


def launch(count: int, command: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``command`` as ranks 0 to ``count - 1`` under the launcher; its result and
    seconds taken."""
    began = time.monotonic()
    in_fresh_tmp = 'mount -t tmpfs none /tmp && exec sh -c "$0" launcher 0 "$1" sh -c "$2"'
    isolated = ["unshare", "--mount", "--propagation", "private", "sh", "-c", in_fresh_tmp]
    result = subprocess.run(
        [*isolated, LAUNCHER_SCRIPT, str(count), command],
        capture_output=True,
        start_new_session=True,
        timeout=60,
    )
    return result, time.monotonic() - began


def test_the_first_failing_rank_stops_the_others_and_the_part_exits_with_its_code():
    result, took = launch(3, 'if [ "$FB_RANK" = 2 ]; then exit 5; fi; sleep 30')
    assert result.returncode == 5
    assert b"rank 2 exited with code 5" in result.stderr
    assert took < 20  # the sleeping ranks were stopped, not waited for


def test_ranks_that_all_succeed_end_the_part_well():
    result, _ = launch(3, 'echo "rank $FB_RANK of local $FB_LOCAL_RANK"')
    assert result.returncode == 0
    assert sorted(result.stdout.decode().splitlines()) == [
        "rank 0 of local 0",
        "rank 1 of local 1",
        "rank 2 of local 2",
    ]
