"""How runs, stages and workflows end.

A run ends when its node reports its exit, when its node is lost or evicted, or when its
stage or workflow ends first. Ending it releases its nodes, may run it again
(:mod:`~fuzzball_core.orchestrate.retries`), and ends its stage (or counts a task of an
array); an ending stage marks its workflow for the pass to advance.
"""

from __future__ import annotations

import contextlib
from typing import Any

from sqlalchemy import select

from fuzzball_core.errors import NotFound
from fuzzball_core.orchestrate import (
    multinode,
    placement,
    retries,
    service_pools,
    workflow_ends,
)
from fuzzball_core.orchestrate.context import EngineContext, LiveRun
from fuzzball_core.orchestrate.image_stages import IMAGE_STAGE_PREFIX
from fuzzball_core.orchestrate.messages import Cancel
from fuzzball_core.orchestrate.requests import run_key
from fuzzball_core.orchestrate.states import ASSIGNED, LIVE_RUN, OPEN_RUN, run_moved, transition
from fuzzball_core.orchestrate.transaction import Transaction, task_label
from fuzzball_core.store.models import Run, Stage, Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES, Status


def finish_run(
    ctx: EngineContext,
    tx: Transaction,
    run: Run,
    status: str,
    message: str,
    exit_code: int | None,
    *,
    signal: int = 0,
    cause: str | None = None,
    when: float | None = None,
) -> None:
    """End a live run; a failure whose ``cause`` (``node`` or an exit code) the step's
    ``policy.retry`` lists runs it again instead of failing the stage."""
    was_started = run.status == Status.STARTED
    idle = service_pools.scaled_down(run)  # its service scaled to zero: the stage goes on
    if run.status in LIVE_RUN:
        ctx.live_runs.pop(run.id, None)
        with contextlib.suppress(NotFound):  # never placed, or already released
            ctx.scheduler.release(run_key(run.id))
        if multinode.is_multinode(run):
            multinode.stop_other_parts(ctx, tx, run, message)
    stage = tx.get(Stage, run.stage_id)
    run.exit_code = exit_code
    run.message = message
    run.failure_cause = cause if status == Status.FAILED else None
    transition(
        tx,
        run,
        status,
        f"{stage.name if stage else '?'}{task_label(run)}: {message}",
        when=when,
        stage_name=stage.name if stage else None,
        node_id=run.node_ids[0] if run.node_ids else None,
        exit_code=exit_code,
        signal=signal,
        task_id=run.task_id,
        status=status,
    )
    if stage is None or idle:
        return
    if status == Status.FINISHED and run.node_ids and stage.name.startswith(IMAGE_STAGE_PREFIX):
        _note_pulled(ctx, tx, stage, run.node_ids[0])
    if stage.status in TERMINAL_STATUSES:
        # a stopped service's container is gone only now: a volume's egress waits for it
        ctx.dirty.add(stage.workflow_id)
    if status == Status.FAILED and cause is not None and stage.status not in TERMINAL_STATUSES:
        explained = retries.retry_or_explain(
            ctx, tx, run, stage, cause=cause, message=message, was_started=was_started
        )
        if explained is None:
            return  # it runs again
        message = run.message = explained
    if stage.task_count is None:
        if stage.status not in TERMINAL_STATUSES:
            stage.exit_code = exit_code
            end_stage(ctx, tx, stage, status, message, run.finished_at, exit_code=exit_code)
        return
    _task_ended(ctx, tx, stage, run.task_id, run.exit_code, status, message, was_started)


def finish_task(
    ctx: EngineContext,
    tx: Transaction,
    run_id: int,
    live: LiveRun,
    stage: Stage,
    message: str,
    *,
    when: float,
    metering: dict[str, Any] | None = None,
) -> None:
    """End a live run that finished (exit code 0) on its one node, a task of ``stage`` (an
    array) or a job stage's single run, from what the engine knows of it (``live``), without
    reading the run's row: what :func:`finish_run` does for such a run, with the same event,
    the row's columns written
    (:meth:`~fuzzball_core.orchestrate.transaction.Transaction.write_run`). ``metering``:
    the run's traffic counters, by node, as its exit reported them."""
    ctx.live_runs.pop(run_id, None)
    with contextlib.suppress(NotFound):  # already released
        ctx.scheduler.release(run_key(run_id))
    if metering is not None:
        tx.write_run(run_id, metering=metering)
    tx.write_run(run_id, exit_code=0, message=message, failure_cause=None)
    run_moved(
        tx,
        run_id,
        live.workflow_id,
        Status.STARTED if live.started else ASSIGNED,
        Status.FINISHED,
        f"{stage.name}{'' if live.task_id is None else f' task {live.task_id}'}: {message}",
        when=when,
        stage_name=stage.name,
        node_id=live.node_ids[0],
        exit_code=0,
        signal=0,
        task_id=live.task_id,
        status=Status.FINISHED,
    )
    if stage.status in TERMINAL_STATUSES:
        ctx.dirty.add(stage.workflow_id)
    if stage.task_count is not None:
        _task_ended(ctx, tx, stage, live.task_id, 0, Status.FINISHED, message, live.started)
    elif stage.status not in TERMINAL_STATUSES:
        stage.exit_code = 0
        end_stage(ctx, tx, stage, Status.FINISHED, message, when, exit_code=0)


