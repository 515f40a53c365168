"""What a workflow asks of a member: one :class:`StepNeed` per job and service, the
persistent volumes it mounts (:class:`VolumeNeed`) and the storage class each of its volumes
needs (:class:`StorageNeed`).

Federate's routers rank members by these, and Federate names the largest of them when no
member can run a workflow; both read them here, so neither depends on the other.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from fuzzball_core.spec import ParsedWorkflow, parse_workflow
from fuzzball_core.spec.models import Volume
from fuzzball_core.spec.resources import job_resources
from fuzzball_federation.offers import NodeShape, Provisionable

GIB = 1024**3
VOLUME_SCHEME = "volume://"


@dataclass(frozen=True)
class StepNeed:
    """What one job (or service) asks of each node it runs on, of how many nodes, and for
    how long (``hours``: its ``policy.timeout.execute``; None when it declares none)."""

    name: str
    cores: int
    memory: int
    devices: Mapping[str, int] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    nodes: int = 1
    hours: float | None = None

    def describe(self) -> str:
        """``jobs.train: 4 cores, 8 GiB, nvidia.com/gpu=1 per node``."""
        parts = [f"{self.cores} cores", f"{self.memory / GIB:.4g} GiB"]
        parts += [f"{kind}={count}" for kind, count in sorted(self.devices.items()) if count]
        parts += [f"{key}={value}" for key, value in sorted(self.annotations.items())]
        per = f" on each of {self.nodes} nodes" if self.nodes > 1 else " per node"
        return f"{self.name}: {', '.join(parts)}{per}"

    def fits(self, node: NodeShape | Provisionable) -> bool:
        """Whether one node's total capacity and annotations can hold this step."""
        return (
            node.cores >= self.cores
            and node.memory >= self.memory
            and all(node.devices.get(kind, 0) >= count for kind, count in self.devices.items())
            and all(node.annotations.get(k) == v for k, v in self.annotations.items())
        )

    def fits_free(self, node: NodeShape) -> bool:
        """Whether one node's free capacity holds this step now (annotations included)."""
        return (
            node.free_cores >= self.cores
            and node.free_memory >= self.memory
            and all(node.free_devices.get(k, 0) >= count for k, count in self.devices.items())
            and all(node.annotations.get(k) == v for k, v in self.annotations.items())
        )


@dataclass(frozen=True)
class VolumeNeed:
    """A persistent volume a workflow mounts, by its ``volume://SCOPE/CLASS/NAME``."""

    name: str
    reference: str


@dataclass(frozen=True)
class StorageNeed:
    """A storage class a workflow's volume needs on the member running it: the volume's
    name, its ``volume://`` reference and the class that reference names."""

    name: str
    reference: str
    storage_class: str


def persistent_reference(volume: Volume) -> str | None:
    """The ``volume://`` reference of a named persistent volume (the volume's
    :attr:`~fuzzball_core.spec.models.Volume.storage_reference` when it names a volume of a
    class other than ``ephemeral``); None for ephemeral, host and nameless volumes."""
    reference = volume.storage_reference
    if reference is None:
        return None
    parts = [p for p in reference.removeprefix(VOLUME_SCHEME).split("/") if p]
    if len(parts) >= 3 and parts[1] != "ephemeral":
        return VOLUME_SCHEME + "/".join(parts)
    return None


def parsed_needs(parsed: ParsedWorkflow) -> list[StepNeed]:
    """Every job's and service's per-node request of a parsed workflow."""
    needs = []
    for prefix, steps in (("jobs", parsed.jobs), ("services", parsed.services)):
        for name, step in steps.items():
            resources = job_resources(step)
            resource = step.resource
            multinode = getattr(step, "multinode", None)
            policy = getattr(step, "policy", None)
            timeout = policy.timeout if policy is not None else None
            seconds = timeout.execute_seconds if timeout is not None else None
            needs.append(
                StepNeed(
                    name=f"{prefix}.{name}",
                    cores=resources.cores,
                    memory=resources.memory,
                    devices={k: v for k, v in resources.devices.items() if v},
                    annotations=dict((resource.annotations if resource else None) or {}),
                    nodes=multinode.nodes if multinode is not None else 1,
                    hours=seconds / 3600 if seconds is not None else None,
                )
            )
    return needs


def parsed_volumes(parsed: ParsedWorkflow) -> list[VolumeNeed]:
    """The named persistent volumes a parsed workflow declares."""
    found = []
    for name, volume in (parsed.model.volumes or {}).items():
        reference = persistent_reference(volume)
        if reference is not None:
            found.append(VolumeNeed(name, reference))
    return found


def parsed_storage(parsed: ParsedWorkflow) -> list[StorageNeed]:
    """The storage class of each volume a parsed workflow declares (ephemeral and nameless
    ones too: every class must exist where it runs); none for host directories."""
    found = []
    for name, volume in (parsed.model.volumes or {}).items():
        reference = volume.storage_reference
        if reference is None:
            continue
        parts = [p for p in reference.removeprefix(VOLUME_SCHEME).split("/") if p]
        if len(parts) >= 2:
            found.append(StorageNeed(name, reference, parts[1]))
    return found


def _parse(workflow: Mapping[str, Any]) -> ParsedWorkflow:
    return parse_workflow(yaml.safe_dump(dict(workflow), sort_keys=False), source="<federate>")


class _Recent(threading.local):
    """The needs of the last workflow mapping read, per thread: a router reads one workflow
    several times in one decision (route, rejections, explanation); the mapping itself is
    kept so its id is not reused while it is remembered."""

    workflow: Mapping[str, Any] | None = None
    needs: tuple[list[StepNeed], list[VolumeNeed], list[StorageNeed]] = ([], [], [])


_recent = _Recent()


def _read(
    workflow: Mapping[str, Any],
) -> tuple[list[StepNeed], list[VolumeNeed], list[StorageNeed]]:
    if _recent.workflow is not workflow:
        remember(workflow, _parse(workflow))
    return _recent.needs


def remember(workflow: Mapping[str, Any], parsed: ParsedWorkflow) -> None:
    """Read ``workflow``'s needs from ``parsed`` (the same workflow, already parsed) for the
    router's reads in this thread, instead of parsing the mapping again."""
    _recent.needs = (parsed_needs(parsed), parsed_volumes(parsed), parsed_storage(parsed))
    _recent.workflow = workflow


def workflow_needs(workflow: Mapping[str, Any]) -> list[StepNeed]:
    """Every job's and service's per-node request, from a v4 (or v1) definition mapping."""
    return list(_read(workflow)[0])


def workflow_volumes(workflow: Mapping[str, Any]) -> list[VolumeNeed]:
    """The named persistent volumes of a v4 (or v1) definition mapping."""
    return list(_read(workflow)[1])


def workflow_storage(workflow: Mapping[str, Any]) -> list[StorageNeed]:
    """The storage class each volume of a v4 (or v1) definition mapping needs."""
    return list(_read(workflow)[2])
