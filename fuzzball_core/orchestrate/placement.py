"""Runs from creation to placement: new runs wait in memory until the scheduler places them,
then their assignments go to their nodes.

The waiting runs (:attr:`EngineContext.pending`) mirror the PENDING rows of the database
and are rebuilt from them (:mod:`fuzzball_core.orchestrate.recovery`).
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import compress, count, repeat
from operator import attrgetter, contains, not_
from typing import Any, NamedTuple, Protocol

from sqlalchemy.orm import object_session

from fuzzball_core.errors import FuzzballError
from fuzzball_core.orchestrate import (
    events,
    multinode,
    name_resolution,
    workflow_ends,
    workflow_volumes,
)
from fuzzball_core.orchestrate.context import EngineContext, LiveRun, PendingRun
from fuzzball_core.orchestrate.endpoint_urls import with_endpoint_env
from fuzzball_core.orchestrate.messages import Assign, workflow_owner
from fuzzball_core.orchestrate.requests import job_request, run_key, timeout_seconds
from fuzzball_core.orchestrate.states import ASSIGNED, run_moved, transition
from fuzzball_core.orchestrate.transaction import RunFields, Transaction, task_label
from fuzzball_core.orchestrate.workflow_volumes import NODE_ANNOTATION
from fuzzball_core.scheduling import (
    RESERVED_FOR_ANOTHER_JOB,
    Diagnosis,
    JobRequest,
    Placement,
    QueueChanges,
    ReasonCode,
    ReasonsByJob,
    format_cpu_list,
)
from fuzzball_core.store.models import Run, Stage, Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES, EventKind, StageKind, Status

#: Tasks of an array without its own concurrency kept in flight at once: enough to fill
#: any cluster's free slots between passes without materialising a huge array.
DEFAULT_TASK_WINDOW = 512


class QueuedTask(NamedTuple):
    """A run inserted without an ORM row (:meth:`Transaction.add_task_runs`): what its
    queue entry is made of. An array's window of runs made as ORM objects, flushed and held
    cost about a fifth of an array's passes."""

    id: int
    task_id: int | None


class Queueable(Protocol):
    """What queueing a run reads of it: a run's row, or a :class:`QueuedTask`."""

    @property
    def id(self) -> int: ...
    @property
    def task_id(self) -> int | None: ...


def request_for(
    ctx: EngineContext, workflow: Workflow, stage: Stage, run: Queueable, submitted_at: float
) -> JobRequest:
    """The scheduler's view of a run of the stage, charged to the workflow's account, pinned
    to a node when its volumes say so (:func:`~fuzzball_core.orchestrate.workflow_volumes.
    placement_pin`)."""
    definition = ctx.plans.run_definition(workflow, stage.name)
    request = job_request(
        run.id, definition, submitted_at=submitted_at, account=workflow.account_id
    )
    pin = _volume_pin(ctx, workflow, definition)
    if pin is None:
        return request
    return replace(request, annotations={**request.annotations, NODE_ANNOTATION: pin.node_id})


def _volume_pin(
    ctx: EngineContext, workflow: Workflow, definition: Any
) -> workflow_volumes.Pin | None:
    """The node the job's volumes pin it to, if any (none for a job mounting nothing)."""
    session = object_session(workflow)
    if session is None or not workflow_volumes.mounted(definition):
        return None
    declared = ctx.plans.entry(workflow).parsed.model.volumes
    try:
        resolved = workflow_volumes.resolved_for(
            session, workflow, definition, declared, time.time()
        )
    except FuzzballError:
        return None  # the assignment says why the volume cannot be used (_volumes_json)
    return workflow_volumes.placement_pin(
        session,
        workflow,
        resolved,
        lambda name: workflow_volumes.mounted(ctx.plans.run_definition(workflow, name)),
    )


#: A waiting run's stage id.
_STAGE_ID = attrgetter("stage_id")
#: The causes reported for a stage that reported none.
_NONE_REPORTED: frozenset[str] = frozenset()


def wait_for_placement(
    ctx: EngineContext, workflow: Workflow, stage: Stage, run: Queueable, submitted_at: float
) -> None:
    """Put a PENDING run in the queue the scheduler places from."""
    request = request_for(ctx, workflow, stage, run, submitted_at)
    ctx.pending[request.id] = PendingRun(
        run.id, workflow.id, stage.id, stage.name, request, run.task_id
    )


