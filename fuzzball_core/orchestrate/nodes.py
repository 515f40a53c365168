"""Nodes: registration, leases, holds, deprovisioning and removal.

Each function works in the caller's transaction; the scheduler is told of every change to a
node's readiness or holds as the transaction has them (:func:`refresh`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import String, cast, or_, select, update
from sqlalchemy.orm import Session

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import FailedPrecondition, NotFound
from fuzzball_core.orchestrate import (
    events,
    placement,
    runs,
    volume_removal,
    volumes,
    workflow_ends,
)
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.messages import Cancel, Shutdown
from fuzzball_core.orchestrate.retries import NODE as NODE_CAUSE
from fuzzball_core.orchestrate.states import ASSIGNED, DEPROVISIONED, LIVE_RUN, OFFLINE, READY
from fuzzball_core.orchestrate.transaction import Transaction, task_label
from fuzzball_core.orchestrate.workflow_volumes import NODE_ANNOTATION
from fuzzball_core.scheduling import CpuCore, Hold, HoldEffect, HoldSource, NodeInfo, Resources
from fuzzball_core.store.models import Node, NodeHold, Run, Stage, Volume
from fuzzball_core.vocabulary import EventKind, Status

log = logging.getLogger("fuzzball.orchestrate")


def register(
    ctx: EngineContext,
    tx: Transaction,
    name: str,
    capacity: Resources,
    annotations: dict[str, str],
    *,
    device_plugin_failed: bool = False,
    address: str = "",
    cpu_topology: Sequence[CpuCore] = (),
    preloaded: Preloaded | None = None,
    node_holds: Sequence[NodeHold] | None = None,
) -> str:
    """Record a node (new, or returning under the same name); return its id. ``preloaded``:
    the rows a batch of arrivals read at once (:func:`preload`); ``node_holds``: the node's
    holds, when the caller has read them."""
    if preloaded is None:
        node = tx.session.scalars(select(Node).where(Node.name == name)).first()
    else:
        node = preloaded.by_name.get(name)
    returning = node is not None
    if node is None:
        node = Node(id=str(uuid.uuid4()), name=name, registered_at=tx.now)
        tx.session.add(node)
        if preloaded is not None:
            preloaded.by_name[name] = node  # a second registration of it in the batch
            tx.loaded.append(node)  # held for the rest of the batch (the map is weak)
    node.status = READY
    node.cores = capacity.cores
    node.memory = capacity.memory
    node.devices = dict(capacity.devices)
    node.annotations = dict(annotations)
    node.cpu_topology = [core.to_dict() for core in cpu_topology] or None
    node.last_seen = tx.now
    # the cluster's lease from the Register on, not only from the Hello: thousands of nodes
    # joining at once queue their Connects behind the others' calls in gRPC's server, and
    # a node waiting there longer than the configured lease was lost before its Hello
    _lease_for_cluster(ctx, node.id)
    node.lease_expires_at = tx.now + lease_of(ctx, node.id)
    _track_lease(ctx, node)
    # a node reconnecting registers first: it is back, and its Hello may wait its turn behind
    # other arrivals longer than a closed stream's grace
    _back_within_grace(ctx, node.id, tx.now)
    ctx.node_names[node.id] = name
    ctx.device_plugin_failed[node.id] = device_plugin_failed
    ctx.node_addresses[node.id] = address
    _came_back(ctx, node.id, tx.now)
    if not returning:
        tx.session.flush()  # the new row, before anything names it
        node_holds = []  # a new node has none
    refresh(ctx, tx, node, node_holds)
    events.record(
        tx,
        EventKind.NODE_REGISTERED,
        f"node {name} {'re-registered' if returning else 'registered'}: {capacity.describe()}",
        node_id=node.id,
    )
    return node.id


def hello(
    ctx: EngineContext,
    tx: Transaction,
    node_id: str,
    known: set[int],
    preloaded: Preloaded | None = None,
    kept_workflows: Collection[str] = (),
) -> list[int]:
    """A node (re)connected knowing these runs: reconcile, and return the ones to drop.

    Runs assigned to the node that it never received are sent again; runs it should be
    running but no longer knows failed with it; runs it knows that are over (or were never
    ours) are returned so the node stops them. Of the workflows whose directories it keeps
    (``kept_workflows``), it is told those that ended
    (:func:`~fuzzball_core.orchestrate.workflow_ends.answer_hello`). ``preloaded``: the rows
    a batch of arrivals read at once (:func:`preload`).
    """
    node = tx.session.get(Node, node_id)
    if node is None:
        raise NotFound(f"node {node_id} is not registered")
    # the lease its Welcome will name, for the cluster as it is now (a new stream starts
    # from the cluster's size, not from what an earlier stream was told)
    _lease_for_cluster(ctx, node_id)
    # the scheduler already has the node as the row says (every change of its readiness or
    # holds tells it): renew tells it again only if the node was offline and is back
    renew(ctx, tx, node)
    placed = _running_parts_placed(ctx, tx, node_id, preloaded)
    for run in placed:
        if run.id in known:
            continue
        if run.status == ASSIGNED:
            placement.send_assignment(ctx, tx, run)
        else:
            runs.finish_run(
                ctx,
                tx,
                run,
                Status.FAILED,
                f"node {node.name} restarted and no longer runs this job",
                None,
                cause=NODE_CAUSE,
            )
    if ctx.hub.connected(node_id):
        # back on a stream within its grace: the lease renewed above is whole again (a
        # stream that closed while this Hello waited leaves the grace running)
        _back_within_grace(ctx, node_id, tx.now)
    volume_removal.resend(tx, node_id, preloaded.deleting if preloaded else None)
    workflow_ends.answer_hello(
        ctx, tx, node_id, kept_workflows, preloaded.workflow_statuses if preloaded else None
    )
    # the runs it knows, in one query (the session keeps rows only while they are referenced:
    # a get() per run would read each again, 20 statements for a node running 20 jobs)
    rows = {run.id: run for run in placed}
    rows.update((run.id, run) for run in _runs(tx, known - rows.keys(), preloaded))
    unwanted = []
    for run_id in known:
        row = rows.get(run_id)
        if row is None or row.status not in LIVE_RUN or node_id not in row.node_ids:
            unwanted.append(run_id)
    _came_back(ctx, node_id, tx.now, reconnected=True)
    retune(ctx, skip=node_id)
    return unwanted


#: The heartbeats a second Orchestrate asks of the whole cluster at most. Past
#: ``lease / 3 * HEARTBEATS_PER_SECOND / RETUNE_GROWTH`` READY nodes (600 at the default
#: 15 s lease) a node's heartbeat interval grows with the cluster, and its lease with it
#: (three intervals), as kubelet's node leases and Slurm's SlurmdTimeout (300 s by default)
#: are set longer on large clusters: a heartbeat costs Orchestrate 0.3-0.4 ms of CPU on a
#: loaded machine, nearly all gRPC's own per-message work (``bench/hollow.py`` at 5,000
#: nodes: 10 % of a core at 252 heartbeats a second), so lease traffic stays near 5 % of a
#: core at any size; 5,000 nodes heartbeat every 33-42 s on a 100-125 s lease. A busy node
#: sends none at all (any message renews its lease).
HEARTBEATS_PER_SECOND = 150.0

#: How far the cluster may outgrow the interval its connected nodes were told before they are
#: all told again (:func:`retune`): each sweep is a message per node, so not at every node.
#: The interval told is the one for a cluster this much larger (:func:`lease_terms`), so the
#: heartbeats stay under :data:`HEARTBEATS_PER_SECOND` between two sweeps.
RETUNE_GROWTH = 1.25


def lease_terms(ctx: EngineContext, ready_nodes: int) -> tuple[float, float]:
    """The lease and heartbeat interval for a node of a cluster of ``ready_nodes``: the
    configured lease and a third of it, or longer once the cluster's heartbeats at that
    interval would pass :data:`HEARTBEATS_PER_SECOND` (failure detection takes the longer
    lease: three missed intervals).

    A longer interval is the one that keeps a cluster :data:`RETUNE_GROWTH` times this size
    within the budget: connected nodes are told again only once the cluster has grown that
    much (:func:`retune`), and until then their heartbeats stay under the budget instead
    of running up to that factor past it."""
    heartbeat = max(ctx.lease_seconds / 3, ready_nodes * RETUNE_GROWTH / HEARTBEATS_PER_SECOND)
    return 3 * heartbeat, heartbeat


def _lease_for_cluster(ctx: EngineContext, node_id: str) -> None:
    """Hold the node to the lease of a node of the cluster as it is now (counting it), as its
    next Welcome names it."""
    lease, _ = lease_terms(ctx, len(ctx.leases) + (node_id not in ctx.leases))
    if lease > ctx.lease_seconds:
        ctx.node_leases[node_id] = lease
    else:
        ctx.node_leases.pop(node_id, None)


def lease_of(ctx: EngineContext, node_id: str) -> float:
    """The node's lease: the one its latest Welcome named, or the configured one if longer
    (a lease never shrinks under a node that was told it)."""
    return max(ctx.node_leases.get(node_id, 0.0), ctx.lease_seconds)


def welcome(
    ctx: EngineContext, node_id: str, unknown_run_ids: Sequence[int] = ()
) -> node_pb2.Welcome:
    """The node's Welcome: its lease and heartbeat interval, and the runs it should drop."""
    lease = lease_of(ctx, node_id)
    return node_pb2.Welcome(
        lease_seconds=lease,
        heartbeat_seconds=lease / 3,
        unknown_run_ids=unknown_run_ids,
        accepts_batches=True,  # the node API takes a NodeBatch apart
        acknowledges_logs=True,  # node_reports answers counted output with LogsStored
        tells_workflow_ends=True,  # workflow_ends: at each end, and answering the Hello
    )


