"""A ``fuzzball local`` deployment for tests: its configuration (Orchestrate and one Substrate
on loopback ports, docker.io mirrored to a loopback registry holding a busybox-based
library/alpine:latest) and the environment the CLI runs in, taken down afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from support.cluster import LocalRegistry, free_port

#: the CLI, as a user runs it
FUZZBALL = [sys.executable, "-m", "fuzzball_core.cli"]


@contextmanager
def local_deployment(directory: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """(configuration file, environment) of a deployment under ``directory``; ``local down``
    on the way out, whatever the test left running."""
    registry = LocalRegistry(directory / "registry")
    config = directory / "fuzzball.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "data-dir": str(directory / "data"),
                "orchestrate": {
                    "grpc-listen": f"127.0.0.1:{free_port()}",
                    "rest-listen": f"127.0.0.1:{free_port()}",
                },
                "substrate": {
                    "node-name": "local-node",
                    "cores": 2,
                    "memory": "2GiB",
                    # its own port: another agent on this machine may hold the default 9100
                    "metrics-listen": f"127.0.0.1:{free_port()}",
                },
                "images": {"registries": {"docker.io": {"mirrors": [registry.url]}}},
            }
        )
    )
    env = {**os.environ, "HOME": str(directory / "home"), "FUZZBALL_CONFIG": str(config)}
    env.pop("XDG_CONFIG_HOME", None)
    try:
        yield config, env
    finally:
        subprocess.run([*FUZZBALL, "local", "down"], env=env, capture_output=True, timeout=60)
        registry.stop()


def fuzzball(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``fuzzball ARGS`` in ``env``."""
    return subprocess.run([*FUZZBALL, *args], env=env, capture_output=True, text=True, timeout=180)
