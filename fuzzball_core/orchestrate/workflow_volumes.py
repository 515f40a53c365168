"""A workflow's volumes in the engine: resolved at submission, sent with each assignment,
and kept in mind when jobs are placed.

* At submission (:func:`resolve_at_submission`) every ``volumes.NAME`` is resolved for the
  submitting owner, so a persistent volume is created on first use (or the submission is
  refused naming the volume and its class) before anything runs.
* Each assignment carries where the job's mounted volumes live (:func:`locations_json`, the
  node-side contract :class:`~fuzzball_core.drivers.VolumeLocation`).
* Placement (:func:`placement_pin`): a job mounting a node-local persistent volume goes to the
  node holding it; a job mounting a per-workflow volume that nodes do not share goes to the
  node where the workflow's jobs already use it. The pin is an annotation every node carries
  (:data:`NODE_ANNOTATION`), so the scheduler sees it as a constraint and ``workflow why``
  reports the nodes passed over and why the pinned one could not take the job.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from fuzzball_core.drivers import StorageDriver
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate import volumes
from fuzzball_core.orchestrate.volumes import ResolvedVolume, VolumeOwner
from fuzzball_core.plugins import get_registry
from fuzzball_core.spec.models import Job, Service, Volume
from fuzzball_core.store.models import Run, Stage, Workflow

#: the annotation Orchestrate gives every node: its own id (placement pins jobs with it)
NODE_ANNOTATION = "fuzzball.io/node"

STORAGE_DRIVERS = "fuzzball.storage_drivers"


def installed_driver(name: str) -> StorageDriver:
    """The installed storage driver plugin ``name`` (FailedPrecondition naming it if none)."""
    driver: StorageDriver = get_registry().driver(STORAGE_DRIVERS, name)
    return driver


def _resolve_all(
    session: Session,
    owner: VolumeOwner,
    declared: Mapping[str, Volume] | None,
    names: set[str] | None,
    workflow_id: str,
    now: float,
) -> dict[str, ResolvedVolume]:
    resolved = {}
    for name, volume in (declared or {}).items():
        if names is not None and name not in names:
            continue
        text = volume.storage_reference
        if text is None:
            continue
        resolved[name] = volumes.resolve(
            session,
            installed_driver,
            owner,
            text,
            workflow_id=workflow_id,
            volume_key=name,
            now=now,
            where=f"volumes.{name}",
        )
    return resolved


def resolve_at_submission(
    session: Session, workflow: Workflow, declared: Mapping[str, Volume] | None, now: float
) -> dict[str, ResolvedVolume]:
    """Resolve every volume of a workflow being stored (creating persistent ones on first
    use); raises what :func:`~fuzzball_core.orchestrate.volumes.resolve` refuses. Returns
    them by name."""
    owner = VolumeOwner.of_workflow(session, workflow)
    return _resolve_all(session, owner, declared, None, workflow.id, now)


def refuse_multinode_on_one_node(
    steps: Mapping[str, Mapping[str, Job] | Mapping[str, Service] | None],
    resolved: Mapping[str, ResolvedVolume],
) -> None:
    """InvalidArgument naming the mount of the first multinode step (``steps``: the
    workflow's ``jobs`` and ``services``) that mounts a node-local persistent volume: the
    volume lives on one node, so every other node's ranks would write to a copy of their
    own that is never seen again."""
    for field, named in steps.items():
        for name, step in sorted((named or {}).items()):
            if step.multinode is None or step.multinode.nodes <= 1:
                continue
            for path, mount in sorted((step.mounts or {}).items()):
                volume = resolved.get(mount.volume)
                if volume is None or not volume.node_local:
                    continue
                raise InvalidArgument(
                    f"{field}.{name}.mounts.{path}: volume {mount.volume} "
                    f"({volume.reference}) is node-local (storage class "
                    f"{volume.location.storage_class!r}, driver {volume.location.driver!r}) "
                    f"and the job runs on {step.multinode.nodes} nodes: only the first "
                    "node's writes would be kept; use a class whose volumes every node "
                    "shares, or one node"
                )


def mounted(job: Job | Service | object) -> set[str]:
    """The volumes a job or service mounts (none for any other stage's definition)."""
    if not isinstance(job, Job | Service):
        return set()
    return {mount.volume for mount in (job.mounts or {}).values()}


def _mounted(job: Job | Service) -> set[str]:
    return {mount.volume for mount in (job.mounts or {}).values()}


def resolved_for(
    session: Session,
    workflow: Workflow,
    job: Job | Service,
    declared: Mapping[str, Volume] | None,
    now: float,
) -> dict[str, ResolvedVolume]:
    """The job's mounted volumes, resolved for its workflow's owner."""
    owner = VolumeOwner.of_workflow(session, workflow)
    return _resolve_all(session, owner, declared, _mounted(job), workflow.id, now)


def locations_json(resolved: Mapping[str, ResolvedVolume]) -> str:
    """The assignment's ``volumes_json``: {volume: VolumeLocation JSON}; empty for none."""
    if not resolved:
        return ""
    return json.dumps({name: r.location.to_json() for name, r in sorted(resolved.items())})


def refusal_json(job: Job | Service, why: str) -> str:
    """A ``volumes_json`` that makes the node refuse the run saying ``why`` (a volume that
    could be resolved at submission and no longer can)."""
    return json.dumps({name: {"error": why} for name in sorted(mounted(job))})


@dataclass(frozen=True)
class Pin:
    """The node a job must run on, and why (for events and ``workflow why``)."""

    node_id: str
    why: str


def placement_pin(
    session: Session,
    workflow: Workflow,
    resolved: Mapping[str, ResolvedVolume],
    mounts_of: Callable[[str], set[str]],
) -> Pin | None:
    """Where a job must run because of its (``resolved``) volumes, if anywhere: the node
    holding a node-local persistent volume, else the node where the workflow's other jobs
    (``mounts_of`` a stage: the volumes it mounts) use a per-workflow volume nodes do not
    share."""
    for name, volume in sorted(resolved.items()):
        if volume.node_local and volume.node_id:
            return Pin(
                volume.node_id, f"volume {name} ({volume.reference}) lives on {volume.node_id}"
            )
    unshared = {
        name for name, volume in resolved.items() if not volume.shared and not volume.volume_id
    }
    if not unshared:
        return None
    rows = session.execute(
        select(Run.node_ids, Stage.name)
        .join(Stage, Stage.id == Run.stage_id)
        .where(Run.workflow_id == workflow.id)
        .order_by(Run.id)
    ).all()
    for node_ids, stage_name in rows:
        if not node_ids:
            continue
        for name in sorted(unshared & mounts_of(stage_name)):
            return Pin(
                node_ids[0],
                f"volume {name} is not shared between nodes and {stage_name} uses it on "
                f"{node_ids[0]}",
            )
    return None


def single_node_keys(
    workflow_id: str, resolved: Mapping[str, ResolvedVolume]
) -> list[tuple[str, str]]:
    """What must stay on one node among ``resolved`` (a workflow's volumes): each per-workflow
    volume nodes do not share, as (workflow id, volume name), and each node-local volume no
    node holds yet, as ("volume", its id)."""
    keys = []
    for name, volume in sorted(resolved.items()):
        if volume.volume_id is None and not volume.shared:
            keys.append((workflow_id, name))
        elif volume.node_local and volume.volume_id and volume.node_id is None:
            keys.append(("volume", volume.volume_id))
    return keys


def record_placement(
    session: Session, resolved: Mapping[str, ResolvedVolume], node_id: str, now: float
) -> None:
    """A job was placed on ``node_id``: node-local persistent volumes it mounts that no node
    held yet live there from now on."""
    for volume in resolved.values():
        if volume.node_local and volume.volume_id and volume.node_id is None:
            volumes.record_node(session, volume.volume_id, node_id, now)
