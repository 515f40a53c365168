"""The workflow engine: the coordinator of Orchestrate's passes.

All state lives in the database; the engine keeps only what it can rebuild from the rows
(:mod:`~fuzzball_core.orchestrate.recovery`): the scheduler's view of nodes and running work,
the runs waiting for placement, and parsed plans. It runs on Orchestrate's event loop thread.
Every pass (:meth:`Engine.step`) is one transaction that applies what nodes reported
(:mod:`~fuzzball_core.orchestrate.node_reports`), expires leases and empties deprovisioned
nodes (:mod:`~fuzzball_core.orchestrate.nodes`), advances the workflows whose stages changed
(:mod:`~fuzzball_core.orchestrate.progress`) and places waiting runs
(:mod:`~fuzzball_core.orchestrate.placement`); messages to nodes and event hooks go out only
after that transaction commits, so a node never sees work the database does not hold.

A pass that fails changes nothing: its transaction rolls back, the node reports it took go
back to the inbox, and the in-memory view is rebuilt from the database, so the next pass
does the same work again. Workflow, stage and run statuses move only through
:func:`~fuzzball_core.orchestrate.states.transition`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.backoff import Backoff
from fuzzball_core.errors import FailedPrecondition, FuzzballError, NotFound
from fuzzball_core.health import Health, keep_running
from fuzzball_core.orchestrate import (
    endpoints,
    node_arrivals,
    node_reports,
    nodes,
    placement,
    progress,
    recovery,
    submission,
)
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.events import EventHook
from fuzzball_core.orchestrate.image_stages import ImageStages
from fuzzball_core.orchestrate.node_hub import NodeHub
from fuzzball_core.orchestrate.pass_timings import PassTimings
from fuzzball_core.orchestrate.submission import PreparedSubmission
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.orchestrate.turn_batches import TurnBatches
from fuzzball_core.scheduling import (
    CpuCore,
    Diagnosis,
    Hold,
    HoldEffect,
    HoldSource,
    Resources,
    Scheduler,
)
from fuzzball_core.service.views import Principal
from fuzzball_core.spec import ParsedWorkflow, Plan
from fuzzball_core.spec.models import Retry
from fuzzball_core.store import database
from fuzzball_core.store.database import BUSY_RETRY
from fuzzball_core.store.models import Node, Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES

__all__ = ["Engine", "PreparedSubmission"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long the loop waits after a failed pass before the next: a database that is briefly
#: locked is retried soon, one that is down is not hammered.
PASS_RETRY = Backoff(initial=0.25, factor=2.0, maximum=8.0)
#: The engine loop's health condition: it holds while passes pass.
LOOP = "engine"
#: Passes that may fail while applying one node report before it is dropped: a report whose
#: application always raises would otherwise stall every workflow for good.
MAX_REPORT_REPLAYS = 3
#: Reports nothing waits on: a run's start and its output. They do not wake the engine at
#: once but at most :data:`LAZY_REPORT_DELAY` later, so that they share the pass of the
#: report that follows them (a short job's exit, the next start) instead of costing a pass
#: each; an exit, a service's readiness, a fence or a submission still wakes it at once.
LAZY_REPORTS = frozenset({"started", "log"})
#: The longest a lazy report waits for a pass (seconds): how much later than its node said
#: so a run shows STARTED, its output is stored, or a service without a readiness probe
#: releases its dependents.
LAZY_REPORT_DELAY = 0.02
#: How long a pass of the loop goes on applying node reports before it leaves the rest to
#: the next pass (seconds; ``orchestrate.pass-budget``): the REST gateway, the node streams
#: and the other servers share the pass's loop and wait for it, while a longer pass writes
#: more reports per round trip to the store. The next pass follows once the loop has
#: served what was waiting (Slurm's scheduler likewise yields to its RPCs).
PASS_BUDGET = 0.1
#: Reports applied between two looks at the budget (one preload's reads each: the
#: ``output_received`` and usage rows of the chunk's runs, a round trip each to the store,
#: which under load cost more of a pass's wall than applying the chunk; 128 reports are
#: about 20 ms of the loop's CPU on an idle core)
REPORT_CHUNK = 128
#: How long the loop serves others after a pass its budget cut short, before the next
#: (seconds): a request needs the loop two or three times, and would otherwise wait out a
#: pass each time
BETWEEN_PASSES = 0.005
#: A backlog: at least this many runs left waiting for placement (a burst of submissions, or
#: an array, that outgrows the cluster). Each pass pays for the waiting queue whatever it
#: places (the blocked-stage walk asks every waiting run's reason, the scheduler passes over
#: the queue), so with a backlog the next pass waits for :data:`BACKLOG_PASS_GAP`.
BACKLOG_RUNS = 100
#: How long the loop serves others (the node streams' reads, the submissions' turns) after a
#: pass that left a backlog, before the next pass (seconds): the reports of that while are
#: applied and their freed cores filled by one pass. Under 2,000 separate workflows passes
#: went from 7-8 jobs each to 15-20 and Orchestrate's CPU a workflow down by a fifth (the
#: agents' too: fewer, fuller assignment batches). A run in a backlog waits passes anyway;
#: with fewer runs waiting the next pass follows at once, so a lone workflow's latency is
#: unchanged.
BACKLOG_PASS_GAP = 0.01
#: The most submissions one transaction stores (:meth:`Engine.submit_async`); the rest wait
#: for the loop's next turn. Storing one costs about a millisecond of the loop.
MAX_SUBMISSIONS = 64


def pause_before_pass(*, cut_short: bool, waiting: int, since_last: float) -> float:
    """How long the engine's loop serves others before its next pass (seconds):
    :data:`BETWEEN_PASSES` after a pass its budget cut short, what is left of
    :data:`BACKLOG_PASS_GAP` since the last pass ended (``since_last`` seconds ago) while
    ``waiting`` runs are a backlog, else nothing."""
    if cut_short:
        return BETWEEN_PASSES
    if waiting >= BACKLOG_RUNS:
        return max(0.0, BACKLOG_PASS_GAP - since_last)
    return 0.0


@dataclass
class _Report:
    """A node's message waiting for the next pass."""

    node_id: str
    message: node_pb2.NodeMessage
    #: passes that failed while applying it
    failed_passes: int = 0