def retune(ctx: EngineContext, *, skip: str = "") -> None:
    """Once the cluster has grown to the size the interval its nodes were last told was made
    for (:data:`RETUNE_GROWTH` past the cluster then: its heartbeats at that interval reach
    :data:`HEARTBEATS_PER_SECOND`), lengthen every connected node's lease to the cluster's
    as it is now (again with room to grow) and tell each in a Welcome
    on its stream (``skip``: a node whose own Welcome is about to name it). Nodes that
    connected while the cluster was small would otherwise keep heartbeating at its rate.

    The lease grows here before the node hears of it, and never shrinks while its stream
    lasts, so no node is held to an interval it was not told. The lease the node's last
    message bought grows too, to that message plus the new term: the agent, told the
    longer interval, sends no heartbeat within half of it of its last message
    (:meth:`~fuzzball_core.substrate.agent.Outbox.heartbeat`), so a node whose interval
    more than doubled within one interval (a cluster joining faster than about
    ``HEARTBEATS_PER_SECOND`` nodes a second) was silent past the old term and lost, though
    up and heartbeating as told. The lease stays its last message plus its term, as
    ``last_seen`` reads it."""
    lease, heartbeat = lease_terms(ctx, len(ctx.leases))
    if heartbeat < RETUNE_GROWTH * max(ctx.tuned_heartbeat, ctx.lease_seconds / 3):
        return
    ctx.tuned_heartbeat = heartbeat
    leases = ctx.leases
    for node_id in leases:
        if node_id != skip and (term := lease_of(ctx, node_id)) < lease:
            leases[node_id] += lease - term
            ctx.node_leases[node_id] = lease
            ctx.hub.send(node_id, node_pb2.ControlMessage(welcome=welcome(ctx, node_id)))


