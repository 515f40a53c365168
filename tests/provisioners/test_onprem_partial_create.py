"""The ``onprem`` driver asked for more instances than its inventory has free machines: the
launches that got a machine are created, the rest refused, and nothing powered on is
forgotten (the real driver and provisioning loop; power commands that only log)."""

from __future__ import annotations

from pathlib import Path

from fuzzball_core.config import ProvisionerConfig
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.vocabulary import InstanceState
from fuzzball_provisioners.onprem import OnPremProvisioner

DEADLINE, GRACE = 60, 60


def rack(tmp_path: Path, clock: list[float]) -> tuple[Provisioning, Path]:
    """A definition of max-nodes 3 over an inventory of two machines; the power log."""
    log = tmp_path / "power.log"
    inventory = [
        {
            "host": host,
            "power-on": f"sh -c 'echo on {{host}} >> {log}'",
            "power-off": f"sh -c 'echo off {{host}} >> {log}'",
        }
        for host in ("n1", "n2")
    ]
    config = ProvisionerConfig.model_validate(
        {
            "definitions": [
                {
                    "id": "rack",
                    "driver": "onprem",
                    "cores": 4,
                    "memory": "8GiB",
                    "max-nodes": 3,
                    "config": {"state-dir": str(tmp_path / "state"), "inventory": inventory},
                }
            ],
            "registration-deadline": DEADLINE,
            "unregistered-grace": GRACE,
        }
    )
    provisioning = Provisioning(
        config, {"onprem": OnPremProvisioner()}, node_address="127.0.0.1:1", clock=lambda: clock[0]
    )
    return provisioning, log


def powered(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_the_launches_that_got_a_machine_are_created_and_the_rest_refused(tmp_path):
    provisioning, log = rack(tmp_path, [1000.0])
    records = provisioning.create("rack", 3)
    assert [r.state for r in records] == [
        InstanceState.CREATING,
        InstanceState.CREATING,
        InstanceState.ERROR,
    ]
    assert [r.driver_id.partition("@")[2] for r in records[:2]] == ["n1", "n2"]
    assert "every machine of rack is in use" in records[2].detail
    assert powered(log) == ["on n1", "on n2"]


def test_machines_of_a_partial_create_are_powered_off_and_reused_when_they_never_register(
    tmp_path,
):
    clock = [1000.0]
    provisioning, log = rack(tmp_path, clock)
    provisioning.create("rack", 3)
    clock[0] += DEADLINE + GRACE + 1
    provisioning.sweep({})
    assert sorted(powered(log)[2:]) == ["off n1", "off n2"]
    (again,) = provisioning.create("rack", 1)
    assert again.state is InstanceState.CREATING
