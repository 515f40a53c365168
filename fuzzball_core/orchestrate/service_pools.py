"""Services that scale to zero (``scale.min: 0``): idle until a request wakes them.

Such a service does not start with its workflow: its stage counts as dispatched (the plan
goes on) but no run is created until a request through one of its endpoints wakes it
(:func:`wake`). After ``scale.idle-timeout`` (default :data:`DEFAULT_IDLE_TIMEOUT`) without
a request it is stopped again (:func:`scale_down`); its stage stays as it was, so the next
request wakes it once more. A run stopped this way carries :data:`SCALED_DOWN` as its
message until it ends, which tells :func:`fuzzball_core.orchestrate.runs.finish_run` to
leave the stage alone.

A service scaled to zero is not yet running for the jobs that depend on it: they start
once a request has woken it.
"""

from __future__ import annotations

from sqlalchemy import select

from fuzzball_core.orchestrate import placement
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.messages import Cancel
from fuzzball_core.orchestrate.states import LIVE_RUN, OPEN_RUN
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.spec import Stage as PlanStage
from fuzzball_core.spec import StageKind
from fuzzball_core.spec.models import Service
from fuzzball_core.spec.units import parse_duration
from fuzzball_core.store.models import Run, Stage, Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES

#: idle seconds before a service scaled to zero is stopped, when it gives no idle-timeout
DEFAULT_IDLE_TIMEOUT = 600.0
#: the message of a run stopped because its service was idle
SCALED_DOWN = "scaled to zero: no request within its idle timeout"


def scales_to_zero(definition: object) -> bool:
    """Whether a service declares ``scale.min: 0``."""
    return (
        isinstance(definition, Service)
        and definition.scale is not None
        and definition.scale.min == 0
    )


def idle_timeout(definition: Service) -> float:
    """Seconds without a request before the service is stopped."""
    scale = definition.scale
    if scale is None or scale.idle_timeout is None:
        return DEFAULT_IDLE_TIMEOUT
    return float(parse_duration(scale.idle_timeout))


def hold_idle(ctx: EngineContext, stage: Stage, planned: PlanStage) -> bool:
    """Keep a ready service stage that scales to zero without a run (True), or say it is
    an ordinary stage to start (False)."""
    if planned.kind is not StageKind.SERVICE or not scales_to_zero(planned.definition):
        return False
    ctx.dispatched.add(stage.id)  # started, for the plan: it only waits for a request
    return True


def open_run(tx: Transaction, stage_id: int) -> Run | None:
    """The stage's run that has not ended, if any."""
    return tx.session.scalars(
        select(Run).where(Run.stage_id == stage_id, Run.status.in_(OPEN_RUN))
    ).first()


def wake(ctx: EngineContext, tx: Transaction, workflow_id: str, stage_name: str) -> bool:
    """Create the run of an idle service scaled to zero; whether there is (now) one to
    wait for (or one stopping, to wake again once it ended). False when the workflow or the
    stage has ended."""
    workflow = tx.session.get(Workflow, workflow_id)
    stage = tx.session.scalars(
        select(Stage).where(Stage.workflow_id == workflow_id, Stage.name == stage_name)
    ).first()
    if workflow is None or stage is None or workflow.status in TERMINAL_STATUSES:
        return False
    if stage.status in TERMINAL_STATUSES:
        return False
    if stage.id not in ctx.dispatched:
        return True  # its dependencies have not let it start yet: it will start by itself
    if open_run(tx, stage.id) is None:
        placement.new_runs(ctx, tx, workflow, stage, [None])
    return True  # (a run still stopping from its idle timeout: wake again once it ended)


def scale_down(ctx: EngineContext, tx: Transaction, workflow_id: str, stage_name: str) -> None:
    """Stop an idle service's run; its stage stays, to be woken again."""
    stage = tx.session.scalars(
        select(Stage).where(Stage.workflow_id == workflow_id, Stage.name == stage_name)
    ).first()
    if stage is None or stage.status in TERMINAL_STATUSES:
        return
    run = open_run(tx, stage.id)
    if run is None or run.message == SCALED_DOWN:
        return
    if run.status not in LIVE_RUN:
        return  # not placed yet: it was just woken
    run.message = SCALED_DOWN
    ctx.told.ready_stages.discard(stage.id)  # the next instance is probed again
    tx.send(run.node_ids, Cancel(run.id, SCALED_DOWN))


def scaled_down(run: Run) -> bool:
    """Whether ``run`` ended because its service was idle (its stage goes on)."""
    return run.message == SCALED_DOWN