def _note_pulled(ctx: EngineContext, tx: Transaction, stage: Stage, node_id: str) -> None:
    """Remember that ``node_id`` holds what the image stage's run pulled (a build's run
    is not a pull: :class:`~fuzzball_core.orchestrate.image_stages.ImagesOnNodes` skips it)."""
    workflow = tx.get(Workflow, stage.workflow_id)
    if workflow is not None:
        ctx.images_on_nodes.pulled(ctx.plans.payload(tx, workflow, stage.name), node_id)


def _task_ended(
    ctx: EngineContext,
    tx: Transaction,
    stage: Stage,
    task_id: int | None,
    exit_code: int | None,
    status: str,
    message: str,
    was_started: bool,
) -> None:
    if was_started:
        stage.tasks_running = max(0, stage.tasks_running - 1)
    if status == Status.FINISHED:
        stage.tasks_finished += 1
    elif status == Status.FAILED:
        stage.tasks_failed += 1
    if stage.status in TERMINAL_STATUSES:
        return
    if status == Status.FAILED:
        stage.exit_code = exit_code
        reason = f"task {task_id} failed: {message}"
        end_stage(ctx, tx, stage, Status.FAILED, reason, exit_code=exit_code)
        cancel_runs(ctx, tx, stage.workflow_id, f"canceled: {reason}", stage_id=stage.id)
    elif stage.tasks_finished >= (stage.task_count or 0):
        end_stage(ctx, tx, stage, Status.FINISHED, f"{stage.tasks_finished} tasks finished")
    else:
        # the next task starts once for all the tasks this transaction ends: one INSERT of
        # new runs per array, not a flush of its own per ended task (61 % of Orchestrate's
        # CPU under a 5,000-task array on 500 hollow nodes)
        tx.windows_due.add(stage.id)


def cancel_runs(
    ctx: EngineContext,
    tx: Transaction,
    workflow_id: str,
    reason: str,
    *,
    stage_id: int | None = None,
) -> None:
    """Cancel the workflow's (or one stage's) open runs: waiting ones at once, live ones by
    telling their nodes (the run ends when a node reports its exit)."""
    query = select(Run).where(Run.workflow_id == workflow_id, Run.status.in_(OPEN_RUN))
    if stage_id is not None:
        query = query.where(Run.stage_id == stage_id)
    for run in tx.session.scalars(query):
        if run.status == Status.PENDING:
            placement.forget(ctx, run)
            run.message = reason
            transition(tx, run, Status.CANCELED)
            continue
        tx.send(run.node_ids, Cancel(run.id, reason))


def end_stage(
    ctx: EngineContext,
    tx: Transaction,
    stage: Stage,
    status: str,
    message: str,
    when: float | None = None,
    *,
    exit_code: int | None = None,
) -> None:
    """End a stage with ``message``; its workflow is advanced in this pass.

    ``exit_code`` is the code its container's command exited with, when that ended it; a
    failure's ``stage_failed`` event carries it (``exit_code`` in the event's data, as
    ``container_exited`` has it), so a user reads why without looking for the run's event.
    """
    stage.message = message
    data: dict[str, Any] = {}
    if status == Status.FAILED and exit_code is not None:
        data["exit_code"] = exit_code
    transition(tx, stage, status, f"{stage.name}: {message}", when=when, **data)
    ctx.dirty.add(stage.workflow_id)


def end_workflow(
    ctx: EngineContext, tx: Transaction, workflow: Workflow, status: str, error: str
) -> None:
    """End a workflow (``error`` is kept unless it finished), drop its plan, and tell the
    nodes holding its directories (:func:`workflow_ends.tell_nodes`)."""
    failed = status != Status.FINISHED
    workflow.error = error if failed else ""
    transition(
        tx,
        workflow,
        status,
        f"workflow {workflow.name}: {status.lower()}" + (f" ({error})" if error and failed else ""),
    )
    ctx.plans.forget(workflow.id)
    workflow_ends.tell_nodes(ctx, tx, workflow.id)
