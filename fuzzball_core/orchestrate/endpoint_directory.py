"""Where an endpoint leads now, for the proxy: its owner and scope, and the address of the
service instance behind it and whether that instance is ready.

The answer comes from the store (the endpoint's row, the service's live run) and the
engine's memory (node addresses, passed readiness probes), on Orchestrate's event loop
like the engine itself. A ready answer is kept :data:`READY_TTL` seconds, so a busy
endpoint costs no query per request; anything else is looked up every time, and the
keeper forgets an endpoint's answer the moment it moves it (:meth:`forget`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from fuzzball_core.orchestrate import service_pools
from fuzzball_core.orchestrate.endpoints import plausible_reference
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.states import LIVE_RUN
from fuzzball_core.spec.models import Service
from fuzzball_core.store.models import Run, ServiceEndpoint, Stage, Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES, Status

#: seconds a ready answer is reused
READY_TTL = 1.0


@dataclass(frozen=True)
class Upstream:
    """One service of one workflow, as the proxy reaches it."""

    workflow_id: str
    #: the service's stage (``services.NAME``)
    stage_name: str
    #: ``http://ADDRESS:PORT`` of its running instance ('' when none runs)
    url: str
    #: running and, when it has a readiness probe, passed it
    ready: bool
    #: ``scale.min: 0``: a request may wake it
    pool: bool
    #: seconds without a request before a pool is scaled to zero again
    idle_timeout: float


@dataclass(frozen=True)
class Destination:
    """An endpoint and, while a live workflow holds it, the service it leads to."""

    endpoint_id: str
    name: str
    scope: str
    account_id: str
    organization_id: str | None
    owner_user_id: str | None
    upstream: Upstream | None


class EndpointDirectory:
    """Answers "where does endpoint ID lead" from the store and the engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._ready: dict[str, tuple[float, Destination]] = {}
        #: called with each endpoint forgotten: the proxy's process keeps answers too
        self.on_forget: list[Callable[[str], None]] = []

    def forget(self, endpoint_id: str) -> None:
        """Drop a kept answer (the endpoint moved), here and wherever one is kept."""
        self._ready.pop(endpoint_id, None)
        for tell in self.on_forget:
            tell(endpoint_id)

    def lookup(self, endpoint_id: str) -> Destination | None:
        """Where ``endpoint_id`` leads; None when no such endpoint exists (or it was a
        workflow's own and the workflow ended). Store errors propagate (the proxy answers
        them 503, never 404)."""
        if not plausible_reference(endpoint_id):
            return None
        kept = self._ready.get(endpoint_id)
        now = time.monotonic()
        if kept is not None and kept[0] > now:
            return kept[1]
        with self.engine.sessions() as session:
            found = self._lookup(session, endpoint_id)
        if found is not None and found.upstream is not None and found.upstream.ready:
            self._ready[endpoint_id] = (now + READY_TTL, found)
        else:
            self._ready.pop(endpoint_id, None)
        return found

    def _lookup(self, session: Session, endpoint_id: str) -> Destination | None:
        row = session.get(ServiceEndpoint, endpoint_id)
        if row is None:
            return None
        upstream = self.upstream(session, row.workflow_id, row.service, row.port, row.protocol)
        if upstream is None and not row.persistent:
            return None  # a workflow's own endpoint ends with it
        return Destination(
            endpoint_id=row.id,
            name=row.name,
            scope=row.scope,
            account_id=row.account_id,
            organization_id=row.organization_id,
            owner_user_id=row.owner_user_id,
            upstream=upstream,
        )

    def upstream(
        self, session: Session, workflow_id: str | None, service: str, port: int, protocol: str
    ) -> Upstream | None:
        """The service ``service`` of the live workflow ``workflow_id`` (None when the
        workflow is absent or ended)."""
        workflow = session.get(Workflow, workflow_id) if workflow_id else None
        if workflow is None or workflow.status in TERMINAL_STATUSES:
            return None
        ctx = self.engine.context
        stage_name = f"services.{service}"
        definition = ctx.plans.entry(workflow).plan.stages[stage_name].definition
        assert isinstance(definition, Service)
        found = session.execute(
            select(Stage.id, Run.status, Run.node_ids)
            .join(Run, Run.stage_id == Stage.id)
            .where(
                Stage.workflow_id == workflow.id,
                Stage.name == stage_name,
                Run.status.in_(LIVE_RUN),
            )
            .order_by(Run.id.desc())
        ).first()
        url, ready = "", False
        if found is not None:
            stage_id, status, node_ids = found
            address = ctx.node_addresses.get(node_ids[0], "") if node_ids else ""
            if address:
                url = f"{protocol}://{address}:{port}"
            ready = (
                bool(url)
                and status == Status.STARTED
                and (definition.readiness_probe is None or stage_id in ctx.told.ready_stages)
            )
        return Upstream(
            workflow_id=workflow.id,
            stage_name=stage_name,
            url=url,
            ready=ready,
            pool=service_pools.scales_to_zero(definition),
            idle_timeout=service_pools.idle_timeout(definition),
        )