def stream_grace(ctx: EngineContext) -> float:
    """How long a node whose Connect stream closed (and no other stream replaced it) has to
    say Hello again before it is lost: the configured lease (15 s by default), however long
    its own lease is.

    A node's long lease on a large cluster (:func:`lease_terms`: 100-125 s at 5,000 nodes)
    is there for the heartbeat budget alone, and a closed stream sends no heartbeats: a
    crashed agent's node would keep its runs for that whole lease. The configured lease is
    what a node of a small cluster is held to anyway (three heartbeat intervals), so a
    closed stream is detected as fast as a silent node of a small cluster (kubelet's grace
    is 40-50 s, Nomad's 10 s). A healthy agent always beats it: its reconnect waits
    ``RECONNECT_BACKOFF`` (0.2 s at first, at most 2.5 s plus a fifth) and its channel's
    own reconnect at most ``CHANNEL_RECONNECT_MAXIMUM`` (1 s;
    :mod:`fuzzball_core.substrate.agent`), then a Register and a Hello: under 5 s with
    both at their caps, a third of the default lease."""
    return ctx.lease_seconds


#: A wave of closed streams at least this large within one grace is a disruption between
#: the nodes and Orchestrate (a switch, a proxy or a load balancer dropping them), not that
#: many agents failing: a share of the READY nodes, as Kubernetes' node lifecycle controller
#: stops evicting from a zone where most nodes went unready at once
#: (``--unhealthy-zone-threshold``), and never fewer than DISRUPTION_MINIMUM nodes (its
#: ``--large-cluster-size-threshold``), so a rack that loses power is still found at the grace.
DISRUPTION_SHARE = 0.1
DISRUPTION_MINIMUM = 50


def stream_closed(ctx: EngineContext, node_id: str) -> None:
    """The node's stream ended and none replaced it: unless it registers again or says
    Hello on a new stream within :func:`stream_grace`, it lapses as a silent node does (its
    runs fail with it; :func:`expire_leases`).

    The grace is kept beside the lease (:attr:`EngineContext.stream_graces`), not written
    over it: the lease still says when the node was last heard (``last_seen`` is the lease
    less the node's term) and a lease never shrinks while a stream lasts. A node that is not
    READY has no lease to cut, and a lease that ends before the grace keeps its own end.

    A disruption (:data:`DISRUPTION_SHARE`) withdraws every grace of its wave and gives none
    until a grace passes without one, and its nodes come back as a restart's do
    (:attr:`EngineContext.returning`, :func:`_spared`): none is lost while the others are
    still coming back, however long thousands of Registers take through Orchestrate's one
    loop (at 5,000 nodes a switch flap lost 4,442 nodes to the graces, then 2,707 to their
    leases, while their Registers were still queued)."""
    until = ctx.leases.get(node_id)
    if until is None:
        return
    now = ctx.clock()
    if _disruption(ctx, node_id, now):
        return
    deadline = now + stream_grace(ctx)
    if deadline >= until:
        return
    ctx.stream_graces[node_id] = deadline
    ctx.first_lapse = min(ctx.first_lapse, deadline)