class Engine:
    """Drives every workflow from submission to its end."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        scheduler: Scheduler,
        hub: NodeHub,
        *,
        lease_seconds: float = 15.0,
        max_eviction_restarts: int = 3,
        default_retry: Retry | None = None,
        event_hook: EventHook | None = None,
        clock: Callable[[], float] = time.time,
        health: Health | None = None,
        pass_budget: float = PASS_BUDGET,
    ) -> None:
        self.context = EngineContext(
            sessions,
            scheduler,
            hub,
            lease_seconds=lease_seconds,
            max_eviction_restarts=max_eviction_restarts,
            default_retry=default_retry,
            event_hook=event_hook,
            clock=clock,
        )
        self._inbox: list[_Report] = []
        self._wake = asyncio.Event()
        #: the timer that wakes the engine for lazy reports (:data:`LAZY_REPORTS`), if set
        self._lazy_wake: asyncio.TimerHandle | None = None
        #: the in-memory view may disagree with the database (a rebuild itself failed)
        self._stale = False
        #: a READY node may be under a deprovision hold: passes look for empty ones
        #: (:func:`nodes.deprovision_empty_nodes`) until none is left
        self._deprovisions_due = True
        #: passes (and loop turns) that raised since the engine was made
        self.failed_passes = 0
        #: how long passes and the scheduler's decisions take (Orchestrate's metrics)
        self.timings = PassTimings()
        #: where the loop's condition (:data:`LOOP`) is shown: Orchestrate's ``/readyz``
        self.health = health or Health("orchestrate")
        self.health.declare(LOOP, "no pass yet")
        self._recovered = False
        self._last_pass = time.monotonic()
        #: when the loop's last pass ended (monotonic seconds)
        self._passed_at = self._last_pass
        #: the budget of the loop's passes (:meth:`step`)
        self.pass_budget = pass_budget
        #: the last pass left reports for the next (its budget spent)
        self._cut_short = False
        #: submissions waiting for the loop's next turn, to be stored together
        self._submissions: TurnBatches[submission.Submission] = TurnBatches(
            self._change,
            self._store_all,
            self._store,
            max_batch=MAX_SUBMISSIONS,
            what="submissions",
        )

    # -- what the rest of Orchestrate reads ------------------------------------------------------

    @property
    def sessions(self) -> sessionmaker[Session]:
        """The database's session factory."""
        return self.context.sessions

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler driver placing runs."""
        return self.context.scheduler

    @property
    def lease_seconds(self) -> float:
        """How long a node's lease lasts without a heartbeat."""
        return self.context.lease_seconds

    @lease_seconds.setter
    def lease_seconds(self, value: float) -> None:
        self.context.lease_seconds = value

    @property
    def images(self) -> ImageStages:
        """Image stages (off until ``configure_images`` sets them)."""
        return self.context.plans.images

    @images.setter
    def images(self, value: ImageStages) -> None:
        self.context.plans.images = value

    def wake(self) -> None:
        """Ask for a pass soon (safe to call many times)."""
        self._wake.set()

    def recover(self) -> None:
        """Rebuild the in-memory state from the database (at start-up; the loop does it
        first unless Orchestrate already did, before its node API served)."""
        recovery.rebuild(self.context, restarted=True)
        self._stale = False
        self._deprovisions_due = True
        self._recovered = True
        self.wake()

    # -- submission ----------------------------------------------------------------------------

    def prepare(self, who: Principal, parsed: ParsedWorkflow) -> PreparedSubmission:
        """Plan a workflow and pin its images (registry round trips); touches no engine
        state, so the transports run it off the event loop."""
        return submission.prepare(self.context, who, parsed)

    def submit(
        self,
        who: Principal,
        parsed: ParsedWorkflow,
        raw_specification: str,
        name: str,
        *,
        prepared: PreparedSubmission | None = None,
    ) -> str:
        """Store a validated workflow and its stages; return its id.

        A job that no registered node could hold even when idle is refused here, naming the
        request and the largest node. ``prepared`` is :meth:`prepare`'s answer when the caller
        already has it.
        """
        submitted = self._submission(who, parsed, raw_specification, name, prepared)
        workflow_id: str = self._change(lambda tx: self._store(tx, submitted))
        return workflow_id

    async def submit_async(
        self,
        who: Principal,
        parsed: ParsedWorkflow,
        raw_specification: str,
        name: str,
        *,
        prepared: PreparedSubmission | None = None,
    ) -> str:
        """:meth:`submit` on the engine's loop, stored in one transaction with the other
        submissions that reach the loop in the same turn (a group commit: thousands of
        workflows submitted at once cost a transaction per batch, not per workflow). Each
        is answered with its own id, or its own refusal."""
        submitted = self._submission(who, parsed, raw_specification, name, prepared)
        workflow_id: str = await self._submissions.add(submitted)
        return workflow_id

    def _submission(
        self,
        who: Principal,
        parsed: ParsedWorkflow,
        raw_specification: str,
        name: str,
        prepared: PreparedSubmission | None,
    ) -> submission.Submission:
        """The workflow to store, once this cluster could run it (refused otherwise)."""
        ready = submission.checked(self.context, who, parsed, prepared)
        return submission.Submission(who, parsed, ready, raw_specification, name)

    def _store_all(self, tx: Transaction, submissions: list[submission.Submission]) -> list[str]:
        """Store ``submissions`` in ``tx``; their workflow ids, in order."""
        workflow_ids = submission.store(tx, submissions)
        for submitted, workflow_id in zip(submissions, workflow_ids, strict=True):
            endpoints.claim(self.context, tx, submitted.who, submitted.parsed, workflow_id)
            tx.after_commit(functools.partial(self._stored, workflow_id, submitted))
        return workflow_ids

    def _store(self, tx: Transaction, submitted: submission.Submission) -> str:
        """Store one submission in ``tx``; its workflow id."""
        return self._store_all(tx, [submitted])[0]

    def _stored(self, workflow_id: str, submitted: submission.Submission) -> None:
        """Once the workflow's transaction committed: keep its plan, and advance it in the
        next pass."""
        ready = submitted.prepared
        self.context.plans.add(workflow_id, submitted.parsed, ready.plan, ready.pins)
        self.context.dirty.add(workflow_id)

    def stop(self, workflow_id: str, reason: str = "stopped by user") -> None:
        """Cancel every stage not yet ended; running containers are told to stop."""

        def stop(tx: Transaction) -> None:
            workflow = tx.session.get(Workflow, workflow_id)
            if workflow is None:
                raise NotFound(f"workflow {workflow_id} not found")
            if workflow.status in TERMINAL_STATUSES:
                raise FailedPrecondition(
                    f"workflow {workflow_id} already ended ({workflow.status})"
                )
            progress.stop(self.context, tx, workflow, reason)

        self._change(stop)

    def plan_of(self, workflow_id: str) -> Plan | None:
        """The plan of a workflow (None if it does not exist)."""
        return self.context.plans.plan_of(workflow_id)

    def waiting_diagnosis(self, stage_id: int) -> Diagnosis | None:
        """Why a stage's first waiting run was not placed in the last pass, if one waits;
        a run the provisioning loop requested a node for says which and when."""
        diagnosis = placement.waiting_diagnosis(self.context, stage_id)
        provisioning = self.context.provisioning
        if diagnosis is None or provisioning is None:
            return diagnosis
        requested = provisioning.waiting_reason(diagnosis.job_id)
        if requested is None:
            return diagnosis
        return dataclasses.replace(diagnosis, message=f"{requested}; {diagnosis.message}")

    def placement_note(self, run_id: int) -> str:
        """Why a live run was placed other than it asked (spread over NVLink domains), or
        empty."""
        return self.context.placement_notes.get(run_id, "")

    # -- nodes ---------------------------------------------------------------------------------

    def register_node(
        self,
        name: str,
        capacity: Resources,
        annotations: dict[str, str],
        *,
        device_plugin_failed: bool = False,
        address: str = "",
        cpu_topology: Sequence[CpuCore] = (),
        version: str | None = None,
        health_disabled: bool = False,
    ) -> str:
        """Record a node (new, or returning under the same name); return its id. A node
        reporting its Substrate ``version`` is cordoned while that is too old
        (:mod:`~fuzzball_core.orchestrate.node_versions`)."""

        registration = node_arrivals.Registration(
            name,
            capacity,
            annotations,
            device_plugin_failed=device_plugin_failed,
            address=address,
            cpu_topology=cpu_topology,
            version=version,
            health_disabled=health_disabled,
        )
        self._deprovisions_due = True  # a node under a deprovision hold may be READY again
        return self._change(lambda tx: node_arrivals.register(self.context, tx, registration))

    def node_hello(
        self, node_id: str, known_run_ids: Iterable[int], kept_workflows: Iterable[str] = ()
    ) -> list[int]:
        """A node (re)connected knowing these runs (and keeping the directories of these
        workflows): reconcile, and return the runs to drop (see
        :func:`~fuzzball_core.orchestrate.nodes.hello`)."""
        known = set(known_run_ids)
        kept = frozenset(kept_workflows)
        self._deprovisions_due = True
        return self._change(
            lambda tx: nodes.hello(self.context, tx, node_id, known, kept_workflows=kept)
        )

    def node_stream_closed(self, node_id: str) -> None:
        """The node's Connect stream ended and no other replaced it: it has a grace to say
        Hello again (see :func:`~fuzzball_core.orchestrate.nodes.stream_closed`)."""
        nodes.stream_closed(self.context, node_id)

    def node_message(self, node_id: str, message: node_pb2.NodeMessage) -> None:
        """Queue a node's message for the next pass; PMI fences of a running multinode run
        are relayed at once (an MPI job's start-up waits on several of them), and a READY
        node's message renews its lease in memory (a heartbeat without waking the engine)."""
        kind = message.WhichOneof("kind")
        # any message renews the lease: the Welcome told the node so (heartbeat_seconds),
        # and a busy node sends no heartbeats
        if nodes.heartbeat(self.context, node_id) and kind == "heartbeat":
            return  # renewed in memory; the pass writes it to the row within a lease
        if kind == "fence":
            relayed = self.context.fences.relay(node_id, message.fence)
            if relayed is not None:
                for target, control in relayed:
                    self.context.hub.send(target, control)
                return
        self._inbox.append(_Report(node_id, message))
        if kind in LAZY_REPORTS:
            self._wake_later()
        else:
            self.wake()

    def _wake_later(self) -> None:
        """Ask for a pass within :data:`LAZY_REPORT_DELAY` (at once off the event loop)."""
        if self._lazy_wake is not None:
            return  # already due: this report joins the same pass
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.wake()  # no loop to time the wait on (a test driving passes by hand)
            return
        self._lazy_wake = loop.call_later(LAZY_REPORT_DELAY, self.wake)

    def extend_leases(self, seconds: float) -> None:
        """Push every live node's lease ``seconds`` further (Orchestrate was stalled)."""
        with self.sessions() as session:
            nodes.extend_leases(self.context, session, seconds)
            session.commit()

    def find_node(self, session: Session, reference: str) -> Node:
        """A node by id or name; ``NotFound`` otherwise."""
        return nodes.find(session, reference)

    def add_hold(self, node_ref: str, effect: str, source: str, reason: str, placed_by: str) -> int:
        """Place a hold; ``evict`` also takes running work off. Return the hold's id."""
        # Hold validates the strings (InvalidArgument naming the choices) and converts them
        hold = Hold(cast(HoldEffect, effect), cast(HoldSource, source), reason, placed_by)
        self._deprovisions_due = True
        return self._change(
            lambda tx: nodes.add_hold(self.context, tx, node_ref, hold, reason, placed_by)
        )

    def release_holds(
        self,
        node_ref: str,
        *,
        hold_id: int | None = None,
        effect: str | None = None,
        source: str | None = None,
        released_by: str = "",
    ) -> int:
        """Release the node's holds that match every given filter; return how many."""
        return self._change(
            lambda tx: nodes.release_holds(
                self.context,
                tx,
                node_ref,
                hold_id=hold_id,
                effect=effect,
                source=source,
                released_by=released_by,
            )
        )

    def remove_node(self, node_ref: str) -> None:
        """Forget a node that is no longer up (offline or deprovisioned), with its holds."""
        self._change(lambda tx: nodes.remove(self.context, tx, node_ref))

    # -- the pass ------------------------------------------------------------------------------

    async def run(self, *, tick: float = 1.0) -> None:
        """Pass after pass until cancelled: on every wake-up, and at least every ``tick``.

        Nothing that goes wrong in one turn ends the loop (:func:`~fuzzball_core.health.
        keep_running`): it is logged with its traceback, counted in :attr:`failed_passes`,
        shown as the failing :data:`LOOP` condition, and the loop waits out
        :data:`PASS_RETRY` before the next turn (which starts from a view rebuilt from the
        database).
        """

        def count(_error: BaseException) -> None:
            self.failed_passes += 1

        await keep_running(
            LOOP,
            lambda: self._turn(tick),
            health=self.health,
            retry=PASS_RETRY,
            logger=log,
            on_failure=count,
        )

    async def _turn(self, tick: float) -> None:
        """One turn of :meth:`run`: recover once, wait for work, make up for a stall, pass."""
        if not self._recovered:
            self.recover()
            self._recovered = True
            self._last_pass = time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=tick)
        # One turn of the loop first: node messages already read off the streams join this
        # pass (one transaction for all of them) instead of waking one pass each. After a
        # pass cut short, or one that left a backlog, a few milliseconds of the loop's turns.
        await asyncio.sleep(
            pause_before_pass(
                cut_short=self._cut_short,
                waiting=len(self.context.pending),
                since_last=time.monotonic() - self._passed_at,
            )
        )
        # submissions waiting for their turn are stored now, so that this pass advances
        # them: a pass between a submission and its batch cost it a pass's wait
        self._submissions.apply_waiting()
        self._wake.clear()
        if self._lazy_wake is not None:
            # this pass takes every lazy report queued so far: their timer has nothing left
            self._lazy_wake.cancel()
            self._lazy_wake = None
        stalled = time.monotonic() - self._last_pass - tick
        if stalled > self.lease_seconds / 3:
            # Orchestrate's own loop was held up (a slow request, a long pause, a failing
            # pass): the heartbeats that arrived meanwhile are still queued, so nodes get the
            # lost time back instead of losing their leases and their jobs.
            self.extend_leases(stalled)
        self._last_pass = time.monotonic()
        try:
            self.step(self.pass_budget)
        finally:
            self._passed_at = time.monotonic()

    def step(self, budget: float = math.inf) -> None:
        """One pass: node reports, lease expiry, readiness, scheduling; one transaction.

        Past ``budget`` seconds (the loop's passes: :attr:`pass_budget`) it stops applying
        reports after the current chunk of them; the rest wait for the next pass, which is
        woken. When it raises, nothing of it happened: the reports it took are back in the
        inbox and the scheduler's view matches the database again.
        """
        started = time.perf_counter()
        self._cut_short = False
        if self._stale:
            recovery.rebuild(self.context)
            self._stale = False
        ctx = self.context
        reports, self._inbox = self._inbox, []
        applying: _Report | None = None
        tx = ctx.transaction()
        try:
            with tx.session:
                deadline = started + budget
                applied = 0
                while applied < len(reports):
                    chunk = reports[applied : applied + REPORT_CHUNK]
                    node_reports.preload(ctx, tx, ((r.node_id, r.message) for r in chunk))
                    for applying in chunk:
                        node_reports.apply(ctx, tx, applying.node_id, applying.message)
                    applied += len(chunk)
                    if time.perf_counter() > deadline:
                        break
                applying = None
                if applied < len(reports):
                    # the rest wait for the next pass, ahead of what arrives meanwhile
                    self._inbox[:0] = reports[applied:]
                    del reports[applied:]
                    self._cut_short = True
                    self.wake()
                placement.fill_task_windows(ctx, tx)
                nodes.persist_leases(ctx, tx)
                nodes.expire_leases(ctx, tx)
                self._deprovision_empty_nodes(tx, reports)
                while ctx.dirty:
                    dirty, ctx.dirty = ctx.dirty, set()
                    tx.load_workflows(dirty)  # with their stages, one query for all
                    for workflow_id in dirty:
                        progress.advance(ctx, tx, workflow_id)
                with self.timings.deciding():
                    placement.schedule(ctx, tx)
                tx.commit()
        except Exception as exc:
            # a busy or full store is nobody's report's fault: only a report whose own
            # application raised counts towards dropping it
            if applying is not None and not database.is_store_failure(exc):
                applying.failed_passes += 1
            self._put_back(reports)
            ctx.told.undo()
            self._resync()
            raise
        ctx.told.settle()
        ctx.publish(tx)
        self.timings.passes.add(time.perf_counter() - started)

    def _deprovision_empty_nodes(self, tx: Transaction, reports: list[_Report]) -> None:
        """Tear down the empty nodes under a deprovision hold, in the passes that could find
        one: from a hold's placing, or a held node's coming back, until no READY node is
        held (a node's last run may end in any pass while one is), not in every pass."""
        if any(report.message.WhichOneof("kind") == "heartbeat" for report in reports):
            # only a node that is not READY has its heartbeat applied by a pass: it may
            # come back under a deprovision hold
            self._deprovisions_due = True
        if not self._deprovisions_due:
            return
        # the nodes it left READY under the hold (still holding work) are looked at again
        self._deprovisions_due = nodes.deprovision_empty_nodes(self.context, tx)

    def _put_back(self, reports: list[_Report]) -> None:
        """Return a failed pass's reports to the front of the inbox, dropping any whose
        application has now failed :data:`MAX_REPORT_REPLAYS` passes."""
        kept = []
        for report in reports:
            if report.failed_passes < MAX_REPORT_REPLAYS:
                kept.append(report)
            else:
                log.error(
                    "dropping node %s's report after %d failed passes: %s",
                    report.node_id,
                    report.failed_passes,
                    report.message,
                )
        self._inbox[:0] = kept

    def _resync(self) -> None:
        """Rebuild the in-memory view after failed work; if even that fails, the next pass
        rebuilds before anything else."""
        self._stale = True
        self._deprovisions_due = True
        try:
            recovery.rebuild(self.context)
        except Exception:
            log.exception("rebuilding the engine's view from the database failed")
            return
        self._stale = False
        self.wake()

    def change(self, work: Callable[[Transaction], T]) -> T:
        """Run ``work`` as one transaction outside the pass (for the engine's helpers on
        its loop, such as the endpoint keeper), as the engine's own changes do."""
        # a helper's change may place a hold (monitoring alerts) or bring back a node (the
        # provisioner): the next pass looks for empty nodes to deprovision
        self._deprovisions_due = True
        return self._change(work)

    def arrivals_change(self, work: Callable[[Transaction], T]) -> T:
        """Run a batch of nodes' Registers and Hellos
        (:class:`~fuzzball_core.orchestrate.node_arrivals.Arrivals`) as :meth:`change` does,
        re-arming the passes' look for empty nodes to deprovision only when a node became
        READY in it (one that was READY already was looked at while it was: the look stops
        only once no READY node is under a deprovision hold). A flap's or a restart's
        returning nodes are READY all along, and each batch made the next pass read the holds
        again: two queries a batch, 15 % of the engine thread while 1,000 nodes came back."""
        # arrivals only ever make nodes READY (a Register, a Hello renewing an OFFLINE node),
        # never take one off the leases, so more leases means a node came (back)
        ready = len(self.context.leases)
        answer = self._change(work)
        if len(self.context.leases) > ready:
            self._deprovisions_due = True
        return answer

    def _change(self, work: Callable[[Transaction], T]) -> T:
        """Run ``work`` as one transaction outside the pass, commit it and send what it
        queued; after a failure other than a refusal, rebuild the view like a failed pass.

        A database busy with another writer is tried again (:data:`~fuzzball_core.store.
        database.BUSY_RETRY`, each try from a rebuilt view); a store that stays busy, or a
        full disk, is answered with UNAVAILABLE or RESOURCE_EXHAUSTED naming the data
        directory instead of an internal error.
        """
        ctx = self.context
        delays = BUSY_RETRY.delays()
        while True:
            tx = ctx.transaction()
            try:
                with tx.session:
                    result = work(tx)
                    placement.fill_task_windows(ctx, tx)
                    tx.commit()
            except FuzzballError:
                ctx.told.undo()
                raise  # refused (not found, not allowed now) before anything changed
            except Exception as exc:
                ctx.told.undo()
                self._resync()
                delay = next(delays, None) if database.is_busy(exc) else None
                if delay is not None:
                    log.warning("the database is busy (%s); trying again", exc)
                    time.sleep(delay)
                    continue
                answer = database.storage_error(exc, ctx.sessions.kw["bind"])
                if answer is not None:
                    log.error("a change failed in the store: %s", exc)
                    raise answer from exc
                raise
            break
        ctx.told.settle()
        ctx.publish(tx)
        self.wake()
        return result