def new_runs(
    ctx: EngineContext,
    tx: Transaction,
    workflow: Workflow,
    stage: Stage,
    task_ids: Iterable[int | None],
    *,
    attempt: int = 1,
) -> None:
    """Create a PENDING run for each task (None: the stage's single run) and queue them.

    The runs are inserted without ORM rows (:meth:`Transaction.add_task_runs`), with the
    other stages' new runs of the pass in one statement, and queued from their ids: before
    this pass's placements, or before a statement of the pass that could read them (a run
    made as a row and flushed for its id, then one INSERT and one flush per stage, cost a
    twentieth of Orchestrate's samples under 2,000 separate workflows, a stage each).
    Placed in this pass, they are assigned from the queue like an array's tasks."""
    wanted = list(task_ids)

    def queue(run_ids: dict[int | None, int]) -> None:
        for task_id in wanted:
            queued = QueuedTask(run_ids[task_id], task_id)
            wait_for_placement(ctx, workflow, stage, queued, workflow.created_at)

    tx.add_task_runs(
        [
            {
                "workflow_id": workflow.id,
                "stage_id": stage.id,
                "task_id": task_id,
                "status": Status.PENDING,
                "created_at": tx.now,
                "attempt": attempt,
            }
            for task_id in wanted
        ],
        queue,
    )
    ctx.dispatched.add(stage.id)


def dispatch_tasks(ctx: EngineContext, tx: Transaction, workflow: Workflow, stage: Stage) -> None:
    """Create the array's next runs, keeping at most its window of tasks in flight."""
    tasks = ctx.plans.entry(workflow).plan.stages[stage.name].tasks
    assert tasks is not None and stage.next_task is not None
    window = tasks.concurrency or DEFAULT_TASK_WINDOW
    ended = stage.tasks_finished + stage.tasks_failed
    in_flight = (stage.next_task - tasks.start) - ended
    count = min(window - in_flight, tasks.end - stage.next_task + 1)
    if count > 0:
        first = stage.next_task
        stage.next_task += count
        new_runs(ctx, tx, workflow, stage, range(first, first + count))


def fill_task_windows(ctx: EngineContext, tx: Transaction) -> None:
    """Start the next tasks of the arrays whose tasks ended in this transaction, up to each
    one's window (:attr:`Transaction.windows_due`); called before the transaction commits."""
    due, tx.windows_due = tx.windows_due, set()
    for stage_id in sorted(due):
        stage = tx.get(Stage, stage_id)
        if stage is None or stage.status in TERMINAL_STATUSES:
            continue  # ended since (a task failed, the workflow was stopped)
        workflow = tx.get(Workflow, stage.workflow_id)
        if workflow is not None and workflow.status not in TERMINAL_STATUSES:
            dispatch_tasks(ctx, tx, workflow, stage)


def forget(ctx: EngineContext, run: Run) -> None:
    """A PENDING run will never be placed (its stage or workflow ended)."""
    ctx.pending.pop(run_key(run.id), None)


def schedule(ctx: EngineContext, tx: Transaction) -> None:
    """Ask the scheduler to place the waiting runs; send the placed ones to their nodes."""
    tx.insert_runs()  # the pass's new runs, queued
    pending = ctx.pending
    # what changed since the last pass: a scheduler keeping its own copy of the queue
    # patches it instead of reading (and re-sorting) every waiting run again
    generation, reset, arrived, departed = pending.take_changes()
    changes = QueueChanges(
        generation,
        arrived=[pending[key].request for key in arrived],
        departed=departed,
        size=len(pending),
        reset=reset,
    )
    result = ctx.scheduler.schedule_changes(
        changes, lambda: [p.request for p in pending.values()], tx.now
    )
    if not pending:
        # a pass with nothing waiting still lets the scheduler see time pass over what runs
        # (the default one's fair share samples each account's use at every pass)
        ctx.diagnoses = {}
        return
    ctx.diagnoses = result.diagnoses  # read lazily: most passes nobody asks why
    _report_blocked(ctx, tx, result.diagnoses)
    unread = _placed_unread(ctx, tx, result.placements)
    # the other placed runs with their stages and workflows, in one joined query
    tx.load_runs(ctx.pending[p.job_id].run_id for p in result.placements if p.job_id not in unread)
    volume_nodes: dict[tuple[str, str], str] = {}
    for placement in result.placements:
        waiting = ctx.pending.pop(placement.job_id)
        if placement.job_id in unread:
            cpus = {node: list(cpus) for node, cpus in placement.cpus.items()} or None
            run = Placed(
                waiting.run_id,
                waiting.workflow_id,
                waiting.stage_id,
                waiting.task_id,
                list(placement.node_ids),
                cpus,
            )
            tx.write_run(run.id, node_ids=run.node_ids, cpus=cpus)
            _assign(ctx, tx, run, placement, row=None)
            continue
        row = tx.get(Run, waiting.run_id)
        if row is None or row.status != Status.PENDING:
            ctx.scheduler.release(placement.job_id)
            continue
        elsewhere = _volume_node_elsewhere(ctx, tx, row, placement.node_ids[0], volume_nodes)
        if elsewhere is not None:
            # placed in this same pass away from a job it shares an unshared volume with:
            # it waits for that node instead of splitting the volume
            ctx.scheduler.release(placement.job_id)
            pinned = {**waiting.request.annotations, NODE_ANNOTATION: elsewhere}
            ctx.pending[placement.job_id] = replace(
                waiting, request=replace(waiting.request, annotations=pinned)
            )
            continue
        row.node_ids = list(placement.node_ids)
        row.cpus = {node: list(cpus) for node, cpus in placement.cpus.items()} or None
        _assign(ctx, tx, row, placement, row=row)