def _disruption(ctx: EngineContext, node_id: str, now: float) -> bool:
    """Note READY ``node_id``'s stream closing at ``now``; True when it is part of a
    disruption (whose graces are then withdrawn and whose nodes are expected back)."""
    grace = stream_grace(ctx)
    returning = ctx.returning
    if now < ctx.disrupted_until:
        ctx.disrupted_until = now + grace  # the wave goes on
        returning.nodes.add(node_id)
        returning.until = max(returning.until, now + RESTART_GRACE_LEASES * ctx.lease_seconds)
        return True
    closes = ctx.recent_closes
    closes.append((now, node_id))
    while closes[0][0] < now - grace:
        closes.popleft()
    if len(closes) < max(DISRUPTION_MINIMUM, DISRUPTION_SHARE * len(ctx.leases)):
        return False
    log.warning(
        "%d nodes' streams closed within %.0f s: a disruption between the nodes and"
        " Orchestrate, not failed agents; their graces are withdrawn and each node is lost"
        " only when its lease ends",
        len(closes),
        grace,
    )
    ctx.disrupted_until = now + grace
    ctx.stream_graces.clear()
    returning.nodes.update(closed for _, closed in closes if closed in ctx.leases)
    returning.until = max(returning.until, now + RESTART_GRACE_LEASES * ctx.lease_seconds)
    closes.clear()
    return True


def _back_within_grace(ctx: EngineContext, node_id: str, now: float) -> None:
    """The node, whose stream had closed, registered or said Hello on a new stream: its grace
    is over, and no other grace ends for a grace from now (:attr:`EngineContext.graces_held`).

    Many streams closing at once that is no restart (a switch or a proxy dropping them all)
    brings every node back at once: thousands of Registers and Hellos on Orchestrate's one
    loop, 64 a turn, behind one another (5,000 nodes join in 43 s on a quiet machine). A grace
    counted from the close would fail the last ones for Orchestrate's own queue. While the
    nodes of such a wave are still being served, the graces of the rest are held, as the
    restart's wave holds leases (:func:`_spared`); once none came back for a whole grace,
    whoever is left lapses as before. A lease is never held this way: a node silent for its
    whole lease is lost by the lease scan, wave or not."""
    if ctx.stream_graces.pop(node_id, None) is not None:
        ctx.graces_held = max(ctx.graces_held, now + stream_grace(ctx))


#: After a restart, how many leases a node that was READY has to come back before its work
#: is declared lost, however slowly the others return: a minute at the default 15 s lease.
RESTART_GRACE_LEASES = 4


def _came_back(ctx: EngineContext, node_id: str, now: float, *, reconnected: bool = False) -> None:
    """A node expected back after a restart registered (or, ``reconnected``, said Hello and
    is back for good): the reconnect wave is still moving."""
    returning = ctx.returning
    if node_id not in returning.nodes:
        return
    returning.until = max(returning.until, now + ctx.lease_seconds)
    if reconnected:
        returning.nodes.discard(node_id)


def _spared(ctx: EngineContext, now: float, lapsed: list[str]) -> list[str]:
    """The lapsed nodes whose lease really ran out: after a restart (or a disruption:
    :func:`stream_closed`), a node still expected back is spared for
    :data:`RESTART_GRACE_LEASES` leases, and longer while others keep coming back (the last
    of them within a lease).

    500 nodes returning at once queue their Register and Hello on Orchestrate's one loop, a
    few dozen milliseconds each, behind Orchestrate's own start (its first passes, its first
    requests): the last ones' turn comes long after one lease, and failing their jobs for
    Orchestrate's own queue would lose a cluster's running work to every restart. As Slurm
    gives nodes its SlurmdTimeout after slurmctld restarts, the nodes get a grace, and the
    wait is measured against the wave: each returning node extends it once at most (it
    leaves the set on its Hello), and a lease after the last one came back (the grace
    spent), whoever did not lapses as usual.
    """
    returning = ctx.returning
    if not returning.nodes:
        return lapsed
    if now >= returning.until:
        returning.nodes.clear()  # the wave is over
        return lapsed
    return [node_id for node_id in lapsed if node_id not in returning.nodes]


def extend_leases(ctx: EngineContext, session: Session, seconds: float) -> None:
    """Push every live node's lease ``seconds`` further."""
    for node in session.scalars(select(Node).where(Node.status == READY)):
        node.lease_expires_at += seconds
        ctx.stored_leases[node.id] = node.lease_expires_at
    for node_id in ctx.leases:
        ctx.leases[node_id] += seconds
    for node_id in ctx.stream_graces:
        ctx.stream_graces[node_id] += seconds  # the stall was Orchestrate's, not the node's
    ctx.graces_held += seconds


def renew(ctx: EngineContext, tx: Transaction, node: Node) -> None:
    """The node was heard from: renew its lease (it is back if it was offline)."""
    node.last_seen = tx.now
    node.lease_expires_at = tx.now + lease_of(ctx, node.id)
    if node.status == OFFLINE:
        node.status = READY
        refresh(ctx, tx, node)
        events.record(tx, EventKind.NODE_ONLINE, f"node {node.name} is back", node_id=node.id)
    _track_lease(ctx, node)


def heartbeat(ctx: EngineContext, node_id: str) -> bool:
    """Renew a READY node's lease in memory, for a heartbeat or any other message from it (no
    query: a busy node's every report passes here); False when the node is not READY here,
    and a heartbeat must go through the pass (:func:`renew`: an offline node comes back)."""
    if node_id not in ctx.leases:
        return False
    until = ctx.leases[node_id] = ctx.clock() + lease_of(ctx, node_id)
    if until < ctx.first_lapse:
        ctx.first_lapse = until  # below a lease extended past it (extend_leases)
    return True


