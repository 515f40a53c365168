"""Multinode runs: one run spread over several nodes, each running its part.

Every node of the run gets the same assignment and runs its own ranks; the run ends with its
last part, or with the first that fails, which stops the others. PMI barriers between the
parts go through the :class:`~fuzzball_core.orchestrate.fences.FenceRelay`.
"""

from __future__ import annotations

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.messages import Cancel
from fuzzball_core.orchestrate.states import LIVE_RUN
from fuzzball_core.orchestrate.transaction import RunFields, Transaction
from fuzzball_core.store.models import Run


def is_multinode(run: RunFields) -> bool:
    """Whether the run spans more than one node."""
    return len(run.node_ids) > 1


def assigned(ctx: EngineContext, run: RunFields) -> None:
    """The run's assignment goes out: relay its fences between its nodes from now on."""
    if is_multinode(run):
        ctx.fences.watch(run.id, run.node_ids)


def part_finished(run: Run, node_id: str) -> bool:
    """Record that ``node_id``'s part of the run finished well; True while other parts still
    run (the run is not over yet)."""
    if not is_multinode(run):
        return False
    done = sorted({*(run.parts_done or ()), node_id} & set(run.node_ids))
    if len(done) < len(run.node_ids):
        run.parts_done = done
        return True
    return False


def stop_other_parts(ctx: EngineContext, tx: Transaction, run: Run, reason: str) -> None:
    """A multinode run ended: its parts still running elsewhere are told to stop (the node
    whose report ended it has stopped already and ignores the cancel)."""
    ctx.fences.forget(run.id)
    ctx.placement_notes.pop(run.id, None)
    tx.send(
        (node_id for node_id in run.node_ids if node_id not in (run.parts_done or ())),
        Cancel(run.id, reason),
    )


def relay_fence(ctx: EngineContext, tx: Transaction, node_id: str, fence: node_pb2.Fence) -> None:
    """A fence of a run the relay did not watch (Orchestrate restarted since it was
    assigned): watch the run again and relay. The ``FenceDone`` goes out at once, as fences
    arriving outside a pass do, since it changes nothing in the database."""
    run = tx.session.get(Run, fence.run_id)
    if run is None or run.status not in LIVE_RUN:
        return
    ctx.fences.watch(run.id, run.node_ids)
    for target, control in ctx.fences.relay(node_id, fence) or ():
        ctx.hub.send(target, control)
