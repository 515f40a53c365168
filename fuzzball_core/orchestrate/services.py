"""Service stages: long-running containers the workflow's jobs depend on.

A job depending on a service starts once the service runs, or once its readiness probe
passed when it has one (the node reports ``RunReady``). Services serve the workflow's jobs:
once every other stage has ended (but a volume's egress, which waits for them), the services
still up are stopped and count as finished (a workflow of services alone runs until it is
stopped).
"""

from __future__ import annotations

from fuzzball_core.orchestrate import events, runs
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.plans import PlanEntry
from fuzzball_core.orchestrate.states import LIVE_RUN
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.spec import StageKind
from fuzzball_core.store.models import Run, Stage
from fuzzball_core.vocabulary import TERMINAL_STATUSES, EventKind, Status


def service_names(entry: PlanEntry) -> set[str]:
    """The workflow's service stages."""
    stages = entry.plan.stages
    return {name for name, planned in stages.items() if planned.kind is StageKind.SERVICE}


def running(
    ctx: EngineContext, entry: PlanEntry, stages: dict[str, Stage], started: set[str]
) -> set[str]:
    """The services that count as running for their dependents: started, and ready when
    they have a readiness probe."""
    return {
        name
        for name in service_names(entry) & started
        if stages[name].status == Status.STARTED
        and (
            entry.plan.stages[name].definition.readiness_probe is None
            or stages[name].id in ctx.told.ready_stages
        )
    }


def ready(ctx: EngineContext, tx: Transaction, run_id: int) -> None:
    """A service's readiness probe passed: its dependents may start."""
    run = tx.session.get(Run, run_id)
    stage = tx.session.get(Stage, run.stage_id) if run is not None else None
    if run is None or stage is None or run.status not in LIVE_RUN:
        return
    if not ctx.told.mark_ready(stage.id):
        return  # said again after a reconnect
    ctx.dirty.add(run.workflow_id)
    events.record(
        tx,
        EventKind.SERVICE_READY,
        f"{stage.name}: readiness probe passed",
        workflow_id=run.workflow_id,
        stage_name=stage.name,
    )


def stop_after_jobs(
    ctx: EngineContext,
    tx: Transaction,
    workflow_id: str,
    stages: dict[str, Stage],
    entry: PlanEntry,
) -> None:
    """Once every job of the workflow has ended, stop its services still up."""
    services = service_names(entry)
    planned = entry.plan.stages
    jobs = [name for name in stages if planned[name].kind is StageKind.JOB]
    if not services or not jobs:
        return  # services alone (and their images) serve until the workflow is stopped
    # a volume's egress waits for the services instead (they may write to its volume)
    waited = (n for n in stages if n not in services and planned[n].kind is not StageKind.FILE)
    if any(stages[n].status not in TERMINAL_STATUSES for n in waited):
        return
    for name in services:
        stage = stages[name]
        if stage.status in TERMINAL_STATUSES or entry.plan.stages[name].definition.persist:
            continue  # ``persist: true`` serves on until the workflow is stopped
        runs.cancel_runs(ctx, tx, workflow_id, "the workflow's jobs ended", stage_id=stage.id)
        runs.end_stage(ctx, tx, stage, Status.FINISHED, "stopped: every job of the workflow ended")
