"""``fuzzball-substrate`` refuses to start (exit code 2) on a configuration it cannot use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SUBSTRATE = "from fuzzball_core.substrate.main import main; main()"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SUBSTRATE, *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("substrate:\n  node-tokn: x\n", "substrate.node-tokn: unknown key"),
        ("substrate:\n  cores: 0\n", "substrate.cores"),
        ("substrate:\n  cores: 2\n", "substrate.node-token: must be set"),
        ("substrate:\n  job-subnet: 10.0.0.0/33\n", "substrate.job-subnet"),
        ("substrate:\n  job-subnet: 10.0.0.0/31\n", "too small for jobs"),
        ("plugins:\n  require: [no-such-plugin]\n", "no-such-plugin"),
    ],
)
def test_bad_configuration_refuses_to_start_with_exit_code_2(
    tmp_path: Path, content: str, message: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(content)

    result = _run("--config", str(config))

    assert result.returncode == 2
    assert "fuzzball-substrate: cannot start:" in result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unreadable_configuration_file_refuses_to_start(tmp_path: Path) -> None:
    result = _run("--config", str(tmp_path / "missing.yaml"))

    assert result.returncode == 2
    assert "missing.yaml" in result.stderr


def test_startup_objects_are_frozen_and_later_garbage_is_still_collected() -> None:
    check = """
import gc
from fuzzball_core.console import settle_startup_objects
settle_startup_objects()
frozen = gc.get_freeze_count()
class Cycle:
    pass
first, second = Cycle(), Cycle()
first.other, second.other = second, first
del first, second
print(frozen, gc.collect())
"""
    result = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=60
    )

    frozen, collected = (int(word) for word in result.stdout.split())
    assert frozen > 10_000  # the imported modules' objects
    assert collected >= 2  # the cycle made after start-up