def _track_lease(ctx: EngineContext, node: Node) -> None:
    """Keep :attr:`EngineContext.leases` to the READY nodes, as the row now says."""
    if node.status == READY:
        until = ctx.leases[node.id] = max(node.lease_expires_at, ctx.leases.get(node.id, 0.0))
        ctx.stored_leases[node.id] = node.lease_expires_at
        ctx.first_lapse = min(ctx.first_lapse, until)
    else:
        ctx.leases.pop(node.id, None)
        ctx.stored_leases.pop(node.id, None)
        ctx.stream_graces.pop(node.id, None)


#: How often, as a share of the configured lease, a pass looks for lease rows to write: the
#: scan of every lease and its statement cost an idle pass at 5,000 nodes most of its CPU
#: once fair share kept its totals; a row is written a lease behind either way.
PERSIST_EVERY = 1 / 3


def persist_leases(ctx: EngineContext, tx: Transaction) -> None:
    """Write the leases renewed in memory to their rows, once a row is a whole lease behind:
    one statement for all of them. The rows matter only after a restart (which grants every
    READY node a full lease anyway) and for ``last_seen``, which the node views read from
    memory (:func:`last_seen`)."""
    # a look every PERSIST_EVERY of the configured lease, not every pass: a row then falls
    # at most that much more behind, and the rows due meanwhile go in one statement
    if tx.now - ctx.leases_persisted_at < ctx.lease_seconds * PERSIST_EVERY:
        return
    ctx.leases_persisted_at = tx.now
    # bound methods and the named lease without a call of lease_of per node (1.4 -> 0.4 ms
    # at 5,000 nodes); the threshold only sets how often a row is written
    stored, named, configured = ctx.stored_leases.get, ctx.node_leases.get, ctx.lease_seconds
    behind = {
        node_id: until
        for node_id, until in ctx.leases.items()
        if until - stored(node_id, 0.0) >= named(node_id, configured)
    }
    if not behind:
        return
    tx.session.execute(
        update(Node),
        [
            {
                "id": node_id,
                "lease_expires_at": until,
                "last_seen": until - lease_of(ctx, node_id),
            }
            for node_id, until in behind.items()
        ],
    )
    ctx.stored_leases.update(behind)


def live_runs_on(session: Session, node_id: str) -> list[Run]:
    """Runs holding the node, including multinode runs whose part here has ended."""
    # the database narrows the live runs to those naming the node (its id appears in their
    # node_ids' JSON text) instead of this process loading every live run: a reconnecting
    # node's Hello costs its own runs, not the cluster's (10,000 running jobs, 1,000 nodes
    # reconnecting after a restart); the exact test stays below
    named = cast(Run.node_ids, String).contains(f'"{node_id}"', autoescape=True)
    live = session.scalars(select(Run).where(Run.status.in_(LIVE_RUN), named))
    return [run for run in live if node_id in run.node_ids]


def _placed_run_ids(ctx: EngineContext, node_id: str) -> list[int]:
    """The runs the scheduler holds on the node (every live run is allocated there, from
    placement or from the rebuild at start-up)."""
    try:
        job_ids = ctx.scheduler.node_usage(node_id).job_ids
    except NotFound:
        return []
    return [int(key.removeprefix("run-")) for key in job_ids if key.startswith("run-")]


def _runs(tx: Transaction, run_ids: Iterable[int], preloaded: Preloaded | None) -> list[Run]:
    """The rows of these runs that exist: from ``preloaded`` where it has them, the rest in
    one query."""
    wanted = set(run_ids)
    found = []
    if preloaded is not None:
        found = [preloaded.runs[run_id] for run_id in wanted & preloaded.runs.keys()]
        wanted -= preloaded.asked  # asked for, and not there: no such run
    if wanted:
        found.extend(tx.session.scalars(select(Run).where(Run.id.in_(wanted))))
    return found


def _running_parts_placed(
    ctx: EngineContext, tx: Transaction, node_id: str, preloaded: Preloaded | None = None
) -> list[Run]:
    """:func:`running_parts_on`, looked up by the runs the scheduler holds on the node: a few
    primary-key reads (or none, ``preloaded``) instead of a scan of every live run, which
    made 500 nodes returning to a restarted Orchestrate with 10,000 running jobs take longer
    than their lease."""
    return [
        run
        for run in _runs(tx, _placed_run_ids(ctx, node_id), preloaded)
        if run.status in LIVE_RUN
        and node_id in run.node_ids
        and node_id not in (run.parts_done or ())
    ]


