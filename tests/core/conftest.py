"""Fixtures for the core tests: third-party plugin packages installed with pip."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "plugins"


def pip_install_to(package: str, target: Path) -> None:
    """Install a fixture package with pip into its own directory (a throwaway site dir)."""
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
            str(FIXTURES / package),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )


@pytest.fixture(scope="session")
def example_plugin_site(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("example-plugin-site")
    pip_install_to("fuzzball-example-plugin", target)
    return target


@pytest.fixture(scope="session")
def broken_plugin_site(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("broken-plugin-site")
    pip_install_to("fuzzball-broken-plugin", target)
    return target


Runner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_with_sites(tmp_path) -> Runner:
    """Run a command with the given plugin sites on PYTHONPATH, as if pip had installed them."""

    def run(
        *argv: str,
        sites: tuple[Path, ...] = (),
        config: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "FUZZBALL_CONFIG"}
        env["PYTHONPATH"] = os.pathsep.join(str(s) for s in sites)
        if config is not None:
            path = tmp_path / "config.yaml"
            path.write_text(config)
            env["FUZZBALL_CONFIG"] = str(path)
        return subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=120)

    return run
