"""What a bind (a workflow volume, a job's files, a device plugin's files and sockets) lets a
job do: nothing set-user-ID and no device, whatever a job or the host left on it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from support.static_program import build_static_program

from fuzzball_runtime import Bind

pytestmark = pytest.mark.root

# Prints the effective uid it runs with (busybox drops a set-user-ID root's privileges itself).
_EUID_SOURCE = r"""
#include <stdio.h>
#include <unistd.h>

int main(void) {
    printf("%d\n", (int)geteuid());
    return 0;
}
"""


def _volume(tmp_path: Path) -> Path:
    volume = tmp_path / "volume"
    volume.mkdir(mode=0o755)
    return volume


def test_a_set_user_id_root_program_on_a_volume_runs_as_the_job_user(run, tmp_path) -> None:
    volume = _volume(tmp_path)
    program = build_static_program(volume, "euid", _EUID_SOURCE)
    os.chown(program, 0, 0)
    program.chmod(0o4755)
    status, output = run("/data/euid", binds=[Bind(str(volume), "/data")], uid=1000, gid=1000)
    assert (status.exit_code, output) == (0, "1000\n")


def test_a_device_node_on_a_volume_cannot_be_opened(run, tmp_path) -> None:
    volume = _volume(tmp_path)
    os.mknod(volume / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    status, output = run("exec 2>&1; echo probe > /data/null", binds=[Bind(str(volume), "/data")])
    assert status.exit_code != 0
    assert "can't create /data/null: Permission denied" in output