@dataclass(frozen=True)
class Placed:
    """A run placed in this pass without reading its row: what its assignment and its
    event are made of (its PENDING entry and its placement)."""

    id: int
    workflow_id: str
    stage_id: int
    task_id: int | None
    node_ids: list[str]
    cpus: dict[str, list[int]] | None


def _placed_unread(
    ctx: EngineContext, tx: Transaction, placements: Sequence[Placement]
) -> set[str]:
    """The placements (by job id) whose runs are assigned without reading their rows: on
    one node, a run the session does not hold (one it read in this pass is placed through its
    row), of a stage mounting no volumes (whose placement may wait for another run's node).
    A waiting run is PENDING in the store (the queue mirrors those rows), so its row has
    nothing to tell; the stages and workflows the session lacks are read in one query."""
    candidates = [
        p
        for p in placements
        if len(p.node_ids) == 1 and not tx.holds(Run, ctx.pending[p.job_id].run_id)
    ]
    tx.load_stages({ctx.pending[p.job_id].stage_id for p in candidates})
    mounting: dict[int, bool] = {}
    unread: set[str] = set()
    for placement in candidates:
        waiting = ctx.pending[placement.job_id]
        mounts = mounting.get(waiting.stage_id)
        if mounts is None:
            workflow = tx.get(Workflow, waiting.workflow_id)
            stage = tx.get(Stage, waiting.stage_id)
            mounts = mounting[waiting.stage_id] = (
                workflow is None
                or stage is None
                or bool(workflow_volumes.mounted(ctx.plans.run_definition(workflow, stage.name)))
            )
        if not mounts:
            unread.add(placement.job_id)
    return unread


def _assign(
    ctx: EngineContext, tx: Transaction, run: RunFields, placement: Placement, *, row: Run | None
) -> None:
    """Move a placed run to ASSIGNED (through its ``row``, or written without it), note it
    live and send its assignment to its nodes."""
    if placement.note:
        ctx.placement_notes[run.id] = placement.note
    stage = tx.get(Stage, run.stage_id)
    stage_name = stage.name if stage else None
    message = (
        f"{stage_name or '?'}{task_label(run)} scheduled on"
        f" {ctx.node_names_of(placement.node_ids)}"
        # why it was placed other than it asked (a job spread over NVLink domains)
        + (f"; {placement.note}" if placement.note else "")
    )
    event: dict[str, Any] = {
        "stage_name": stage_name,
        "node_id": placement.node_ids[0],
        "task_id": run.task_id,
    }
    if row is not None:
        transition(tx, row, ASSIGNED, message, **event)
    else:
        run_moved(tx, run.id, run.workflow_id, Status.PENDING, ASSIGNED, message, **event)
    ctx.live_runs[run.id] = LiveRun(
        run.workflow_id, stage_name or "?", run.stage_id, run.task_id, tuple(run.node_ids)
    )
    workflow_ends.ran_on(ctx, run.workflow_id, run.node_ids)
    send_assignment(ctx, tx, run)


