"""The workflow engine: stages move PENDING -> STARTED -> FINISHED | FAILED | CANCELED.

All state lives in the database; the engine keeps only what it can rebuild from the rows
(:meth:`Engine.recover`): the scheduler's view of nodes and running work, the runs waiting
for placement, and parsed plans. It runs on Orchestrate's event loop thread. Every pass
(:meth:`Engine.step`) is one transaction that applies what nodes reported, advances the
workflows whose stages changed, and schedules waiting runs; messages to nodes and event
hooks go out only after that transaction commits, so a node never sees work the database
does not hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.drivers import ResolvedImage
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound
from fuzzball_core.orchestrate import image_stages
from fuzzball_core.orchestrate.capabilities import (
    unlaunchable_ranks,
    unsupported_probes,
    unsupported_transfers,
)
from fuzzball_core.orchestrate.fences import FenceRelay
from fuzzball_core.orchestrate.image_stages import ImageStages
from fuzzball_core.orchestrate.node_hub import NodeHub
from fuzzball_core.orchestrate.node_lifecycle import NodeLifecycle, node_info
from fuzzball_core.orchestrate.requests import (
    job_payload,
    job_request,
    run_key,
    timeout_seconds,
    volume_ingress_json,
)
from fuzzball_core.orchestrate.retries import NODE as NODE_CAUSE
from fuzzball_core.orchestrate.retries import RetryDecision, decide, retry_rule
from fuzzball_core.orchestrate.transaction import (
    ASSIGNED,
    LIVE_RUN,
    READY,
    Transaction,
    task_label,
)
from fuzzball_core.scheduling import (
    Diagnosis,
    JobRequest,
    Scheduler,
)
from fuzzball_core.service.views import (
    CANCELED,
    FAILED,
    FINISHED,
    PENDING,
    STARTED,
    TERMINAL,
    Principal,
)
from fuzzball_core.spec import (
    Condition,
    ImagePull,
    Job,
    ParsedWorkflow,
    Plan,
    Service,
    StageKind,
    parse_workflow,
    plan_workflow,
)
from fuzzball_core.spec import Stage as PlanStage
from fuzzball_core.spec.models import ImageBuild, Retry
from fuzzball_core.store.models import (
    Event,
    LogChunk,
    Node,
    Run,
    Stage,
    Workflow,
)

log = logging.getLogger(__name__)

#: Tasks of an array without its own concurrency kept in flight at once: enough to fill
#: any cluster's free slots between passes without materialising a huge array.
DEFAULT_TASK_WINDOW = 512


@dataclass
class PendingRun:
    """A run waiting for placement."""

    run_id: int
    workflow_id: str
    stage_id: int
    request: JobRequest


@dataclass(frozen=True)
class PreparedSubmission:
    """A workflow's plan and the digests its images were pinned to, before it is stored."""

    plan: Plan
    pins: dict[str, ResolvedImage]


@dataclass
class _PlanEntry:
    parsed: ParsedWorkflow
    plan: Plan
    payloads: dict[str, str] = field(default_factory=dict)
    #: digests the pull stages' images were pinned to at submission, by stage id
    pins: dict[str, ResolvedImage] | None = None


