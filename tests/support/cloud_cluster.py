"""A cluster that scales on a cloud stand-in: Orchestrate with no node and one provisioner
definition of a cloud driver (4 cores, idle after 2 s, at most 2 nodes), and the boot hook
(:mod:`support.cloud_boot`) turning the stand-in's instances into Substrates here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.vocabulary import InstanceState
from support.cloud_boot import BootHook, CloudView
from support.cluster import InProcessOrchestrate, LocalRegistry, cluster_config, free_port

#: a job no node holds until one is provisioned: 3 of the definition's 4 cores
JOB = """\
version: v1
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo ran on a provisioned cloud node"]
    resource: {cpu: {cores: 3}, memory: {size: 512MiB}}
"""


class CloudCluster:
    """Orchestrate provisioning from definition ``definition_id`` (driver ``driver``, its
    ``config``) and the boot hook watching ``view``."""

    def __init__(
        self,
        directory: Path,
        registry: LocalRegistry,
        *,
        driver: str,
        config: dict[str, Any],
        view: CloudView,
        definition_id: str = "cloud",
        tls: dict[str, Any] | None = None,
    ) -> None:
        settings: dict[str, Any] = cluster_config(
            directory, registry.url, grpc_port=free_port(), tls=tls
        )
        settings["provisioner"] = {
            "definitions": [
                {
                    "id": definition_id,
                    "driver": driver,
                    "cores": 4,
                    "memory": "2GiB",
                    "max-nodes": 2,
                    "idle-timeout": 2,
                    "annotations": {"pool": definition_id},
                    "cost-per-hour-estimate": 0.192,
                    "config": config,
                }
            ]
        }
        self.orchestrate = InProcessOrchestrate(settings)
        try:
            # what the machine image brings: this machine's share, the registry mirror
            self.hook = BootHook(
                directory / "machines",
                view,
                substrate={"cores": 4, "memory": "2GiB"},
                base={"images": settings["images"]},
            )
        except BaseException:
            self.orchestrate.close()
            raise

    @property
    def provisioning(self) -> Provisioning:
        provisioning = self.orchestrate.orchestrate.engine.context.provisioning
        assert provisioning is not None
        return provisioning

    def run_job(self, timeout: float = 180) -> str:
        """Submit :data:`JOB`, wait for it to finish (failing with the nodes' logs)."""
        workflow = self.orchestrate.start_workflow(JOB)
        view = self.orchestrate.wait_for(workflow, timeout=timeout)
        assert view.status == "FINISHED", (view, self.hook.logs()[-3000:], self.hook.errors)
        assert "ran on a provisioned cloud node" in self.orchestrate.logs(workflow)
        return workflow

    def close(self) -> None:
        try:
            live = [InstanceState.CREATING, InstanceState.CREATED]
            for record in self.provisioning.records(live):
                self.orchestrate.call(lambda record=record: self.provisioning.delete(record.id))
        finally:
            self.hook.close()
            self.orchestrate.close()
