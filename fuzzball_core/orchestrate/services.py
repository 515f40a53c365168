"""Service stages: long-running containers the workflow's jobs depend on.

A job depending on a service starts once the service runs, or once its readiness probe
passed when it has one (the node reports ``RunReady``). Services serve the workflow's jobs:
once every other stage has ended (but a volume's egress, which waits for them) or waits for
a service to end (``status: FINISHED`` or ``FAILED`` on a service, directly or through
another waiting stage), the services still up are stopped and count as finished; what
waited for them then runs (after ``FINISHED``) or is skipped (after ``FAILED``). A workflow
of services alone runs until it is stopped.
"""

from __future__ import annotations

from fuzzball_core.orchestrate import events, runs
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.plans import PlanEntry
from fuzzball_core.orchestrate.states import LIVE_RUN
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.spec import Condition, Plan, StageKind
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


def ready(ctx: EngineContext, tx: Transaction, run: Run) -> None:
    """A service's readiness probe passed (its node reported it for ``run``): its dependents
    may start."""
    stage = tx.session.get(Stage, run.stage_id)
    if stage is None or run.status not in LIVE_RUN:
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
    """Once every job of the workflow has ended or waits for a service to end, stop its
    services still up."""
    services = service_names(entry)
    planned = entry.plan.stages
    jobs = [name for name in stages if planned[name].kind is StageKind.JOB]
    if not services or not jobs:
        return  # services alone (and their images) serve until the workflow is stopped
    # a volume's egress waits for the services instead (they may write to its volume)
    waited = (n for n in stages if n not in services and planned[n].kind is not StageKind.FILE)
    still_open = {n for n in waited if stages[n].status not in TERMINAL_STATUSES}
    if any(stages[n].status != Status.PENDING for n in still_open):
        return  # a job still runs (the common case: nothing more to work out)
    if still_open - waiting_for_a_service_to_end(entry.plan, stages, services):
        return
    why = "every job of the workflow ended"
    if still_open:
        why = "every job of the workflow ended or waits for a service to end"
    for name in services:
        stage = stages[name]
        if stage.status in TERMINAL_STATUSES or entry.plan.stages[name].definition.persist:
            continue  # ``persist: true`` serves on until the workflow is stopped
        runs.cancel_runs(ctx, tx, workflow_id, "the workflow's jobs ended", stage_id=stage.id)
        runs.end_stage(ctx, tx, stage, Status.FINISHED, f"stopped: {why}")


#: the edges a stage waits on for its source to end
_ENDING = (Condition.ON_SUCCESS, Condition.ON_FAILURE)


def waiting_for_a_service_to_end(
    plan: Plan, stages: dict[str, Stage], services: set[str]
) -> set[str]:
    """Stages not yet started that cannot start before a service still up ends: those with
    ``status: FINISHED`` or ``FAILED`` on it, and those waiting on such a stage. A service
    serves until it is stopped, so they must not hold back its stop (or nothing would move
    again), unless its command exits on its own first."""
    waiting: set[str] = set()
    for name in plan.topological_order():
        stage = stages.get(name)
        if stage is None or stage.status != Status.PENDING:
            continue
        for edge in plan.dependencies_of(name):
            source = edge.source
            if source in waiting or (
                source in services
                and edge.condition in _ENDING
                and stages[source].status not in TERMINAL_STATUSES
            ):
                waiting.add(name)
                break
    return waiting
