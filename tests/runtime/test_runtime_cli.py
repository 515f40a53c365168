"""The ``fuzzball-runtime`` debug CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fuzzball_runtime.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_exits_with_the_command_exit_code(image, state_dir) -> None:
    result = cli("run", "--state-dir", str(state_dir), str(image), "--", "sh", "-c", "exit 9")
    assert result.returncode == 9


def test_run_exits_128_plus_the_signal_that_killed_the_command(image, state_dir) -> None:
    result = cli("run", "--state-dir", str(state_dir), str(image), "--", "sh", "-c", "kill $$")
    assert result.returncode == 128 + 15


def test_run_leaves_no_journal_of_its_containers_behind(image, state_dir) -> None:
    journals = set((state_dir / "containers").glob("*.records"))
    result = cli("run", "--state-dir", str(state_dir), str(image), "--", "true")
    assert result.returncode == 0, result.stderr
    # its container ended: nothing is left for a sweep to read
    assert set((state_dir / "containers").glob("*.records")) == journals


def test_run_applies_hostname_uid_gid_and_binds(image, state_dir, tmp_path) -> None:
    tmp_path.chmod(0o755)  # readable by uid 7
    (tmp_path / "in.txt").write_text("bound\n")
    result = cli(
        "run",
        "--state-dir",
        str(state_dir),
        "--hostname",
        "cli-box",
        "--uid",
        "7",
        "--gid",
        "8",
        "--bind",
        f"{tmp_path}:/mnt",
        str(image),
        "--",
        "sh",
        "-c",
        "hostname; id -u; id -g; cat /mnt/in.txt",
    )
    assert result.stdout.split() == ["cli-box", "7", "8", "bound"]


def test_run_prints_warnings_and_metering_json_on_stderr(image, state_dir) -> None:
    result = cli(
        "run",
        "--state-dir",
        str(state_dir),
        "--memory",
        "1G",
        "--metering",
        str(image),
        "--",
        "true",
    )
    assert result.returncode == 0
    lines = result.stderr.strip().splitlines()
    assert any("warning: RLIMIT_MEMLOCK" in line for line in lines)
    counters = json.loads(lines[-1])
    assert set(counters) == {"ingress_bytes", "ingress_packets", "egress_bytes", "egress_packets"}


def test_run_reports_a_start_failure_without_a_traceback(image, state_dir) -> None:
    result = cli("run", "--state-dir", str(state_dir), str(image), "--", "/missing")
    assert result.returncode == 125
    assert "exec /missing: No such file or directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_build_image_reports_a_missing_directory(tmp_path) -> None:
    result = cli("build-image", str(tmp_path / "nope"), str(tmp_path / "out.erofs"))
    assert result.returncode == 125
    assert "not a directory" in result.stderr
    assert not Path(tmp_path / "out.erofs").exists()
