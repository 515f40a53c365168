"""Rebuilding the engine's in-memory view from the database.

At start-up (:func:`rebuild` with ``restarted``) and after a failed unit of work, the
scheduler is told every node and every live run as the database holds them, the PENDING runs
wait for placement again, and every active workflow is advanced in the next pass. Whatever the
failed work had placed, popped or released only in memory is thereby undone.
"""

from __future__ import annotations

import contextlib
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from fuzzball_core.errors import FuzzballError, NotFound
from fuzzball_core.orchestrate import nodes, placement, workflow_ends
from fuzzball_core.orchestrate.context import EngineContext, LiveRun
from fuzzball_core.orchestrate.states import OPEN_RUN, READY
from fuzzball_core.store.models import Node, Run, Stage, Workflow
from fuzzball_core.vocabulary import Status

T = TypeVar("T", Workflow, Stage)


def rebuild(ctx: EngineContext, *, restarted: bool = False) -> None:
    """Make the scheduler, the waiting runs and the workflows to advance match the database.

    ``restarted``: Orchestrate itself was away, not the nodes, so each READY node gets a
    full lease to reconnect before its work is declared lost, and more while the other
    nodes' reconnects are still being worked through (:attr:`EngineContext.returning`).
    """
    now = ctx.clock()
    ctx.live_rows.clear()  # what they hold may be what a failed transaction never stored
    with ctx.sessions() as session:
        rows = list(session.scalars(select(Node)))
        _forget_allocations(ctx, known={node.id for node in rows})
        ctx.node_names.clear()
        # leases renewed in memory since their rows were written stay renewed
        renewed = {node.id: ctx.leases[node.id] for node in rows if node.id in ctx.leases}
        ctx.leases.clear()
        ctx.stored_leases.clear()
        ctx.first_lapse = 0.0  # refilled below: the next pass scans them
        holds = nodes.holds_by_node(session)
        for node in rows:
            ctx.node_names[node.id] = node.name
            if restarted and node.status == READY:
                node.lease_expires_at = max(node.lease_expires_at, now + ctx.lease_seconds)
            if node.status == READY:
                ctx.stored_leases[node.id] = node.lease_expires_at
                ctx.leases[node.id] = max(node.lease_expires_at, renewed.get(node.id, 0.0))
            ctx.scheduler.upsert_node(
                nodes.node_info(
                    node,
                    ready=node.status == READY,
                    holds=holds.get(node.id, ()),
                    device_plugin_failed=ctx.device_plugin_failed.get(node.id, False),
                )
            )
        session.commit()
        # a closed stream's grace outlives a rebuild after a failed pass (the stream is still
        # gone) but not a restart, which grants every READY node a full lease
        ctx.stream_graces = {
            node_id: deadline
            for node_id, deadline in ctx.stream_graces.items()
            if node_id in ctx.leases and not restarted
        }
        if restarted:
            ctx.returning.nodes = set(ctx.leases)
            ctx.returning.until = now + nodes.RESTART_GRACE_LEASES * ctx.lease_seconds
        ctx.pending.clear()
        ctx.dispatched.clear()
        ctx.live_runs.clear()
        ctx.diagnoses = {}
        open_runs = list(session.scalars(select(Run).where(Run.status.in_(OPEN_RUN))))
        # their workflows and stages in two queries, held here: the session keeps a row only
        # while something references it, so a get() per run read them again for every run
        # (10,000 running tasks of 20 arrays: 20,000 statements before the node API served)
        workflows = _by_id(session, Workflow, {run.workflow_id for run in open_runs})
        stages = _by_id(session, Stage, {run.stage_id for run in open_runs})
        for run in open_runs:
            workflow = workflows.get(run.workflow_id)
            stage = stages.get(run.stage_id)
            if workflow is None or stage is None:
                continue
            if run.status == Status.PENDING:
                placement.wait_for_placement(ctx, workflow, stage, run, run.created_at)
            else:
                started = run.status == Status.STARTED
                ctx.live_runs[run.id] = LiveRun(
                    workflow.id, stage.name, stage.id, run.task_id, tuple(run.node_ids), started
                )
                # the nodes of its ended runs say so in their Hellos (workflow_ends)
                workflow_ends.ran_on(ctx, workflow.id, run.node_ids)
                request = placement.request_for(ctx, workflow, stage, run, run.created_at)
                ctx.scheduler.allocate(
                    request, run.node_ids, started_at=run.started_at, cpus=run.cpus
                )
        active = list(
            session.scalars(
                select(Workflow.id).where(Workflow.status.in_((Status.PENDING, Status.STARTED)))
            )
        )
        # only active workflows' stages are ever asked about (an ended workflow is neither
        # advanced nor woken): the runs of 100,000 finished ones are not read at start-up
        dispatched = (
            select(Run.stage_id)
            .join(Stage, Stage.id == Run.stage_id)
            .where(Stage.workflow_id.in_(active))
            .distinct()
        )
        ctx.dispatched.update(session.scalars(dispatched) if active else ())
        ctx.dirty.update(active)


def _by_id(session: Session, model: type[T], ids: set[Any]) -> dict[Any, T]:
    """The rows of ``model`` with these ids, by id, in one query."""
    if not ids:
        return {}
    return {row.id: row for row in session.scalars(select(model).where(model.id.in_(ids)))}


def _forget_allocations(ctx: EngineContext, known: set[str]) -> None:
    """Release every run the scheduler holds, and forget nodes the database does not have
    (registered by work that was rolled back)."""
    for node_id in set(ctx.node_names) | known:
        try:
            usage = ctx.scheduler.node_usage(node_id)
        except NotFound:
            continue
        for job_id in usage.job_ids:
            with contextlib.suppress(NotFound):  # a multinode run is on several nodes
                ctx.scheduler.release(job_id)
        if node_id not in known:
            with contextlib.suppress(FuzzballError):
                ctx.scheduler.remove_node(node_id)
