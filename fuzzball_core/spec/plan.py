"""The stage graph the engine runs for a valid workflow.

Stages, with ids that are the paths of their definitions:

* ``images.NAME``: building a workflow-defined image;
* ``images.URI``: pulling a registry or object-cache image a job, service or build uses
  (``images.docker://alpine:latest``; a URI always holds ``://``, a built image's name never
  does, so the two cannot collide);
* ``volumes.NAME``: creating a volume (its ingress is fetched by the jobs mounting it);
* ``volumes.NAME.egress``: sending a volume's ``egress`` files out, once every job and
  service mounting the volume has ended (kind ``file``, Fuzzball's ``STAGE_KIND_FILE``);
* ``jobs.NAME``: a job (a task array stays one stage carrying its ``TaskRange``; tasks are
  never materialised here);
* ``services.NAME``: a service.

Edges point from the stage that must come first (``source``) to the one that waits
(``target``) and carry a condition: ``on-success`` (``depends-on`` with ``FINISHED``, and
every edge from an image or volume), ``on-failure`` (``FAILED``), ``on-running``
(``RUNNING``, services only; a dependency on a service naming no status reads as it) or
``on-end`` (ended in any way, skipped included: what an egress waits for from each step
mounting its volume, so a failed job's results still leave).

``Plan.advance`` answers which stages can start and which can never run. A stage never runs
(it is *skipped*, shown as Canceled) when a dependency was canceled or skipped, when an
on-success dependency failed, when an on-failure dependency finished, or when an on-running
dependency failed; skipping propagates to everything behind it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Set
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.spec.defaults import effective_jobs, effective_services
from fuzzball_core.spec.models import Job, Service, URIRef, Workflow
from fuzzball_core.spec.references import built_image_name, step_file_contents


class StageKind(StrEnum):
    IMAGE = "image"
    VOLUME = "volume"
    JOB = "job"
    SERVICE = "service"
    #: a volume's egress (Fuzzball's ``STAGE_KIND_FILE``)
    FILE = "file"


class Condition(StrEnum):
    ON_SUCCESS = "on-success"
    ON_FAILURE = "on-failure"
    ON_RUNNING = "on-running"
    #: the source ended, whatever its outcome (a volume's egress after the steps using it)
    ON_END = "on-end"


_CONDITION_OF_STATUS = {
    "FINISHED": Condition.ON_SUCCESS,
    "FAILED": Condition.ON_FAILURE,
    "RUNNING": Condition.ON_RUNNING,
}


@dataclass(frozen=True, slots=True)
class TaskRange:
    """The tasks of a task array: ids ``start``..``end`` inclusive, ``concurrency`` at once."""

    start: int
    end: int
    #: Most tasks running at once; None means no limit of the job's own.
    concurrency: int | None = None

    def __len__(self) -> int:
        return self.end - self.start + 1

    def task_ids(self) -> range:
        """The task ids, as a lazy range."""
        return range(self.start, self.end + 1)


@dataclass(frozen=True, slots=True)
class Stage:
    """One unit the engine schedules."""

    id: str
    kind: StageKind
    name: str
    #: Set for task-array jobs only.
    tasks: TaskRange | None = None
    #: Nodes a multinode job or service spans (1 otherwise).
    nodes: int = 1
    #: The definition (with defaults applied): Job, Service, Volume, ImageBuild or ImagePull.
    definition: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ImagePull:
    """The definition of a pull stage: one image URI, fetched once for every step using it."""

    uri: str
    #: the secret of the first step naming this URI with one
    secret: str | None = None
    #: seconds a pin of the URI made for an earlier submission may be reused for this one
    #: (the least ``cache-ttl`` of the steps and builds naming it; None, the default, when
    #: any of them gives none: the registry is asked again)
    cache_ttl: int | None = None

    def naming_again(self, secret: str | None, cache_ttl: int | None) -> ImagePull:
        """This pull, as another step naming the URI with ``secret`` and ``cache-ttl`` also
        needs it: the first secret given, and a pin no older than both steps allow."""
        ttl = None
        if self.cache_ttl is not None and cache_ttl is not None:
            ttl = min(self.cache_ttl, cache_ttl)
        return ImagePull(self.uri, self.secret if self.secret is not None else secret, ttl)


@dataclass(frozen=True, slots=True)
class Edge:
    """``target`` waits for ``source`` to reach the state ``condition`` names."""

    source: str
    target: str
    condition: Condition


class Advance(NamedTuple):
    """Answer of ``Plan.advance``: both lists in topological order."""

    ready: list[str]
    skipped: list[str]


class Plan:
    """Stages and edges of one workflow, with ordering and readiness queries."""

    def __init__(self, stages: Iterable[Stage], edges: Iterable[Edge]) -> None:
        self.stages: dict[str, Stage] = {stage.id: stage for stage in stages}
        self.edges: list[Edge] = list(dict.fromkeys(edges))  # drop duplicates, keep order
        self._incoming: dict[str, list[Edge]] = {stage_id: [] for stage_id in self.stages}
        self._outgoing: dict[str, list[Edge]] = {stage_id: [] for stage_id in self.stages}
        for edge in self.edges:
            self._incoming[edge.target].append(edge)
            self._outgoing[edge.source].append(edge)
        self._order = self._topological_order()
        self._rank = {stage_id: rank for rank, stage_id in enumerate(self._order)}

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages.values())

    def __len__(self) -> int:
        return len(self.stages)

    def dependencies_of(self, stage_id: str) -> list[Edge]:
        """Edges into ``stage_id`` (what it waits for)."""
        return list(self._incoming[stage_id])

    def dependents_of(self, stage_id: str) -> list[Edge]:
        """Edges out of ``stage_id`` (what waits for it)."""
        return list(self._outgoing[stage_id])

    def topological_order(self) -> list[str]:
        """Stage ids, every stage after all it depends on; ties keep definition order."""
        return list(self._order)

    def _topological_order(self) -> list[str]:
        index = {stage_id: i for i, stage_id in enumerate(self.stages)}
        waiting = {stage_id: len(edges) for stage_id, edges in self._incoming.items()}
        heap = [index[s] for s, count in waiting.items() if count == 0]
        heapq.heapify(heap)
        ids = list(self.stages)
        order: list[str] = []
        while heap:
            stage_id = ids[heapq.heappop(heap)]
            order.append(stage_id)
            for edge in self._outgoing[stage_id]:
                waiting[edge.target] -= 1
                if waiting[edge.target] == 0:
                    heapq.heappush(heap, index[edge.target])
        if len(order) != len(ids):
            raise ValueError("the stage graph has a cycle")  # validation rules this out
        return order

    def advance(
        self,
        finished: Set[str],
        failed: Set[str],
        canceled: Set[str],
        *,
        started: Set[str] = frozenset(),
        running: Set[str] = frozenset(),
        changed: Iterable[str] | None = None,
    ) -> Advance:
        """Which stages may start now, and which can never run (skip them as Canceled).

        ``finished``, ``failed`` and ``canceled`` hold stages in those end states (stages
        skipped earlier belong in ``canceled``); ``started`` holds stages already started (not
        offered again) and ``running`` services that are ready (for on-running edges).
        ``ready`` lists stages that are in none of these sets and whose every dependency is
        satisfied. ``skipped`` lists stages not yet ended or started that can never run,
        transitively. With ``changed`` (stages whose state changed since the last call) only
        stages behind them are examined, so each call costs what actually moved.
        """
        ended = finished | failed | canceled
        skipped: set[str] = set()
        ready: list[str] = []
        skipped_order: list[str] = []
        if changed is None:
            candidates: Iterable[str] = self._order
            heap: list[int] | None = None
        else:
            heap = sorted(
                {self._rank[e.target] for s in changed for e in self._outgoing.get(s, ())}
            )
            candidates = self._drain(heap)
        for stage_id in candidates:
            if stage_id in ended or stage_id in started or stage_id in skipped:
                continue
            verdict = self._verdict(stage_id, finished, failed, canceled, running, skipped)
            if verdict is None:
                continue
            if verdict:
                ready.append(stage_id)
                continue
            skipped.add(stage_id)
            skipped_order.append(stage_id)
            if heap is not None:
                for edge in self._outgoing[stage_id]:
                    heapq.heappush(heap, self._rank[edge.target])
        if heap is not None:
            ready.sort(key=self._rank.__getitem__)
            skipped_order.sort(key=self._rank.__getitem__)
        return Advance(ready, skipped_order)

    def _drain(self, heap: list[int]) -> Iterator[str]:
        seen: set[int] = set()
        while heap:
            rank = heapq.heappop(heap)
            if rank not in seen:
                seen.add(rank)
                yield self._order[rank]

    def _verdict(
        self,
        stage_id: str,
        finished: Set[str],
        failed: Set[str],
        canceled: Set[str],
        running: Set[str],
        skipped: set[str],
    ) -> bool | None:
        """True: may start; False: can never run; None: still waiting."""
        waiting = False
        for edge in self._incoming[stage_id]:
            source = edge.source
            if edge.condition is Condition.ON_END:
                ended = source in finished or source in failed or source in canceled
                waiting = waiting or not (ended or source in skipped)
                continue
            if source in canceled or source in skipped:
                return False
            condition = edge.condition
            if condition is Condition.ON_SUCCESS:
                if source in failed:
                    return False
                waiting = waiting or source not in finished
            elif condition is Condition.ON_FAILURE:
                if source in finished:
                    return False
                waiting = waiting or source not in failed
            else:
                if source in failed:
                    return False
                waiting = waiting or not (source in running or source in finished)
        return None if waiting else True


def plan_workflow(workflow: Workflow | Any, *, pull_stages: bool = False) -> Plan:
    """Build the stage graph of a valid workflow (a ``Workflow`` or a ``ParsedWorkflow``).

    With ``pull_stages`` every image the workflow uses and does not build itself becomes a
    stage (``images.URI``) that the steps and builds using it wait for; the engine plans this
    way, so that a pull is watched, reported and waited for like any other stage.
    """
    model: Workflow = getattr(workflow, "model", workflow)
    stages: list[Stage] = []
    edges: list[Edge] = []
    images = model.images or {}
    raw_images = {name: {"scope": image.effective_scope} for name, image in images.items()}
    pulls: dict[str, ImagePull] = {}

    def image_source(image: URIRef, target: str) -> None:
        """The edge into ``target`` from the stage that provides its image."""
        uri = str(image.uri)
        parent = built_image_name(uri, raw_images)
        if parent is not None:
            edges.append(Edge(f"images.{parent}", target, Condition.ON_SUCCESS))
            return
        if not pull_stages:
            return
        known = pulls.get(uri)
        if known is None:
            pulls[uri] = ImagePull(uri, image.secret, image.cache_ttl)
        else:
            pulls[uri] = known.naming_again(image.secret, image.cache_ttl)
        edges.append(Edge(f"images.{uri}", target, Condition.ON_SUCCESS))

    for name, image in images.items():
        # the files as written into the image: file://NAME resolved, as a step's are
        built = image.model_copy(update={"files": step_file_contents(image.files, model.files)})
        stages.append(Stage(f"images.{name}", StageKind.IMAGE, name, definition=built))
        image_source(image.from_, f"images.{name}")
    for name, volume in (model.volumes or {}).items():
        stages.append(Stage(f"volumes.{name}", StageKind.VOLUME, name, definition=volume))
    egress = {name: volume for name, volume in (model.volumes or {}).items() if volume.egress}
    kinds_by_name = {n: "jobs" for n in model.jobs or {}}
    kinds_by_name.update({n: "services" for n in model.services or {}})
    for section, kind, steps in (
        ("jobs", StageKind.JOB, effective_jobs(model)),
        ("services", StageKind.SERVICE, effective_services(model)),
    ):
        for name, step in steps.items():
            stage_id = f"{section}.{name}"
            stages.append(_step_stage(stage_id, kind, name, step))
            image_source(step.image, stage_id)
            for volume_name in dict.fromkeys(m.volume for m in (step.mounts or {}).values()):
                edges.append(Edge(f"volumes.{volume_name}", stage_id, Condition.ON_SUCCESS))
                if volume_name in egress:
                    edges.append(Edge(stage_id, egress_stage_id(volume_name), Condition.ON_END))
            for dependency in step.depends_on or ():
                source = f"{kinds_by_name[dependency.name]}.{dependency.name}"
                edges.append(Edge(source, stage_id, _CONDITION_OF_STATUS[dependency.status]))
    # pull stages come first: they depend on nothing, and the definition order breaks ties
    pulled = [
        Stage(f"images.{uri}", StageKind.IMAGE, uri, definition=pull) for uri, pull in pulls.items()
    ]
    # egress stages come last: they wait for every step mounting their volume
    sending = []
    for name in sorted(egress):
        if f"{name}.egress" in (model.volumes or {}):
            description = (
                f"the volume {name}.egress takes the name of volume {name}'s egress stage; "
                "rename one of them"
            )
            raise InvalidArgument(
                f"volumes.{name}.egress: {description}",
                details=[{"field": f"volumes.{name}.egress", "description": description}],
            )
        volume = egress[name]
        sending.append(Stage(egress_stage_id(name), StageKind.FILE, name, definition=volume))
        edges.append(Edge(f"volumes.{name}", egress_stage_id(name), Condition.ON_SUCCESS))
    return Plan([*pulled, *stages, *sending], edges)


def egress_stage_id(volume: str) -> str:
    """The id of volume ``volume``'s egress stage (``volumes.NAME.egress``: the field path of
    its transfers; a workflow with a volume named ``NAME.egress`` too is refused)."""
    return f"volumes.{volume}.egress"


def _step_stage(stage_id: str, kind: StageKind, name: str, step: Job | Service) -> Stage:
    tasks = None
    task_array = getattr(step, "task_array", None)
    if task_array is not None:
        tasks = TaskRange(task_array.start, task_array.end, task_array.concurrency)
    nodes = step.multinode.nodes if step.multinode is not None else 1
    return Stage(stage_id, kind, name, tasks=tasks, nodes=nodes, definition=step)