def _report_blocked(
    ctx: EngineContext, tx: Transaction, diagnoses: Mapping[str, Diagnosis]
) -> None:
    """A ``scheduling_blocked`` event once per cause for each stage left waiting (for the
    first of its waiting runs diagnosed in this pass)."""
    pending = ctx.pending
    reported = ctx.told.blocked_reported
    waiting_runs = list(pending.values())
    reasons = list(_reasons(diagnoses, pending))
    stage_ids = list(map(_STAGE_ID, waiting_runs))
    # a burst that outgrows the cluster leaves every stage waiting, already reported, pass
    # after pass: the runs whose stage reported their reason are passed over in bulk, by
    # the reasons alone (a lazy table, the default scheduler's, tells them without building
    # the diagnoses); a loop over every waiting run was a tenth of Orchestrate's loop under
    # 2,000 separate workflows
    known = map(contains, map(reported.get, stage_ids, repeat(_NONE_REPORTED)), reasons)
    fresh = [i for i in compress(count(), map(not_, known)) if reasons[i] is not None]
    if not fresh:
        return
    # a run is its stage's first one diagnosed when it is the stage's only waiting run;
    # where a stage has others, every run is looked at in turn, as the first one of each
    # stage decides
    waiting_in = Counter(stage_ids)
    single = all(waiting_in[stage_ids[i]] == 1 for i in fresh)
    seen: set[int] = set()
    blocked: list[tuple[PendingRun, Diagnosis]] = []
    for i in fresh if single else range(len(waiting_runs)):
        reason = reasons[i]
        if reason is None:
            continue  # not diagnosed in this pass
        stage_id = stage_ids[i]
        if stage_id in seen:
            continue
        seen.add(stage_id)
        # the reason is a StrEnum: equal to the value kept
        if reason in reported.get(stage_id, ()):
            continue
        waiting = waiting_runs[i]
        diagnosis = diagnoses[waiting.request.id]
        if ctx.told.mark_blocked(stage_id, diagnosis.reason.value):
            blocked.append((waiting, diagnosis))
    # many stages block at once when a burst of workflows outgrows the cluster: the waiting
    # run names its stage, so their rows are not read (a query per pass that had 2-3 % of
    # Orchestrate's samples under 2,000 separate workflows)
    for waiting, diagnosis in blocked:
        events.record(
            tx,
            EventKind.SCHEDULING_BLOCKED,
            f"{waiting.stage_name}: {diagnosis.message}",
            workflow_id=waiting.workflow_id,
            stage_name=waiting.stage_name,
            reason=diagnosis.reason.value,
            estimated_start=diagnosis.estimated_start,
        )


def _reasons(
    diagnoses: Mapping[str, Diagnosis], job_ids: Iterable[str]
) -> Iterable[ReasonCode | None]:
    """The reason of each of ``job_ids``' diagnoses in this pass, None for a job not
    diagnosed: in one call where the diagnoses are a :class:`ReasonsByJob` (the default
    scheduler's lazy table tells them without building the diagnoses), else from the
    diagnoses one by one."""
    if isinstance(diagnoses, ReasonsByJob):
        return diagnoses.reasons_of(job_ids)
    return map(functools.partial(_diagnosed_reason, diagnoses), job_ids)


def _diagnosed_reason(diagnoses: Mapping[str, Diagnosis], job_id: str) -> ReasonCode | None:
    """The reason of ``job_id``'s diagnosis, None for a job not diagnosed."""
    diagnosis = diagnoses.get(job_id)
    return None if diagnosis is None else diagnosis.reason


def waiting_diagnosis(ctx: EngineContext, stage_id: int) -> Diagnosis | None:
    """Why a stage's first waiting run was not placed in the last pass, if one waits (and,
    for a run its volumes pin to a node, that they do; for one of the same account as the
    run holding the backfill reservation, which that is)."""
    for waiting in ctx.pending.values():
        if waiting.stage_id == stage_id and waiting.request.id in ctx.diagnoses:
            diagnosis = _naming_own_reservation(ctx, waiting, ctx.diagnoses[waiting.request.id])
            pinned = waiting.request.annotations.get(NODE_ANNOTATION)
            if pinned is None:
                return diagnosis
            why = f"; its volumes keep it on {ctx.node_names_of([pinned])}"
            return replace(diagnosis, message=diagnosis.message + why)
    return None


def _naming_own_reservation(
    ctx: EngineContext, waiting: PendingRun, diagnosis: Diagnosis
) -> Diagnosis:
    """``diagnosis`` naming the job the reservation is kept for where that job is of
    ``waiting``'s own account: any other account's stays ``another job`` (the scheduler's
    words), for whose work waits where is that account's business alone."""
    holder = ctx.pending.get(diagnosis.reserved_for or "")
    account = waiting.request.account
    if holder is None or not account or holder.request.account != account:
        return diagnosis
    named = f"reserved for {holder.stage_name} of workflow {holder.workflow_id}"
    return replace(diagnosis, message=diagnosis.message.replace(RESERVED_FOR_ANOTHER_JOB, named))