class Engine(NodeLifecycle):
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
        event_hook: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions
        self.scheduler = scheduler
        self.hub = hub
        self.lease_seconds = lease_seconds
        self.max_eviction_restarts = max_eviction_restarts
        self.default_retry = default_retry
        self.clock = clock
        self._event_hook = event_hook
        self._pending: dict[str, PendingRun] = {}
        self._fences = FenceRelay()
        #: service stages whose readiness probe passed (nodes report it again after a restart)
        self._ready_stages: set[int] = set()
        self._plans: dict[str, _PlanEntry] = {}
        self._dispatched: set[int] = set()
        self._dirty: set[str] = set()
        self._inbox: list[tuple[str, node_pb2.NodeMessage]] = []
        self._node_names: dict[str, str] = {}
        self._device_plugin_failed: dict[str, bool] = {}
        self._wake = asyncio.Event()
        #: why each waiting run was not placed in the last pass, by run key
        self.diagnoses: dict[str, Diagnosis] = {}
        #: scheduling_blocked causes already reported, by stage id
        self._blocked_reported: dict[int, set[str]] = {}
        #: image stages: off until Orchestrate configures them (see ``configure_images``)
        self.images = ImageStages()

    # -- plans ---------------------------------------------------------------------------------

    def _plan(self, workflow: Workflow) -> _PlanEntry:
        entry = self._plans.get(workflow.id)
        if entry is None:
            parsed = parse_workflow(workflow.definition_v4, source=f"workflow {workflow.id}")
            entry = _PlanEntry(parsed, plan_workflow(parsed, pull_stages=self.images.enabled))
            self._plans[workflow.id] = entry
        return entry

    def plan_of(self, workflow_id: str) -> Plan | None:
        """The plan of a workflow (None if it does not exist)."""
        cached = self._plans.get(workflow_id)
        if cached is not None:
            return cached.plan
        with self.sessions() as session:  # an ended workflow: parse, but keep nothing
            workflow = session.get(Workflow, workflow_id)
            if workflow is None:
                return None
            return plan_workflow(
                parse_workflow(workflow.definition_v4), pull_stages=self.images.enabled
            )

    def _payload(
        self, tx: Transaction, workflow: Workflow, entry: _PlanEntry, stage_name: str
    ) -> str:
        payload = entry.payloads.get(stage_name)
        if payload is None:
            payload = self._new_payload(tx, workflow, entry, entry.plan.stages[stage_name])
            entry.payloads[stage_name] = payload
        return payload

    def _new_payload(
        self, tx: Transaction, workflow: Workflow, entry: _PlanEntry, planned: PlanStage
    ) -> str:
        definition = planned.definition
        if isinstance(definition, ImagePull):
            return self.images.pull_payload(
                definition, self._pins(tx, workflow, entry).get(planned.id), workflow.account_id
            )
        if isinstance(definition, ImageBuild):
            from_digest = self._image_digest(tx, workflow, entry, str(definition.from_.uri))
            return self.images.build_payload(
                planned.name,
                definition,
                workflow.account_id,
                from_digest,
                image_stages.definition_hash(definition, from_digest),
            )
        payload = job_payload(definition, entry.parsed.model.files)
        uri = str(definition.image.uri)
        if self.images.enabled and image_stages.is_object_cache_uri(uri):
            # the node cannot tell whose fuzzball://user/... this is: hand it the digest
            document = json.loads(payload)
            document["image"]["uri"] = image_stages.pinned_uri(
                uri, self._image_digest(tx, workflow, entry, uri)
            )
            payload = json.dumps(document, separators=(",", ":"))
        return payload

    def _pins(
        self, tx: Transaction, workflow: Workflow, entry: _PlanEntry
    ) -> dict[str, ResolvedImage]:
        """The submission's pins (read back from its ``image_resolved`` events after a
        restart)."""
        if entry.pins is None:
            entry.pins = {}
            resolved = tx.session.scalars(
                select(Event).where(
                    Event.workflow_id == workflow.id, Event.kind == "image_resolved"
                )
            )
            for event in resolved:
                data = event.data or {}
                entry.pins[str(event.stage_name)] = ResolvedImage(
                    str(data.get("uri", "")),
                    str(data.get("digest", "")),
                    int(data.get("size", 0)),
                    str(data.get("platform", "")),
                )
        return entry.pins

    def _image_digest(
        self, tx: Transaction, workflow: Workflow, entry: _PlanEntry, uri: str
    ) -> str:
        """The digest ``uri`` is pinned to: its pull stage's, or the object cache's now."""
        pin = self._pins(tx, workflow, entry).get(f"images.{uri}")
        if pin is not None:
            return pin.digest
        if image_stages.is_object_cache_uri(uri):
            with contextlib.suppress(NotFound, InvalidArgument):
                return self.images.resolve(uri, workflow.account_id).digest
        return ""

    def _ingress(self, entry: _PlanEntry, stage_name: str) -> str:
        """The assignment's ``volume_ingress_json`` for a job or service stage."""
        key = f"{stage_name}#ingress"
        if key not in entry.payloads:
            definition = entry.plan.stages[stage_name].definition
            entry.payloads[key] = (
                volume_ingress_json(definition, entry.parsed.model.volumes)
                if isinstance(definition, Job | Service)
                else ""
            )
        return entry.payloads[key]

    def _run_definition(self, entry: _PlanEntry, stage_name: str) -> Any:
        """What the scheduler and the retry rules see of a stage's runs."""
        planned = entry.plan.stages[stage_name]
        if planned.kind is StageKind.IMAGE:
            return image_stages.image_run_definition()
        return planned.definition

    # -- transactions ----------------------------------------------------------------------------

    def _event(
        self,
        tx: Transaction,
        kind: str,
        message: str = "",
        *,
        workflow_id: str | None = None,
        stage_name: str | None = None,
        node_id: str | None = None,
        **data: Any,
    ) -> None:
        tx.session.add(
            Event(
                time=tx.now,
                kind=kind,
                workflow_id=workflow_id,
                stage_name=stage_name,
                node_id=node_id,
                message=message,
                data=data,
            )
        )
        tx.events.append(
            {
                "kind": kind,
                "time": tx.now,
                "workflow_id": workflow_id,
                "stage": stage_name,
                "node_id": node_id,
                "message": message,
                "data": data,
            }
        )

    def _commit(self, tx: Transaction) -> None:
        tx.session.commit()
        for node_id, message in tx.outbox:
            self.hub.send(node_id, message)
        if self._event_hook is not None:
            for event in tx.events:
                try:
                    self._event_hook(event)
                except Exception:  # a plugin's failure must not touch the workflow
                    log.exception("event hook failed for %s", event["kind"])

    def _transaction(self) -> Transaction:
        return Transaction(self.sessions(), self.clock())

    def wake(self) -> None:
        """Ask for a pass soon (safe to call many times)."""
        self._wake.set()

    # -- recovery ------------------------------------------------------------------------------

    def recover(self) -> None:
        """Rebuild the in-memory state from the database (at start-up)."""
        now = self.clock()
        with self.sessions() as session:
            for node in session.scalars(select(Node)):
                self._node_names[node.id] = node.name
                if node.status == READY:
                    # Orchestrate was away, not the nodes: give each a full lease to
                    # reconnect before its work is declared lost
                    node.lease_expires_at = max(node.lease_expires_at, now + self.lease_seconds)
                self.scheduler.upsert_node(
                    node_info(node, ready=node.status == READY, holds=self._holds(session, node.id))
                )
            session.commit()
            live = session.scalars(select(Run).where(Run.status.in_((PENDING, *LIVE_RUN))))
            for run in live:
                self._dispatched.add(run.stage_id)
                workflow = session.get(Workflow, run.workflow_id)
                stage = session.get(Stage, run.stage_id)
                if workflow is None or stage is None:
                    continue
                definition = self._run_definition(self._plan(workflow), stage.name)
                request = job_request(run.id, definition, submitted_at=run.created_at)
                if run.status == PENDING:
                    self._pending[request.id] = PendingRun(
                        run.id, run.workflow_id, run.stage_id, request
                    )
                else:
                    self.scheduler.allocate(request, run.node_ids, started_at=run.started_at)
            for stage_id in session.scalars(select(Run.stage_id).distinct()):
                self._dispatched.add(stage_id)
            active = session.scalars(
                select(Workflow.id).where(Workflow.status.in_((PENDING, STARTED)))
            )
            self._dirty.update(active)
        self.wake()

    # -- submission ----------------------------------------------------------------------------

    def prepare(self, who: Principal, parsed: ParsedWorkflow) -> PreparedSubmission:
        """Plan a workflow and pin its images (registry round trips); touches no engine
        state, so the transports run it off the event loop."""
        plan = plan_workflow(parsed, pull_stages=self.images.enabled)
        return PreparedSubmission(plan, self.images.check_submission(plan, who.account_id))

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
        if prepared is None:
            plan = plan_workflow(parsed, pull_stages=self.images.enabled)
            self._check_feasible(plan)  # before any registry round trip: fail fast
            prepared = PreparedSubmission(plan, self.images.check_submission(plan, who.account_id))
        else:
            self._check_feasible(prepared.plan)
        plan, pins = prepared.plan, prepared.pins
        workflow_id = str(uuid.uuid4())
        tx = self._transaction()
        with tx.session:
            tx.session.add(
                Workflow(
                    id=workflow_id,
                    account_id=who.account_id,
                    name=name,
                    status=STARTED,
                    raw_specification=raw_specification,
                    definition_v4=parsed.to_yaml(),
                    created_at=tx.now,
                    started_at=tx.now,
                )
            )
            tx.session.flush()  # the stages' foreign key needs the workflow row first
            for stage_id in plan.topological_order():
                planned = plan.stages[stage_id]
                tx.session.add(
                    Stage(
                        workflow_id=workflow_id,
                        name=stage_id,
                        kind=planned.kind.value,
                        status=PENDING,
                        task_count=len(planned.tasks) if planned.tasks else None,
                        created_at=tx.now,
                    )
                )
            self._event(tx, "workflow_started", f"workflow {name} started", workflow_id=workflow_id)
            for stage_id, pin in pins.items():
                self._event(
                    tx,
                    "image_resolved",
                    f"{stage_id}: resolved to {pin.digest}"
                    + (f" ({pin.platform})" if pin.platform else ""),
                    workflow_id=workflow_id,
                    stage_name=stage_id,
                    uri=pin.uri,
                    digest=pin.digest,
                    size=pin.size,
                    platform=pin.platform,
                )
            self._commit(tx)
        self._plans[workflow_id] = _PlanEntry(parsed, plan, pins=pins)
        self._dirty.add(workflow_id)
        self.wake()
        return workflow_id

    def _check_feasible(self, plan: Plan) -> None:
        problems = []
        for stage in plan:
            if stage.kind is StageKind.VOLUME:
                problems.extend(unsupported_transfers(stage.id, stage.definition))
            if stage.kind not in (StageKind.JOB, StageKind.SERVICE):
                continue
            if stage.kind is StageKind.SERVICE:
                problems.extend(unsupported_probes(stage.id, stage.definition))
            unlaunchable = unlaunchable_ranks(stage.definition)
            if unlaunchable is not None:
                problems.append((f"{stage.id}.multinode.implementation", unlaunchable))
            if not self._node_names:
                continue  # no node has ever registered: nothing to judge sizes against yet
            diagnosis = self.scheduler.check_feasible(
                job_request(0, stage.definition, submitted_at=0.0)
            )
            if diagnosis is not None:
                problems.append((f"{stage.id}.resource", diagnosis.message))
        if problems:
            raise InvalidArgument(
                "; ".join(f"{path}: {message}" for path, message in problems),
                details=[{"field": p, "description": m} for p, m in problems],
            )

    # -- stopping ------------------------------------------------------------------------------

    def stop(self, workflow_id: str, reason: str = "stopped by user") -> None:
        """Cancel every stage not yet ended; running containers are told to stop."""
        tx = self._transaction()
        with tx.session:
            workflow = tx.session.get(Workflow, workflow_id)
            if workflow is None:
                raise NotFound(f"workflow {workflow_id} not found")
            if workflow.status in TERMINAL:
                raise FailedPrecondition(
                    f"workflow {workflow_id} already ended ({workflow.status})"
                )
            for stage in self._stages(tx.session, workflow_id):
                if stage.status not in TERMINAL:
                    self._end_stage(tx, stage, CANCELED, reason)
            self._cancel_runs(tx, workflow_id, reason)
            self._end_workflow(tx, workflow, CANCELED, reason)
            self._commit(tx)

    def _cancel_runs(
        self, tx: Transaction, workflow_id: str, reason: str, *, stage_id: int | None = None
    ) -> None:
        query = select(Run).where(
            Run.workflow_id == workflow_id, Run.status.in_((PENDING, *LIVE_RUN))
        )
        if stage_id is not None:
            query = query.where(Run.stage_id == stage_id)
        for run in tx.session.scalars(query):
            if run.status == PENDING:
                self._pending.pop(run_key(run.id), None)
                run.status = CANCELED
                run.finished_at = tx.now
                run.message = reason
                continue
            for node_id in run.node_ids:
                tx.outbox.append(
                    (
                        node_id,
                        node_pb2.ControlMessage(
                            cancel=node_pb2.Cancel(run_id=run.id, reason=reason)
                        ),
                    )
                )

    # -- the pass ------------------------------------------------------------------------------

    def node_message(self, node_id: str, message: node_pb2.NodeMessage) -> None:
        """Queue a node's message for the next pass; PMI fences of a running multinode run
        are relayed at once (an MPI job's start-up waits on several of them)."""
        if message.WhichOneof("kind") == "fence":
            relayed = self._fences.relay(node_id, message.fence)
            if relayed is not None:
                for target, control in relayed:
                    self.hub.send(target, control)
                return
        super().node_message(node_id, message)

    async def run(self, *, tick: float = 1.0) -> None:
        """Pass after pass until cancelled: on every wake-up, and at least every ``tick``."""
        self.recover()
        last_pass = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=tick)
            self._wake.clear()
            stalled = time.monotonic() - last_pass - tick
            if stalled > self.lease_seconds / 3:
                # Orchestrate's own loop was held up (a slow request, a long pause): the
                # heartbeats that arrived meanwhile are still queued, so nodes get the lost
                # time back instead of losing their leases and their jobs.
                self.extend_leases(stalled)
            last_pass = time.monotonic()
            try:
                self.step()
            except Exception:
                log.exception("engine pass failed; retrying on the next tick")
                await asyncio.sleep(tick)

    def step(self) -> None:
        """One pass: node reports, lease expiry, readiness, scheduling; one transaction."""
        tx = self._transaction()
        with tx.session:
            inbox, self._inbox = self._inbox, []
            self._preload(tx, inbox)
            for node_id, message in inbox:
                self._apply(tx, node_id, message)
            self._expire_leases(tx)
            self._deprovision_empty_nodes(tx)
            while self._dirty:
                dirty, self._dirty = self._dirty, set()
                for workflow_id in dirty:
                    self._advance(tx, workflow_id)
            self._schedule(tx)
            self._commit(tx)

    def _preload(self, tx: Transaction, inbox: list[tuple[str, node_pb2.NodeMessage]]) -> None:
        """Load every run (and its stage and workflow) the inbox mentions in three queries,
        so applying the messages finds them in the session instead of querying one by one."""
        run_ids = set()
        for _, message in inbox:
            kind = message.WhichOneof("kind")
            if kind in ("started", "exited", "log", "fence", "ready"):
                run_ids.add(getattr(message, kind).run_id)
        self._preload_runs(tx, run_ids)

    def _preload_runs(self, tx: Transaction, run_ids: Iterable[int]) -> None:
        tx.load(Run, run_ids)
        runs = [row for row in tx.loaded if isinstance(row, Run)]
        tx.load(Stage, {run.stage_id for run in runs})
        tx.load(Workflow, {run.workflow_id for run in runs})

    def _apply(self, tx: Transaction, node_id: str, message: node_pb2.NodeMessage) -> None:
        kind = message.WhichOneof("kind")
        if kind == "heartbeat":
            node = tx.session.get(Node, node_id)
            if node is not None:
                self._renew(tx, node)
        elif kind == "started":
            self._run_started(tx, message.started.run_id, message.started.time)
        elif kind == "exited":
            self._run_exited(tx, node_id, message.exited)
        elif kind == "log":
            self._log(tx, message.log)
        elif kind == "ready":
            self._service_ready(tx, message.ready.run_id)
        elif kind == "fence":
            run = tx.session.get(Run, message.fence.run_id)
            if run is not None and run.status in LIVE_RUN:  # after a restart: watch again
                self._fences.watch(run.id, run.node_ids)
                tx.outbox.extend(self._fences.relay(node_id, message.fence) or ())

    def _log(self, tx: Transaction, data: node_pb2.LogData) -> None:
        run = tx.session.get(Run, data.run_id)
        if run is None:
            return
        stage = tx.session.get(Stage, run.stage_id)
        if data.stream == image_stages.PROGRESS_STREAM:
            progress = image_stages.progress_event(stage.name if stage else "?", data.data)
            if progress is not None and stage is not None:
                kind, message, details = progress
                self._event(
                    tx,
                    kind,
                    message,
                    workflow_id=run.workflow_id,
                    stage_name=stage.name,
                    node_id=run.node_ids[0] if run.node_ids else None,
                    **details,
                )
            return
        tx.session.add(
            LogChunk(
                time=tx.now,
                workflow_id=run.workflow_id,
                stage_name=stage.name if stage else "?",
                task_id=run.task_id,
                stream=data.stream or "stdout",
                data=data.data.decode("utf-8", errors="replace"),
            )
        )

    def _run_started(self, tx: Transaction, run_id: int, when: float = 0.0) -> None:
        run = tx.session.get(Run, run_id)
        if run is None or run.status != ASSIGNED:
            return
        run.status = STARTED
        run.started_at = _reported_time(when, tx.now)
        stage = tx.session.get(Stage, run.stage_id)
        if stage is None:
            return
        if stage.task_count is not None:
            stage.tasks_running += 1
        if stage.status == PENDING:
            stage.status = STARTED
            stage.started_at = run.started_at
            stage.node_ids = list(run.node_ids)
            self._dirty.add(run.workflow_id)  # a running service releases its dependents
            names = ", ".join(self._node_names.get(n, n) for n in run.node_ids)
            self._event(
                tx,
                "stage_started",
                f"{stage.name} started on {names}",
                workflow_id=run.workflow_id,
                stage_name=stage.name,
                node_id=run.node_ids[0] if run.node_ids else None,
            )

    def _service_ready(self, tx: Transaction, run_id: int) -> None:
        run = tx.session.get(Run, run_id)
        stage = tx.session.get(Stage, run.stage_id) if run is not None else None
        if run is None or stage is None or run.status not in LIVE_RUN:
            return
        if stage.id in self._ready_stages:
            return  # said again after a reconnect
        self._ready_stages.add(stage.id)
        self._dirty.add(run.workflow_id)
        self._event(
            tx,
            "service_ready",
            f"{stage.name}: readiness probe passed",
            workflow_id=run.workflow_id,
            stage_name=stage.name,
        )

    def _run_exited(self, tx: Transaction, node_id: str, exited: node_pb2.RunExited) -> None:
        run = tx.session.get(Run, exited.run_id)
        if run is None or run.status in TERMINAL:
            return
        if exited.canceled:
            status = CANCELED
        elif exited.exit_code == 0 and not exited.timed_out and not exited.message:
            status = FINISHED
        else:
            status = FAILED
        if status == FINISHED and len(run.node_ids) > 1:
            # a multinode run ends with its last part, or with the first that fails
            done = sorted({*(run.parts_done or ()), node_id} & set(run.node_ids))
            if len(done) < len(run.node_ids):
                run.parts_done = done
                return
        plain_exit = not (exited.timed_out or exited.oom_killed or exited.message or exited.signal)
        cause = str(exited.exit_code) if status == FAILED and plain_exit else None
        self._finish_run(
            tx,
            run,
            status,
            self._exit_message(tx, run, exited),
            exited.exit_code if exited.exit_code >= 0 else None,
            signal=exited.signal,
            cause=cause,
            when=_reported_time(exited.time, tx.now),
        )

    def _exit_message(self, tx: Transaction, run: Run, exited: node_pb2.RunExited) -> str:
        if exited.timed_out:
            stage = tx.session.get(Stage, run.stage_id)
            workflow = tx.session.get(Workflow, run.workflow_id)
            limit = ""
            if stage is not None and workflow is not None:
                seconds = timeout_seconds(self._run_definition(self._plan(workflow), stage.name))
                limit = f" of {seconds:g}s" if seconds else ""
            return f"killed: exceeded policy.timeout.execute{limit}"
        if exited.message:
            return exited.message
        if exited.oom_killed:
            return "killed: out of memory (raise resource.memory.size)"
        if exited.canceled:
            return "canceled"
        if exited.signal:
            return f"killed by signal {exited.signal}"
        return f"exited with code {exited.exit_code}"

    def _finish_run(
        self,
        tx: Transaction,
        run: Run,
        status: str,
        message: str,
        exit_code: int | None,
        *,
        signal: int = 0,
        cause: str | None = None,
        when: float | None = None,
    ) -> None:
        """End a run; a failure whose ``cause`` (``node`` or an exit code) the step's
        ``policy.retry`` lists runs it again instead of failing the stage."""
        was_started = run.status == STARTED
        key = run_key(run.id)
        if run.status in LIVE_RUN:
            with contextlib.suppress(NotFound):  # never placed, or already released
                self.scheduler.release(key)
            if len(run.node_ids) > 1:
                self._stop_other_parts(tx, run, message)
        run.status = status
        run.exit_code = exit_code
        run.message = message
        run.finished_at = when if when is not None else tx.now
        run.failure_cause = cause if status == FAILED else None
        stage = tx.session.get(Stage, run.stage_id)
        if stage is None:
            return
        node_id = run.node_ids[0] if run.node_ids else None
        self._event(
            tx,
            "container_exited",
            f"{stage.name}{task_label(run)}: {message}",
            workflow_id=run.workflow_id,
            stage_name=stage.name,
            node_id=node_id,
            exit_code=exit_code,
            signal=signal,
            task_id=run.task_id,
            status=status,
        )
        if status == FAILED and cause is not None and stage.status not in TERMINAL:
            decision = self._retry_decision(tx, run, stage, cause)
            if decision.retry:
                self._event(
                    tx,
                    "retried",
                    f"{stage.name}{task_label(run)}: {message}; {decision.note}",
                    workflow_id=run.workflow_id,
                    stage_name=stage.name,
                    node_id=node_id,
                    cause=cause,
                    task_id=run.task_id,
                    attempt=run.attempt + 1,
                )
                if was_started and stage.task_count is not None:
                    stage.tasks_running = max(0, stage.tasks_running - 1)
                workflow = tx.session.get(Workflow, run.workflow_id)
                if workflow is not None:
                    stage.attempt = max(stage.attempt, run.attempt + 1)
                    self._new_run(tx, workflow, stage, run.task_id, attempt=run.attempt + 1)
                return
            if decision.exhausted:
                self._event(
                    tx,
                    "retries_exhausted",
                    f"{stage.name}{task_label(run)}: {decision.note}",
                    workflow_id=run.workflow_id,
                    stage_name=stage.name,
                    node_id=node_id,
                    cause=cause,
                    task_id=run.task_id,
                )
            if decision.note:
                message = f"{message}; {decision.note}"
                run.message = message
        if stage.task_count is None:
            if stage.status not in TERMINAL:
                stage.exit_code = exit_code
                self._end_stage(tx, stage, status, message, run.finished_at)
            return
        self._task_ended(tx, stage, run, status, message, was_started)

    def _stop_other_parts(self, tx: Transaction, run: Run, reason: str) -> None:
        """A multinode run ended: its parts still running elsewhere are told to stop (the
        node whose report ended it has stopped already and ignores the cancel)."""
        self._fences.forget(run.id)
        cancel = node_pb2.ControlMessage(cancel=node_pb2.Cancel(run_id=run.id, reason=reason))
        for node_id in run.node_ids:
            if node_id not in (run.parts_done or ()):
                tx.outbox.append((node_id, cancel))

    def _retry_decision(self, tx: Transaction, run: Run, stage: Stage, cause: str) -> RetryDecision:
        workflow = tx.session.get(Workflow, run.workflow_id)
        if workflow is None or workflow.status in TERMINAL:
            return RetryDecision(False, False, "")
        definition = self._run_definition(self._plan(workflow), stage.name)
        rule = retry_rule(definition, self.default_retry)
        earlier = select(Run.failure_cause).where(
            Run.stage_id == stage.id,
            Run.id != run.id,
            Run.status == FAILED,
            Run.task_id.is_(None) if run.task_id is None else Run.task_id == run.task_id,
        )
        causes = list(tx.session.scalars(earlier))
        return decide(
            rule,
            cause,
            reruns=len(causes),
            node_reruns=sum(1 for c in causes if c == NODE_CAUSE),
            max_eviction_restarts=self.max_eviction_restarts,
        )

    def _task_ended(
        self,
        tx: Transaction,
        stage: Stage,
        run: Run,
        status: str,
        message: str,
        was_started: bool,
    ) -> None:
        if was_started:
            stage.tasks_running = max(0, stage.tasks_running - 1)
        if status == FINISHED:
            stage.tasks_finished += 1
        elif status == FAILED:
            stage.tasks_failed += 1
        if stage.status in TERMINAL:
            return
        if status == FAILED:
            stage.exit_code = run.exit_code
            reason = f"task {run.task_id} failed: {message}"
            self._end_stage(tx, stage, FAILED, reason)
            self._cancel_runs(tx, stage.workflow_id, f"canceled: {reason}", stage_id=stage.id)
        elif stage.tasks_finished >= (stage.task_count or 0):
            self._end_stage(tx, stage, FINISHED, f"{stage.tasks_finished} tasks finished")
        else:
            workflow = tx.session.get(Workflow, stage.workflow_id)
            if workflow is not None:
                self._dispatch_tasks(tx, workflow, stage)

    def _end_stage(
        self,
        tx: Transaction,
        stage: Stage,
        status: str,
        message: str,
        when: float | None = None,
    ) -> None:
        stage.status = status
        stage.message = message
        stage.finished_at = when if when is not None else tx.now
        kind = {FINISHED: "stage_finished", FAILED: "stage_failed", CANCELED: "stage_canceled"}
        self._event(
            tx,
            kind[status],
            f"{stage.name}: {message}",
            workflow_id=stage.workflow_id,
            stage_name=stage.name,
        )
        self._dirty.add(stage.workflow_id)

    def _end_workflow(self, tx: Transaction, workflow: Workflow, status: str, error: str) -> None:
        workflow.status = status
        workflow.finished_at = tx.now
        workflow.error = error if status != FINISHED else ""
        kind = {
            FINISHED: "workflow_finished",
            FAILED: "workflow_failed",
            CANCELED: "workflow_canceled",
        }[status]
        self._event(
            tx,
            kind,
            f"workflow {workflow.name}: {status.lower()}"
            + (f" ({error})" if error and status != FINISHED else ""),
            workflow_id=workflow.id,
        )
        self._plans.pop(workflow.id, None)

    # -- readiness -----------------------------------------------------------------------------

    def _stages(self, session: Session, workflow_id: str) -> list[Stage]:
        return list(session.scalars(select(Stage).where(Stage.workflow_id == workflow_id)))

    def _advance(self, tx: Transaction, workflow_id: str) -> None:
        workflow = tx.session.get(Workflow, workflow_id)
        if workflow is None or workflow.status in TERMINAL:
            return
        entry = self._plan(workflow)
        stages = {stage.name: stage for stage in self._stages(tx.session, workflow_id)}
        by_status: dict[str, set[str]] = {FINISHED: set(), FAILED: set(), CANCELED: set()}
        started: set[str] = set()
        services = {n for n, p in entry.plan.stages.items() if p.kind is StageKind.SERVICE}
        for name, stage in stages.items():
            if stage.status in by_status:
                by_status[stage.status].add(name)
            elif stage.status == STARTED or stage.id in self._dispatched:
                started.add(name)
        running = {
            name
            for name in services & started
            if stages[name].status == STARTED
            and (
                entry.plan.stages[name].definition.readiness_probe is None
                or stages[name].id in self._ready_stages
            )
        }
        ready, skipped = entry.plan.advance(
            by_status[FINISHED],
            by_status[FAILED],
            by_status[CANCELED],
            started=started,
            running=running,
        )
        for name in skipped:
            reason = _skip_reason(entry.plan, name, stages)
            self._end_stage(tx, stages[name], CANCELED, reason)
        for name in ready:
            self._start_stage(tx, workflow, entry, stages[name], entry.plan.stages[name])
        self._stop_services_after_jobs(tx, workflow_id, stages, services)
        if all(stage.status in TERMINAL for stage in stages.values()):
            failed = [s for s in stages.values() if s.status == FAILED]
            if failed:
                self._end_workflow(
                    tx, workflow, FAILED, f"{failed[0].name} failed: {failed[0].message}"
                )
            else:
                self._end_workflow(tx, workflow, FINISHED, "")

    def _stop_services_after_jobs(
        self, tx: Transaction, workflow_id: str, stages: dict[str, Stage], services: set[str]
    ) -> None:
        """Services serve the workflow's jobs: once every other stage has ended, the
        services still up are stopped and count as finished (a workflow of services alone
        runs until it is stopped)."""
        if not services or len(services) == len(stages):
            return
        if any(s.status not in TERMINAL for n, s in stages.items() if n not in services):
            return
        for name in services:
            stage = stages[name]
            if stage.status in TERMINAL:
                continue
            self._cancel_runs(tx, workflow_id, "the workflow's jobs ended", stage_id=stage.id)
            self._end_stage(tx, stage, FINISHED, "stopped: every job of the workflow ended")

    def _start_stage(
        self,
        tx: Transaction,
        workflow: Workflow,
        entry: _PlanEntry,
        stage: Stage,
        planned: PlanStage,
    ) -> None:
        if planned.kind is StageKind.VOLUME:
            stage.status = STARTED
            stage.started_at = tx.now
            self._end_stage(tx, stage, FINISHED, "volume ready")
            return
        if isinstance(planned.definition, ImageBuild):
            from_digest = self._image_digest(tx, workflow, entry, str(planned.definition.from_.uri))
            built = image_stages.definition_hash(planned.definition, from_digest)
            if self.images.cached_build(
                planned.name, planned.definition, workflow.account_id, built
            ):
                stage.status = STARTED
                stage.started_at = tx.now
                self._event(
                    tx,
                    "image_cached",
                    f"{stage.name}: unchanged definition served from the object cache",
                    workflow_id=workflow.id,
                    stage_name=stage.name,
                    definition_hash=built,
                )
                self._end_stage(tx, stage, FINISHED, "served from the object cache")
                return
            if self.images.object_cache is None:
                stage.started_at = tx.now
                self._end_stage(
                    tx,
                    stage,
                    FAILED,
                    "workflow image builds need the object cache, which this"
                    " Orchestrate does not hold",
                )
                return
        self._dispatched.add(stage.id)
        if planned.tasks is not None:
            stage.next_task = planned.tasks.start
            self._dispatch_tasks(tx, workflow, stage)
        else:
            self._new_run(tx, workflow, stage, None)

    def _dispatch_tasks(self, tx: Transaction, workflow: Workflow, stage: Stage) -> None:
        planned = self._plan(workflow).plan.stages[stage.name]
        tasks = planned.tasks
        assert tasks is not None and stage.next_task is not None
        window = tasks.concurrency or DEFAULT_TASK_WINDOW
        ended = stage.tasks_finished + stage.tasks_failed
        in_flight = (stage.next_task - tasks.start) - ended
        count = min(window - in_flight, tasks.end - stage.next_task + 1)
        if count > 0:
            self._new_runs(tx, workflow, stage, range(stage.next_task, stage.next_task + count))
            stage.next_task += count

    def _new_run(
        self,
        tx: Transaction,
        workflow: Workflow,
        stage: Stage,
        task_id: int | None,
        *,
        attempt: int = 1,
    ) -> None:
        self._new_runs(tx, workflow, stage, [task_id], attempt=attempt)

    def _new_runs(
        self,
        tx: Transaction,
        workflow: Workflow,
        stage: Stage,
        task_ids: Iterable[int | None],
        *,
        attempt: int = 1,
    ) -> None:
        runs = [
            Run(
                workflow_id=workflow.id,
                stage_id=stage.id,
                task_id=task_id,
                status=PENDING,
                created_at=tx.now,
                attempt=attempt,
            )
            for task_id in task_ids
        ]
        tx.session.add_all(runs)
        tx.session.flush()  # one INSERT batch gives every run its id
        definition = self._run_definition(self._plan(workflow), stage.name)
        for run in runs:
            request = job_request(run.id, definition, submitted_at=workflow.created_at)
            self._pending[request.id] = PendingRun(run.id, workflow.id, stage.id, request)

    # -- scheduling ----------------------------------------------------------------------------

    def _schedule(self, tx: Transaction) -> None:
        if not self._pending:
            self.diagnoses = {}
            return
        pending = [p.request for p in self._pending.values()]
        result = self.scheduler.schedule(pending, tx.now)
        self.diagnoses = result.diagnoses  # read lazily: most passes nobody asks why
        self._report_blocked(tx, result.diagnoses)
        self._preload_runs(tx, [self._pending[p.job_id].run_id for p in result.placements])
        for placement in result.placements:
            waiting = self._pending.pop(placement.job_id)
            run = tx.session.get(Run, waiting.run_id)
            if run is None or run.status != PENDING:
                self.scheduler.release(placement.job_id)
                continue
            run.status = ASSIGNED
            run.node_ids = list(placement.node_ids)
            run.assigned_at = tx.now
            stage = tx.session.get(Stage, run.stage_id)
            names = ", ".join(self._node_names.get(n, n) for n in placement.node_ids)
            self._event(
                tx,
                "scheduled",
                f"{stage.name if stage else '?'}{task_label(run)} scheduled on {names}",
                workflow_id=run.workflow_id,
                stage_name=stage.name if stage else None,
                node_id=placement.node_ids[0],
                task_id=run.task_id,
            )
            self._send_assignment(tx, run)

    def _report_blocked(self, tx: Transaction, diagnoses: Mapping[str, Diagnosis]) -> None:
        """A ``scheduling_blocked`` event once per cause for each stage left waiting."""
        seen: set[int] = set()
        for waiting in self._pending.values():
            if waiting.stage_id in seen or waiting.request.id not in diagnoses:
                continue
            seen.add(waiting.stage_id)
            diagnosis = diagnoses[waiting.request.id]
            reported = self._blocked_reported.setdefault(waiting.stage_id, set())
            if diagnosis.reason.value in reported:
                continue
            reported.add(diagnosis.reason.value)
            stage = tx.session.get(Stage, waiting.stage_id)
            self._event(
                tx,
                "scheduling_blocked",
                f"{stage.name if stage else '?'}: {diagnosis.message}",
                workflow_id=waiting.workflow_id,
                stage_name=stage.name if stage else None,
                reason=diagnosis.reason.value,
                estimated_start=diagnosis.estimated_start,
            )

    def waiting_diagnosis(self, stage_id: int) -> Diagnosis | None:
        """Why a stage's first waiting run was not placed in the last pass, if one waits."""
        for waiting in self._pending.values():
            if waiting.stage_id == stage_id and waiting.request.id in self.diagnoses:
                return self.diagnoses[waiting.request.id]
        return None

    def _send_assignment(self, tx: Transaction, run: Run) -> None:
        workflow = tx.session.get(Workflow, run.workflow_id)
        stage = tx.session.get(Stage, run.stage_id)
        if workflow is None or stage is None:
            return
        entry = self._plan(workflow)
        definition = self._run_definition(entry, stage.name)
        assignment = node_pb2.Assignment(
            run_id=run.id,
            workflow_id=run.workflow_id,
            stage_name=stage.name,
            has_task=run.task_id is not None,
            task_id=run.task_id or 0,
            job_json=self._payload(tx, workflow, entry, stage.name),
            timeout_seconds=timeout_seconds(definition) or 0.0,
            node_ids=list(run.node_ids),
            volume_ingress_json=self._ingress(entry, stage.name),
        )
        # every node of a multinode run gets the same assignment and runs its own ranks
        if len(run.node_ids) > 1:
            self._fences.watch(run.id, run.node_ids)
        message = node_pb2.ControlMessage(assign=assignment)
        tx.outbox.extend((node_id, message) for node_id in run.node_ids)


def _reported_time(reported: float, received: float) -> float:
    """When a node says something happened; its word when plausible (nodes' clocks can be
    off, and a report can arrive long after the fact when Orchestrate was away)."""
    return reported if 0 < reported <= received + 5 else received


def _skip_reason(plan: Plan, name: str, stages: dict[str, Stage]) -> str:
    """Why ``name`` can never run, in the words of its depends-on."""
    for edge in plan.dependencies_of(name):
        source = stages.get(edge.source)
        status = source.status if source is not None else "?"
        if status == CANCELED:
            return f"skipped: {edge.source} was canceled"
        if edge.condition is Condition.ON_FAILURE and status == FINISHED:
            return f"skipped: {edge.source} finished, and this runs only if it fails"
        if edge.condition is not Condition.ON_FAILURE and status == FAILED:
            return f"skipped: {edge.source} failed"
    return "skipped: its dependencies can no longer be met"