@dataclass
class Preloaded:
    """The rows a batch of Registers and Hellos reads, each kind in one query for the whole
    batch (:func:`preload`) instead of one per node: hundreds of nodes return to a restarted
    Orchestrate at once, and each query is a round trip the event loop waits on.

    The rows are the batch session's own objects, so what one node's arrival changes (a run
    it failed, a node it created) the next one in the batch sees."""

    #: the registering nodes' rows by name (a name without a row is a new node)
    by_name: dict[str, Node]
    #: the registering nodes' holds, by node id, each list taken by the first Register of
    #: its node (:meth:`holds_of`): a second one may follow a change to them
    holds: dict[str, list[NodeHold]]
    #: the rows of the runs the Hellos' nodes hold or know, by id
    runs: dict[int, Run]
    #: the run ids the batch read: one of them absent from :attr:`runs` does not exist
    asked: set[int] = field(default_factory=set)
    #: the volumes whose removal a node has yet to answer (told again to each Hello's node)
    deleting: list[Volume] = field(default_factory=list)
    #: the status of each workflow the Hellos' nodes keep directories of that exists here
    #: (None: not read)
    workflow_statuses: dict[str, str] | None = None

    def holds_of(self, name: str) -> list[NodeHold] | None:
        """The holds of the node registering as ``name``, as the batch read them: once, and
        none for a new node; None when they must be read again."""
        node = self.by_name.get(name)
        if node is None:
            return []  # no row: a new node
        return self.holds.pop(node.id, None)


def preload(
    ctx: EngineContext,
    tx: Transaction,
    names: Iterable[str],
    hellos: Iterable[tuple[str, set[int]]],
    kept_workflows: Iterable[str] = (),
) -> Preloaded:
    """Read what the Registers of ``names`` and the Hellos of ``hellos`` (node id, the runs
    it knows) will need, in five queries: their nodes, the registering nodes' holds, the
    runs the Hellos' nodes hold or know, the volumes being removed, and the statuses of the
    workflows the Hellos' nodes keep directories of (``kept_workflows``; none read when
    there are none). The rows are kept referenced by ``tx``."""
    names = set(names)
    hellos = list(hellos)
    ids = {node_id for node_id, _ in hellos}
    found = (
        list(tx.session.scalars(select(Node).where(or_(Node.name.in_(names), Node.id.in_(ids)))))
        if names or ids
        else []
    )
    tx.loaded.extend(found)
    by_name = {node.name: node for node in found if node.name in names}
    # a Register tells the scheduler the node's holds; a Hello does not (it has them)
    node_holds = (
        holds_by_node(tx.session, [node.id for node in by_name.values()]) if by_name else {}
    )
    for node in by_name.values():
        node_holds.setdefault(node.id, [])  # read, and none
    run_ids = set()
    for node_id, known in hellos:
        run_ids.update(_placed_run_ids(ctx, node_id))
        run_ids.update(known)
    runs = {}
    if run_ids:
        runs = {run.id: run for run in tx.session.scalars(select(Run).where(Run.id.in_(run_ids)))}
        tx.loaded.extend(runs.values())
    return Preloaded(
        by_name=by_name,
        holds=node_holds,
        runs=runs,
        asked=run_ids,
        deleting=volume_removal.deleting(tx) if hellos else [],
        workflow_statuses=workflow_ends.statuses(tx.session, kept_workflows),
    )


def running_parts_on(session: Session, node_id: str) -> list[Run]:
    """Runs with something still running on the node."""
    return [run for run in live_runs_on(session, node_id) if node_id not in (run.parts_done or ())]


def expire_leases(ctx: EngineContext, tx: Transaction) -> None:
    """Nodes whose lease ran out go offline, and the work running on them fails."""
    if tx.now <= ctx.first_lapse:
        return  # the common pass: no lease can have ended yet, no scan of them
    lapsed = [node_id for node_id, until in ctx.leases.items() if until < tx.now]
    if ctx.stream_graces:
        lapsed.extend(_graces_spent(ctx, tx.now))
    if lapsed:
        lapsed = _spared(ctx, tx.now, lapsed)
    if not lapsed:
        _next_lapse(ctx)
        return  # no query
    expired = list(tx.session.scalars(select(Node).where(Node.id.in_(lapsed))))
    for node_id in set(lapsed) - {node.id for node in expired}:
        ctx.leases.pop(node_id, None)  # gone from the database
        ctx.stream_graces.pop(node_id, None)
    # the live runs and the holds once for every node that lapsed, not once per node: a
    # restart's nodes lapse together when they do (250 nodes, 5,000 runs)
    on_node: dict[str, list[Run]] = {}
    for run in tx.session.scalars(select(Run).where(Run.status.in_(LIVE_RUN))):
        for node_id in run.node_ids:
            on_node.setdefault(node_id, []).append(run)
    node_holds = holds_by_node(tx.session, [node.id for node in expired])
    for node in expired:
        if node.status != READY:
            _track_lease(ctx, node)
            continue
        # when it was last heard, as the lease in memory says (the row's may be a lease and
        # a third behind: persist_leases), before the lease is forgotten with its READY
        heard = ctx.leases.get(node.id)
        if heard is not None:
            node.last_seen = max(node.last_seen, heard - lease_of(ctx, node.id))
        node.status = OFFLINE
        _track_lease(ctx, node)
        # the provisioner's holds end with the machine; a site's own holds (admin,
        # monitoring) stay, so a node held for repair comes back still held
        kept = []
        for hold in node_holds.get(node.id, ()):
            if hold.source == HoldSource.PROVISIONER:
                _drop_hold(tx, node, hold, "the node went offline")
            else:
                kept.append(hold)
        refresh(ctx, tx, node, kept)
        events.record(
            tx, EventKind.NODE_OFFLINE, f"node {node.name} stopped responding", node_id=node.id
        )
        for run in on_node.get(node.id, ()):
            if node.id in (run.parts_done or ()):
                continue
            if run.status not in LIVE_RUN:
                continue  # ended by another node's expiry in this pass
            runs.finish_run(
                ctx,
                tx,
                run,
                Status.FAILED,
                f"node {node.name} stopped responding",
                None,
                cause=NODE_CAUSE,
            )
    _next_lapse(ctx)


