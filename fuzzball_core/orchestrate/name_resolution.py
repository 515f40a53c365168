"""Inter-job name resolution within a workflow: a job reaches a service by its name.

Services run on their node's network, so a service's name resolves to the address its node
registered (``RegisterRequest.address``; a multinode service's to its first node). Each
assignment carries the names of the workflow's services placed at that moment, and the node
writes them into the container's ``/etc/hosts``: a job that depends on a service (and so
starts once it runs) always finds it.
"""

from __future__ import annotations

from sqlalchemy import select

from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.states import LIVE_RUN
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.spec import StageKind as PlannedKind
from fuzzball_core.store.models import Run, Stage, Workflow
from fuzzball_core.vocabulary import StageKind


def service_hosts(
    ctx: EngineContext, tx: Transaction, workflow_id: str
) -> tuple[tuple[str, str], ...]:
    """(service name, its node's address) for each of the workflow's services placed now
    on a node that registered an address, sorted by name."""
    workflow = tx.get(Workflow, workflow_id)  # in the session already: no query
    if workflow is not None and not any(
        stage.kind is PlannedKind.SERVICE for stage in ctx.plans.entry(workflow).plan
    ):
        # no service to resolve: asked for every assignment, the query below made a task
        # array's placement quadratic in its live runs (bench/hollow.py's profile)
        return ()
    placed = tx.session.execute(
        select(Stage.name, Run.node_ids)
        .join(Run, Run.stage_id == Stage.id)
        .where(
            Stage.workflow_id == workflow_id,
            Stage.kind == StageKind.SERVICE,
            Run.status.in_(LIVE_RUN),
        )
    )
    hosts: dict[str, str] = {}
    for stage_name, node_ids in placed:
        address = ctx.node_addresses.get(node_ids[0], "") if node_ids else ""
        if address:
            hosts[stage_name.partition(".")[2] or stage_name] = address
    return tuple(sorted(hosts.items()))
