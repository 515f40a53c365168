"""``fuzzball local up --provisioner local``: the local deployment with no static node, its
nodes provisioned on demand by the ``local`` provisioner (docs/provisioners.md).

Up adds one definition, ``local``, the size of this machine, whose instances are Substrate
processes under the deployment directory and read the deployment's configuration for their
image and TLS settings; down deletes every instance it started before Orchestrate stops.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fuzzball_core.config import FuzzballConfig
from fuzzball_core.drivers import InstanceSpec
from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.plugins import get_registry

#: the provisioners ``local up`` can use
CHOICES = ("local",)
#: the definition ``local up --provisioner local`` adds
DEFINITION_ID = "local"


def _memory_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise FailedPrecondition("/proc/meminfo names no MemTotal: cannot size the local nodes")


def add_local_definition(
    document: dict[str, Any], directory: Path, config_file: Path, provisioner: str
) -> None:
    """Give ``document`` the ``local`` definition (unless it has definitions of its own):
    nodes the size of this machine, at most 2, idle after 5 minutes."""
    if provisioner not in CHOICES:
        raise FailedPrecondition(
            f"--provisioner {provisioner}: local up provisions with {', '.join(CHOICES)} only"
        )
    section = document.setdefault("provisioner", {})
    if section.get("definitions"):
        return  # the user's own definitions
    section["definitions"] = [
        {
            "id": DEFINITION_ID,
            "driver": "local",
            "cores": os.cpu_count() or 1,
            "memory": _memory_bytes(),
            "max-nodes": 2,
            "idle-timeout": 300,
            "config": {"state-dir": str(directory / "instances"), "base-config": str(config_file)},
        }
    ]


def delete_local_instances(config: FuzzballConfig) -> list[str]:
    """Delete every instance the ``local`` definitions started; return their ids."""
    definitions = [d for d in config.provisioner.definitions if d.driver == "local"]
    if not definitions:
        return []
    driver = get_registry().driver("fuzzball.provisioners", "local")
    for definition in definitions:  # shows the driver where its instances live
        driver.check_definition(
            InstanceSpec(
                definition.id,
                definition.cores,
                definition.memory,
                driver_config=dict(definition.config),
            )
        )
    deleted = []
    for instance in driver.list_instances():
        driver.delete(instance.instance_id)
        deleted.append(instance.instance_id)
    return deleted
