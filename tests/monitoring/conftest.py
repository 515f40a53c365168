"""Fixtures of the monitoring tests: an Orchestrate serving its Alertmanager receiver, with
scripted nodes (registered without agents) and the monitoring service account."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import InProcessOrchestrate, cluster_config, free_port
from support.monitoring import Receiver

from fuzzball_core.vocabulary import AccountKind


@pytest.fixture
def make_receiver(tmp_path: Path) -> Iterator[Callable[..., Receiver]]:
    """Start an Orchestrate with its receiver; ``settings`` are more configuration keys."""
    made: list[InProcessOrchestrate] = []

    def make(**settings: Any) -> Receiver:
        directory = tmp_path / f"orchestrate-{len(made) + 1}"
        directory.mkdir()
        webhook = f"127.0.0.1:{free_port()}"
        ca_dir = directory / "monitoring-ca"
        config = cluster_config(directory, "http://127.0.0.1:9", grpc_port=free_port())
        config["monitoring"] = {"webhook-listen": webhook, "ca-dir": str(ca_dir)}
        config.update(settings)
        orchestrate = InProcessOrchestrate(config)
        made.append(orchestrate)
        service = orchestrate.service
        _, token = orchestrate.call(
            lambda: service.create_account("monitoring", kind=AccountKind.MONITORING)
        )
        receiver = Receiver(orchestrate, webhook, ca_dir, token)
        receiver.wait_serving(directory)
        return receiver

    yield make
    for orchestrate in made:
        orchestrate.close()