def _graces_spent(ctx: EngineContext, now: float) -> list[str]:
    """The nodes whose stream closed a grace ago, that have no new stream waiting for its
    Hello to be applied, and whose lease has not ended anyway (those the lease scan already
    found); none while graces are held for a wave of nodes coming back."""
    if now <= ctx.graces_held:
        return []  # nodes whose streams closed are still coming back (_back_within_grace)
    leases, connected = ctx.leases, ctx.hub.connected
    return [
        node_id
        for node_id, deadline in ctx.stream_graces.items()
        if deadline < now and leases.get(node_id, -math.inf) >= now and not connected(node_id)
    ]


def _next_lapse(ctx: EngineContext) -> None:
    """After a scan: the next one when the first lease or stream grace left ends (a spared
    lease, already ended, keeps every pass scanning until its node is back or lapses)."""
    first_grace = min(ctx.stream_graces.values(), default=math.inf)
    ctx.first_lapse = min(
        min(ctx.leases.values(), default=math.inf), max(first_grace, ctx.graces_held)
    )


# -- holds -------------------------------------------------------------------------------------


def holds(session: Session, node_id: str) -> list[NodeHold]:
    """The node's holds, oldest first."""
    return list(
        session.scalars(select(NodeHold).where(NodeHold.node_id == node_id).order_by(NodeHold.id))
    )


def holds_by_node(
    session: Session, node_ids: Sequence[str] | None = None
) -> dict[str, list[NodeHold]]:
    """The holds of these nodes (every node's when None), oldest first: one query."""
    query = select(NodeHold).order_by(NodeHold.id)
    if node_ids is not None:
        query = query.where(NodeHold.node_id.in_(node_ids))
    by_node: dict[str, list[NodeHold]] = {}
    for hold in session.scalars(query):
        by_node.setdefault(hold.node_id, []).append(hold)
    return by_node


def refresh(
    ctx: EngineContext, tx: Transaction, node: Node, node_holds: Sequence[NodeHold] | None = None
) -> None:
    """Tell the scheduler the node's readiness and holds as the database has them
    (``node_holds`` when the caller has read them)."""
    ctx.scheduler.upsert_node(
        node_info(
            node,
            ready=node.status == READY,
            holds=holds(tx.session, node.id) if node_holds is None else node_holds,
            device_plugin_failed=ctx.device_plugin_failed.get(node.id, False),
        )
    )


def find(session: Session, reference: str) -> Node:
    """A node by id or name; ``NotFound`` otherwise."""
    node = (
        session.get(Node, reference)
        or session.scalars(select(Node).where(Node.name == reference)).first()
    )
    if node is None:
        raise NotFound(f"node {reference} not found")
    return node


def add_hold(
    ctx: EngineContext, tx: Transaction, node_ref: str, hold: Hold, reason: str, placed_by: str
) -> int:
    """Place a hold; ``evict`` also takes running work off. Return the hold's id. A
    ``deprovision`` hold on a node holding node-local persistent volumes is refused naming
    them (tearing the node down would lose their only copy)."""
    node = find(tx.session, node_ref)
    if hold.effect is HoldEffect.DEPROVISION:
        _refuse_if_holding_volumes(tx.session, node, "deprovision")
    row = NodeHold(
        node_id=node.id,
        effect=hold.effect.value,
        source=hold.source.value,
        reason=reason,
        placed_by=placed_by,
        placed_at=tx.now,
    )
    tx.session.add(row)
    tx.session.flush()
    refresh(ctx, tx, node)
    events.record(
        tx,
        EventKind.NODE_HOLD_ADDED,
        f"{hold.effect.value} hold placed on {node.name} by {placed_by}"
        f" ({hold.source.value}): {reason or 'no reason given'}",
        node_id=node.id,
        hold_id=row.id,
        effect=hold.effect.value,
        source=hold.source.value,
        reason=reason,
    )
    if hold.effect is HoldEffect.EVICT:
        _evict(ctx, tx, node, reason or "evicted by an administrator")
    return row.id