def send_assignment(ctx: EngineContext, tx: Transaction, run: RunFields) -> None:
    """Send a placed run's assignment to each of its nodes (again, after a reconnect)."""
    workflow = tx.get(Workflow, run.workflow_id)
    stage = tx.get(Stage, run.stage_id)
    if workflow is None or stage is None:
        return
    definition = ctx.plans.run_definition(workflow, stage.name)
    multinode.assigned(ctx, run)
    # a run needing nothing but its workflow's token gets it here, not by a RunSecrets call
    # as it starts (a round trip per separate workflow)
    token = ctx.assignment_hook(tx, workflow, stage, run) if ctx.assignment_hook else ""
    assignment = Assign(
        run_id=run.id,
        workflow_id=run.workflow_id,
        stage_name=stage.name,
        task_id=run.task_id,
        job_json=_job_json(ctx, tx, workflow, stage),
        timeout_seconds=timeout_seconds(definition) or 0.0,
        node_ids=tuple(run.node_ids),
        volume_ingress_json=ctx.plans.ingress(workflow, stage.name),
        hosts=name_resolution.service_hosts(ctx, tx, run.workflow_id),
        cpus=tuple((node, format_cpu_list(cpus)) for node, cpus in (run.cpus or {}).items()),
        volumes_json=_volumes_json(ctx, tx, workflow, definition, run),
        workflow_token=token,
        owner=workflow_owner(workflow.account_id, workflow.user_id),
    )
    tx.send(run.node_ids, assignment)


def _volume_node_elsewhere(
    ctx: EngineContext,
    tx: Transaction,
    run: Run,
    node_id: str,
    volume_nodes: dict[tuple[str, str], str],
) -> str | None:
    """The node another run placed in this pass holds a volume ``run`` needs on one node
    (a per-workflow volume nodes do not share, a node-local volume used for the first
    time), when that is not ``node_id``; else None, noting ``run``'s volumes as on
    ``node_id`` in ``volume_nodes``."""
    workflow = tx.get(Workflow, run.workflow_id)
    stage = tx.get(Stage, run.stage_id)
    if workflow is None or stage is None:
        return None
    definition = ctx.plans.run_definition(workflow, stage.name)
    if not workflow_volumes.mounted(definition):
        return None
    declared = ctx.plans.entry(workflow).parsed.model.volumes
    try:
        resolved = workflow_volumes.resolved_for(tx.session, workflow, definition, declared, tx.now)
    except FuzzballError:
        return None
    keys = workflow_volumes.single_node_keys(workflow.id, resolved)
    for key in keys:
        if volume_nodes.get(key, node_id) != node_id:
            return volume_nodes[key]
    volume_nodes.update(dict.fromkeys(keys, node_id))
    return None


def _volumes_json(
    ctx: EngineContext, tx: Transaction, workflow: Workflow, definition: Any, run: RunFields
) -> str:
    """Where the job's mounted volumes live (the assignment's ``volumes_json``); a node-local
    persistent volume used for the first time lives on the run's node from now on."""
    if not workflow_volumes.mounted(definition):
        return ""
    declared = ctx.plans.entry(workflow).parsed.model.volumes
    try:
        resolved = workflow_volumes.resolved_for(tx.session, workflow, definition, declared, tx.now)
    except FuzzballError as exc:
        # disabled since submission (its class or itself): the run fails saying so
        return workflow_volumes.refusal_json(definition, exc.message)
    if run.node_ids:
        workflow_volumes.record_placement(tx.session, resolved, run.node_ids[0], tx.now)
        resolved = workflow_volumes.resolved_for(tx.session, workflow, definition, declared, tx.now)
    return workflow_volumes.locations_json(resolved)


def _job_json(ctx: EngineContext, tx: Transaction, workflow: Workflow, stage: Stage) -> str:
    """The stage's payload; a job's or service's with its workflow's endpoint URLs."""
    payload = ctx.plans.payload(tx, workflow, stage.name)
    if stage.kind not in (StageKind.JOB, StageKind.SERVICE):
        return payload
    parsed = ctx.plans.entry(workflow).parsed
    return with_endpoint_env(tx, ctx.endpoint_urls, parsed, workflow.id, payload)
