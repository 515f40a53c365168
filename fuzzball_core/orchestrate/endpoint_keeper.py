"""The endpoints' own loop: finishes ``ready`` takeovers (waking a successor scaled to
zero), stops the workflows they took over once drained, and scales idle pools back to zero
(pools found running after a restart are timed from when they were found).

It runs on Orchestrate's event loop beside the engine (:func:`fuzzball_core.health.
keep_running`, shown in ``/readyz`` as ``endpoints``), every :data:`TICK` seconds, and
changes state only through :meth:`Engine.change`, like every change outside a pass.
"""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial

from sqlalchemy import select

from fuzzball_core.backoff import Backoff
from fuzzball_core.health import Health, keep_running
from fuzzball_core.orchestrate import endpoints, service_pools
from fuzzball_core.orchestrate.endpoint_directory import EndpointDirectory
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.states import LIVE_RUN
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.store.models import Run, ServiceEndpoint, Stage, Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES, StageKind

log = logging.getLogger("fuzzball.orchestrate.endpoints")

#: seconds between turns
TICK = 0.25
#: seconds between looks for running pools this process has not timed yet
ADOPT_EVERY = 30.0
LOOP = "endpoints"


class EndpointKeeper:
    """Takeovers, retirements and idle pools (see the module's docstring)."""

    def __init__(self, engine: Engine, directory: EndpointDirectory, *, drain: float) -> None:
        self.engine = engine
        self.directory = directory
        self.drain = drain
        #: when a request last went to each woken pool: (workflow id, stage name) -> time
        self._last_request: dict[tuple[str, str], tuple[float, float]] = {}
        #: when the running pools were last looked for (:meth:`_adopt_pools`)
        self._adopted_at = float("-inf")

    def touch(self, workflow_id: str, stage_name: str, idle_timeout: float) -> None:
        """A request went to a pool's instance now."""
        self._last_request[(workflow_id, stage_name)] = (time.monotonic(), idle_timeout)

    async def run(self, health: Health) -> None:
        """Turn after turn until cancelled; a failing turn is logged and retried (listed
        in ``/readyz``, not required: the API serves without it)."""
        health.declare(LOOP, "no pass yet", required=False)
        await keep_running(
            LOOP, self._turn, health=health, retry=Backoff(initial=0.5, maximum=10.0), logger=log
        )

    async def _turn(self) -> None:
        await asyncio.sleep(TICK)
        self.step()

    def step(self) -> None:
        """One turn: what is due now."""
        with self.engine.sessions() as session:
            due = session.scalars(
                select(ServiceEndpoint.id).where(
                    (ServiceEndpoint.pending_workflow_id.is_not(None))
                    | (ServiceEndpoint.retiring_workflow_id.is_not(None))
                )
            ).first()
        if due is not None:
            self.engine.change(self._takeovers)
        if time.monotonic() - self._adopted_at >= ADOPT_EVERY:
            self._adopt_pools()
        self._scale_down_idle()

    def _adopt_pools(self) -> None:
        """Time from now the pools found running that no request has touched in this
        process (woken before Orchestrate restarted), so they too scale down when idle."""
        self._adopted_at = time.monotonic()
        with self.engine.sessions() as session:
            running = session.execute(
                select(Workflow, Stage.name)
                .join(Stage, Stage.workflow_id == Workflow.id)
                .join(Run, Run.stage_id == Stage.id)
                .where(
                    Workflow.status.not_in(TERMINAL_STATUSES),
                    Stage.kind == StageKind.SERVICE,
                    Run.status.in_(LIVE_RUN),
                )
            ).all()
        plans = self.engine.context.plans
        for workflow, stage_name in running:
            if (workflow.id, stage_name) in self._last_request:
                continue
            definition = plans.entry(workflow).plan.stages[stage_name].definition
            if service_pools.scales_to_zero(definition):
                self.touch(workflow.id, stage_name, service_pools.idle_timeout(definition))

    def _takeovers(self, tx: Transaction) -> None:
        for row in endpoints.pending_takeovers(tx.session):
            if endpoints.drop_ended_pending(tx, row):
                continue
            new = self.directory.upstream(
                tx.session,
                row.pending_workflow_id,
                row.pending_service,
                row.pending_port,
                row.protocol,
            )
            if new is not None and new.pool and not new.url:
                # a successor scaled to zero is woken: it cannot become ready otherwise
                service_pools.wake(self.engine.context, tx, new.workflow_id, new.stage_name)
            if new is not None and new.ready:
                log.info("endpoint %s moves to workflow %s", row.id, row.pending_workflow_id)
                endpoints.switch(tx, row, self.drain)
                self.directory.forget(row.id)
        endpoints.retire_due(self.engine.context, tx)

    def _scale_down_idle(self) -> None:
        now = time.monotonic()
        idle = [key for key, (last, timeout) in self._last_request.items() if now - last >= timeout]
        for workflow_id, stage_name in idle:
            del self._last_request[(workflow_id, stage_name)]
            log.info("%s of workflow %s is idle: scaling to zero", stage_name, workflow_id)
            self.engine.change(partial(self._scale_down, workflow_id, stage_name))

    def _scale_down(self, workflow_id: str, stage_name: str, tx: Transaction) -> None:
        service_pools.scale_down(self.engine.context, tx, workflow_id, stage_name)