def release_holds(
    ctx: EngineContext,
    tx: Transaction,
    node_ref: str,
    *,
    hold_id: int | None = None,
    effect: str | None = None,
    source: str | None = None,
    released_by: str = "",
) -> int:
    """Release the node's holds that match every given filter; return how many."""
    node = find(tx.session, node_ref)
    released = 0
    for hold in holds(tx.session, node.id):
        if hold_id is not None and hold.id != hold_id:
            continue
        if effect is not None and hold.effect != effect:
            continue
        if source is not None and hold.source != source:
            continue
        _drop_hold(tx, node, hold, f"released by {released_by or 'an operator'}")
        released += 1
    if hold_id is not None and not released:
        raise NotFound(f"node {node.name} has no hold {hold_id}")
    refresh(ctx, tx, node)
    return released


def _drop_hold(tx: Transaction, node: Node, hold: NodeHold, why: str) -> None:
    tx.session.delete(hold)
    events.record(
        tx,
        EventKind.NODE_HOLD_RELEASED,
        f"{hold.effect} hold on {node.name} ({hold.source}: {hold.reason}) {why}",
        node_id=node.id,
        hold_id=hold.id,
        effect=hold.effect,
        source=hold.source,
    )


def _evict(ctx: EngineContext, tx: Transaction, node: Node, reason: str) -> None:
    for run in running_parts_on(tx.session, node.id):
        tx.send(run.node_ids, Cancel(run.id, f"evicted: {reason}"))
        stage = tx.session.get(Stage, run.stage_id)
        events.record(
            tx,
            EventKind.EVICTED,
            f"{stage.name if stage else '?'}{task_label(run)} evicted from {node.name}: {reason}",
            workflow_id=run.workflow_id,
            stage_name=stage.name if stage else None,
            node_id=node.id,
            task_id=run.task_id,
        )
        runs.finish_run(
            ctx,
            tx,
            run,
            Status.FAILED,
            f"evicted from node {node.name}: {reason}",
            None,
            cause=NODE_CAUSE,
        )


def deprovision_empty_nodes(ctx: EngineContext, tx: Transaction) -> bool:
    """Nodes under a deprovision hold that no longer hold work are told to shut down;
    whether any READY node is left under one (still holding work: the next passes look
    again)."""
    held_ids = select(NodeHold.node_id).where(NodeHold.effect == HoldEffect.DEPROVISION.value)
    held = tx.session.scalars(select(Node).where(Node.id.in_(held_ids), Node.status == READY))
    left = False
    for node in held:
        # a node holding the only copy of a node-local volume stays up (the hold was placed
        # before a job first used the volume there): deleting the volume lets it go
        if live_runs_on(tx.session, node.id) or volumes.held_on(tx.session, node.id):
            left = True
            continue
        node.status = DEPROVISIONED
        _track_lease(ctx, node)
        refresh(ctx, tx, node)
        tx.send([node.id], Shutdown("deprovisioned: the node is empty"))
        events.record(
            tx,
            EventKind.NODE_DEPROVISIONED,
            f"node {node.name} is empty and was torn down",
            node_id=node.id,
        )
    return left


def remove(ctx: EngineContext, tx: Transaction, node_ref: str) -> None:
    """Forget a node that is no longer up (offline or deprovisioned), with its holds;
    refused while it holds node-local persistent volumes (naming them)."""
    node = find(tx.session, node_ref)
    if node.status == READY:
        raise FailedPrecondition(
            f"node {node.name} is still up: only offline or deprovisioned nodes can"
            " be removed (deprovision it first)"
        )
    if live_runs_on(tx.session, node.id):
        raise FailedPrecondition(f"node {node.name} still has work recorded on it")
    _refuse_if_holding_volumes(tx.session, node, "remove")
    for hold in holds(tx.session, node.id):
        _drop_hold(tx, node, hold, "with the node's record")
    tx.session.flush()  # the holds go before the node row they point to
    with contextlib.suppress(NotFound):
        ctx.scheduler.remove_node(node.id)
    events.record(tx, EventKind.NODE_REMOVED, f"node {node.name} was removed", node_id=node.id)
    tx.session.delete(node)
    ctx.node_names.pop(node.id, None)
    ctx.node_addresses.pop(node.id, None)


def _refuse_if_holding_volumes(session: Session, node: Node, doing: str) -> None:
    held = volumes.held_on(session, node.id)
    if held:
        raise FailedPrecondition(volumes.holding_refusal(session, node.name, held, doing))


def hold_of(row: NodeHold) -> Hold:
    """The scheduler's view of a hold row."""
    return Hold(
        HoldEffect(row.effect), HoldSource(row.source), row.reason, row.placed_by, row.placed_at
    )


def node_info(
    node: Node,
    *,
    ready: bool,
    holds: Iterable[NodeHold] = (),
    device_plugin_failed: bool = False,
) -> NodeInfo:
    """The scheduler's view of a node row."""
    return NodeInfo(
        id=node.id,
        capacity=Resources(node.cores, node.memory, dict(node.devices or {})),
        # every node carries its own id, so a job can be pinned to one (its volumes')
        annotations={**dict(node.annotations or {}), NODE_ANNOTATION: node.id},
        holds=tuple(hold_of(h) for h in holds),
        ready=ready,
        device_plugin_failed=device_plugin_failed,
        cpu_topology=tuple(CpuCore.from_dict(core) for core in node.cpu_topology or ()),
    )
