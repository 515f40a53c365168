"""What a workflow asks of a member's nodes: one :class:`StepNeed` per job and service.

Federate's routers rank members by these, and Federate names the largest of them when no
member can run a workflow; both read them here, so neither depends on the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from fuzzball_core.spec import parse_workflow
from fuzzball_core.spec.resources import job_resources
from fuzzball_federation.offers import NodeShape

GIB = 1024**3


@dataclass(frozen=True)
class StepNeed:
    """What one job (or service) asks of each node it runs on, and of how many nodes."""

    name: str
    cores: int
    memory: int
    devices: Mapping[str, int] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    nodes: int = 1

    def describe(self) -> str:
        """``jobs.train: 4 cores, 8 GiB, nvidia.com/gpu=1 per node``."""
        parts = [f"{self.cores} cores", f"{self.memory / GIB:.4g} GiB"]
        parts += [f"{kind}={count}" for kind, count in sorted(self.devices.items()) if count]
        parts += [f"{key}={value}" for key, value in sorted(self.annotations.items())]
        per = f" on each of {self.nodes} nodes" if self.nodes > 1 else " per node"
        return f"{self.name}: {', '.join(parts)}{per}"

    def fits(self, node: NodeShape) -> bool:
        """Whether one node's total capacity and annotations can hold this step."""
        return (
            node.cores >= self.cores
            and node.memory >= self.memory
            and all(node.devices.get(kind, 0) >= count for kind, count in self.devices.items())
            and all(node.annotations.get(k) == v for k, v in self.annotations.items())
        )


def workflow_needs(workflow: Mapping[str, Any]) -> list[StepNeed]:
    """Every job's and service's per-node request, from a v4 (or v1) definition mapping."""
    parsed = parse_workflow(yaml.safe_dump(dict(workflow), sort_keys=False), source="<federate>")
    needs = []
    for prefix, steps in (("jobs", parsed.jobs), ("services", parsed.services)):
        for name, step in steps.items():
            resources = job_resources(step)
            resource = step.resource
            multinode = getattr(step, "multinode", None)
            needs.append(
                StepNeed(
                    name=f"{prefix}.{name}",
                    cores=resources.cores,
                    memory=resources.memory,
                    devices={k: v for k, v in resources.devices.items() if v},
                    annotations=dict((resource.annotations if resource else None) or {}),
                    nodes=multinode.nodes if multinode is not None else 1,
                )
            )
    return needs
