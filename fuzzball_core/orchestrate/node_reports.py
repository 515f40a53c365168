"""What nodes report on their Connect streams, applied in the engine's pass.

Reports arrive between passes and wait in the engine's inbox; each pass loads every run
they mention at once and applies them in arrival order: heartbeats renew leases, ``started``
and ``exited`` move runs, ``log`` is stored within ``orchestrate.logs``' limits
(:mod:`~fuzzball_core.orchestrate.job_output`) or becomes image progress events, ``ready``
releases a service's dependents and ``fence`` is relayed between a multinode run's nodes.

A node speaks only for its own work: a report about a run is applied only when that run is
placed on the reporting node, and one about a volume only when the volume is not another
node's (:func:`apply`). The rest is dropped, counted (``dropped_reports``, for Orchestrate's
metrics) and logged, a node's repeats of one kind at most once a minute
(:mod:`~fuzzball_core.orchestrate.warning_limiter`). A run is placed once, on the nodes its
row keeps for good (a retry is a new run), so a late report from the node a run ended on,
lost or not, still passes and is handled as before: an ended run's report changes only what
it may after the end.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from sqlalchemy import select

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate import (
    events,
    image_stages,
    job_output,
    multinode,
    nodes,
    run_warnings,
    runs,
    services,
    transfer_events,
    volume_removal,
    volumes,
)
from fuzzball_core.orchestrate.context import EngineContext, LiveRun
from fuzzball_core.orchestrate.messages import LogsStored
from fuzzball_core.orchestrate.requests import timeout_seconds
from fuzzball_core.orchestrate.states import ASSIGNED, LIVE_RUN, run_moved, transition
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.store.models import Node, Run, Stage, Volume, Workflow
from fuzzball_core.vocabulary import StageKind, Status

log = logging.getLogger(__name__)

#: The reports that name a run.
_ABOUT_RUNS = ("started", "exited", "log", "fence", "ready")
#: Where a pass's session keeps the :class:`LogsStored` answer it will send each node
#: (``Session.info``, which ends with the pass's transaction).
_ANSWERS = "fuzzball.logs_stored"
#: Where a pass's session keeps ``runs.output_received`` of the live runs whose counted
#: output it applies without their rows, by run id (``Session.info``).
_RECEIVED = "fuzzball.output_received"


def preload(
    ctx: EngineContext, tx: Transaction, reports: Iterable[tuple[str, node_pb2.NodeMessage]]
) -> None:
    """Load every run (and its stage and workflow) the reports mention, and the output
    counts of those that printed, in a few queries, so applying them finds the rows in the
    session instead of querying one by one. A live run's ``started`` report, and a plain
    exit (:func:`_plain_exit`) of a task or of a job stage's single run, need no run row,
    only their stages and workflows (one more query for those the session lacks).

    A live run's first ``started`` report and its exit move its stage, so its workflow is
    advanced in this pass: that workflow is read with all its stages
    (:meth:`Transaction.load_workflows`), as advancing it reads them, and the run's row
    alone; reading its stage and workflow here and all of them again to advance it cost
    two queries where one does.

    A live run's output needs no row either (:func:`_log`): only its usage rows, and for
    counted output its ``output_received`` (one Core read). Reading the row for a task's
    output also made its plain exit in the same pass go through the row and the ORM's
    flush: a third of the engine's samples under hollow nodes' one line a task."""
    run_ids, logging_runs, stage_ids, workflow_ids = set(), set(), set(), set()
    printers: set[tuple[str, int]] = set()
    counted: set[int] = set()
    single_exits: list[tuple[int, int]] = []  # (run id, stage id)
    for node_id, message in reports:
        kind = message.WhichOneof("kind")
        if kind in _ABOUT_RUNS and _not_placed_on(ctx, node_id, getattr(message, kind).run_id):
            continue  # dropped when applied: nothing of it is read
        if kind == "log" and (live := ctx.live_runs.get(message.log.run_id)):
            printers.add((live.workflow_id, message.log.run_id))
            if message.log.seq:
                counted.add(message.log.run_id)
            continue
        if kind == "started" and (live := ctx.live_runs.get(message.started.run_id)):
            # STARTED already (sent again after a reconnect), or applied without its row
            if not live.started:
                workflow_ids.add(live.workflow_id)
            continue
        if kind == "exited" and (live := _plain_exit(ctx, node_id, message.exited)):
            if live.task_id is not None:
                stage_ids.add(live.stage_id)
                continue
            # a single run's: its row is read only if its stage is not a job's (below)
            single_exits.append((message.exited.run_id, live.stage_id))
        if kind == "exited" and (live := ctx.live_runs.get(message.exited.run_id)):
            workflow_ids.add(live.workflow_id)
        if kind in _ABOUT_RUNS:
            run_ids.add(getattr(message, kind).run_id)
        if kind == "log":
            logging_runs.add(message.log.run_id)
    tx.load_workflows(workflow_ids)
    run_ids.difference_update(
        run_id for run_id, stage_id in single_exits if _job_stage(tx, stage_id) is not None
    )
    alone = {run_id for run_id in run_ids if _parents_held(ctx, tx, run_id)}
    tx.load(Run, alone)
    tx.load_runs(run_ids - alone)
    tx.load_stages(stage_ids)
    _read_received(tx, counted)
    printers.update(
        (r.workflow_id, r.id) for r in tx.loaded if isinstance(r, Run) and r.id in logging_runs
    )
    job_output.preload(tx, printers)


def _read_received(tx: Transaction, run_ids: set[int]) -> None:
    """Read ``output_received`` of these runs, those the pass has not read yet, without
    their rows (:data:`_RECEIVED`)."""
    received: dict[int, dict[str, int]] = tx.session.info.setdefault(_RECEIVED, {})
    # a run the session holds has its output noted on its row (:func:`_log`)
    wanted = {run_id for run_id in run_ids - received.keys() if not tx.holds(Run, run_id)}
    if wanted:
        # past the waiting writes and changed rows: a run whose output_received waits to be
        # written is in ``received`` already, no other write sets that column, and the
        # session's changed rows are not these runs (the mapped columns: a Core read
        # would flush them)
        rows = tx.read_past_writes(select(Run.id, Run.output_received).where(Run.id.in_(wanted)))
        received.update((run_id, seen or {}) for run_id, seen in rows)


def _parents_held(ctx: EngineContext, tx: Transaction, run_id: int) -> bool:
    """Whether the session holds a live run's stage and workflow, so that its row may be
    read alone."""
    live = ctx.live_runs.get(run_id)
    return (
        live is not None and tx.holds(Stage, live.stage_id) and tx.holds(Workflow, live.workflow_id)
    )


def apply(ctx: EngineContext, tx: Transaction, node_id: str, message: node_pb2.NodeMessage) -> None:
    """Apply one report of ``node_id``.

    One about a live run placed on other nodes is dropped here, from the placement the
    engine holds (:attr:`EngineContext.live_runs`); one about a run that is not live is
    checked against its row where its handler reads it, as is one about a volume."""
    kind = message.WhichOneof("kind")
    if kind in _ABOUT_RUNS:
        run_id = getattr(message, kind).run_id
        if _not_placed_on(ctx, node_id, run_id):
            _drop_run_report(ctx, node_id, kind, run_id)
            return
    if kind == "heartbeat":
        node = tx.get(Node, node_id)
        if node is not None:
            nodes.renew(ctx, tx, node)
    elif kind == "started":
        _run_started(ctx, tx, node_id, message.started.run_id, message.started.time)
    elif kind == "exited":
        _run_exited(ctx, tx, node_id, message.exited)
    elif kind == "log":
        _log(ctx, tx, node_id, message.log)
    elif kind == "ready":
        run = tx.get(Run, message.ready.run_id)
        if run is not None and _placed_on(ctx, node_id, kind, run.id, run.node_ids):
            services.ready(ctx, tx, run)
    elif kind == "fence":
        multinode.relay_fence(ctx, tx, node_id, message.fence)
    elif kind == "volume_removed":
        removed = message.volume_removed
        volume = tx.get(Volume, removed.volume_id)
        if volume is not None and _held_by(ctx, node_id, kind, volume):
            volume_removal.removed(tx, node_id, volume, removed.error)


def _not_placed_on(ctx: EngineContext, node_id: str, run_id: int) -> bool:
    """Whether ``run_id`` is a live run placed on nodes other than ``node_id``: what the
    engine holds in memory answers, without its row (a run that is not live: False, its row
    is checked where it is read)."""
    live = ctx.live_runs.get(run_id)
    return live is not None and node_id not in live.node_ids


def _placed_on(
    ctx: EngineContext, node_id: str, kind: str, run_id: int, node_ids: Sequence[str]
) -> bool:
    """Whether ``node_ids``, where run ``run_id`` was placed, include ``node_id``; its
    report is dropped if not."""
    if node_id in node_ids:
        return True
    _drop_run_report(ctx, node_id, kind, run_id)
    return False


def _held_by(ctx: EngineContext, node_id: str, kind: str, volume: Volume) -> bool:
    """Whether ``node_id`` may report on ``volume``: its holder for a node-local volume,
    any node for one on a tree every node sees (as any READY node is told to remove it);
    its report is dropped if not."""
    if volume.node_id is None or volume.node_id == node_id:
        return True
    _drop(ctx, node_id, kind, f"volume {volume.id}, which another node holds")
    return False


def _drop_run_report(ctx: EngineContext, node_id: str, kind: str, run_id: int) -> None:
    _drop(ctx, node_id, kind, f"run {run_id}, which is not placed on it")


def _drop(ctx: EngineContext, node_id: str, kind: str, about: str) -> None:
    """Drop ``node_id``'s ``kind`` report about what it does not hold: counted, and logged
    (never its content, which may be a job's output) within
    :attr:`EngineContext.dropped_report_warnings`' limit, the next line saying how many of
    the node's reports of that kind it held back."""
    ctx.dropped_reports[kind] += 1
    admitted = ctx.dropped_report_warnings.admit((node_id, kind), ctx.clock())
    if admitted is None:
        return
    name = ctx.node_names.get(node_id, "?")
    if not admitted.held_back:
        log.warning("node %s (%s) reported %s of %s: dropped", name, node_id, kind, about)
        return
    log.warning(
        "node %s (%s) reported %s of %s: dropped; %d more %s reports from it dropped since %s,"
        " not logged",
        name,
        node_id,
        kind,
        about,
        admitted.held_back,
        kind,
        datetime.fromtimestamp(admitted.since, UTC).isoformat(timespec="seconds"),
    )


def _log(ctx: EngineContext, tx: Transaction, node_id: str, data: node_pb2.LogData) -> None:
    live = ctx.live_runs.get(data.run_id)
    unread = live is not None and not tx.holds(Run, data.run_id)
    run = None if unread else tx.get(Run, data.run_id)
    if run is not None and not _placed_on(ctx, node_id, "log", run.id, run.node_ids):
        return
    if data.seq:
        # answered even for a run that is gone, so the agent stops sending it again
        _acknowledge(tx, node_id, data.run_id, data.seq)
    if live is not None and unread:
        # what the engine knows of the run names its output: its row is not read
        if data.seq and not _first_live_receipt(tx, data.run_id, node_id, data.seq):
            return
        printer = job_output.Printer(live.workflow_id, data.run_id, live.task_id, live.stage_name)
        node_ids: tuple[str, ...] | list[str] = live.node_ids
    else:
        if run is None or (data.seq and not _first_receipt(run, node_id, data.seq)):
            return
        stage = tx.get(Stage, run.stage_id)
        printer = job_output.Printer(
            run.workflow_id, run.id, run.task_id, stage.name if stage else "?"
        )
        node_ids = run.node_ids
    if data.stream == image_stages.PROGRESS_STREAM:
        name = printer.stage_name
        warning = run_warnings.warning_event(name, data.data)
        progress = (
            warning
            or transfer_events.transfer_event(name, data.data)
            or image_stages.progress_event(name, data.data)
        )
        if progress is not None and name != "?":
            kind, message, details = progress
            # a warning is the word of the node that sent it (one part of a multinode job)
            reporter = node_id if warning is not None else node_ids[0] if node_ids else None
            events.record(
                tx,
                kind,
                message,
                workflow_id=printer.workflow_id,
                stage_name=name,
                node_id=reporter,
                **details,
            )
        return
    job_output.store(tx, ctx.log_limits, printer, data.stream or "stdout", data.data)


def _first_receipt(run: Run, node_id: str, seq: int) -> bool:
    """Whether chunk ``seq`` of ``node_id``'s output of ``run`` is new, noting it if so: an
    agent sends again, after a reconnect, the chunks no :class:`LogsStored` covered, some of
    which the pass before Orchestrate stopped may have stored already."""
    received = _with_receipt(run.output_received or {}, node_id, seq)
    if received is None:
        return False
    run.output_received = received
    return True


def _first_live_receipt(tx: Transaction, run_id: int, node_id: str, seq: int) -> bool:
    """:func:`_first_receipt` of a live run the session does not hold: its
    ``output_received`` as :func:`preload` read it, written with the pass's other run
    writes (:meth:`Transaction.write_run`)."""
    received: dict[int, dict[str, int]] = tx.session.info.setdefault(_RECEIVED, {})
    if run_id not in received:
        _read_received(tx, {run_id})  # not preloaded: the report came outside a pass
    noted = _with_receipt(received.get(run_id, {}), node_id, seq)
    if noted is None:
        return False
    received[run_id] = noted
    tx.write_run(run_id, output_received=noted)
    return True


def _with_receipt(received: dict[str, int], node_id: str, seq: int) -> dict[str, int] | None:
    """``received`` with chunk ``seq`` of ``node_id`` noted, or None when it was already
    (a new dict: the JSON column notices assignment, not changes made in place)."""
    if seq <= received.get(node_id, 0):
        return None
    return {**received, node_id: seq}


def _acknowledge(tx: Transaction, node_id: str, run_id: int, seq: int) -> None:
    """Tell ``node_id``, once this pass commits, that its output of ``run_id`` is stored
    through ``seq``: one :class:`LogsStored` per node and pass, filled in as its reports are
    applied (it is sent after the commit, so it carries the pass's last numbers)."""
    answers: dict[str, LogsStored] = tx.session.info.setdefault(_ANSWERS, {})
    answer = answers.get(node_id)
    if answer is None:
        answer = answers[node_id] = LogsStored(through_seq={})
        tx.send([node_id], answer)
    through = answer.through_seq
    through[run_id] = max(through.get(run_id, 0), seq)


def _run_started(
    ctx: EngineContext, tx: Transaction, node_id: str, run_id: int, when: float = 0.0
) -> None:
    live = ctx.live_runs.get(run_id)
    if live is not None and live.started:
        return  # without its row: the pass need not read it
    started_at = reported_time(when, tx.now)
    if live is not None and not tx.holds(Run, run_id):
        # live and not started: ASSIGNED, which is all its row would have told
        run_moved(tx, run_id, live.workflow_id, ASSIGNED, Status.STARTED, when=started_at)
        workflow_id, stage_id, node_ids = live.workflow_id, live.stage_id, list(live.node_ids)
    else:
        run = tx.get(Run, run_id)
        if run is None or not _placed_on(ctx, node_id, "started", run_id, run.node_ids):
            return
        if run.status != ASSIGNED:
            return
        transition(tx, run, Status.STARTED, when=started_at)
        workflow_id, stage_id, node_ids = run.workflow_id, run.stage_id, list(run.node_ids)
    if live is not None:
        live.started = True
    stage = tx.get(Stage, stage_id)
    if stage is None:
        return
    if stage.task_count is not None:
        stage.tasks_running += 1
    if stage.status == Status.PENDING:
        stage.node_ids = node_ids
        transition(
            tx,
            stage,
            Status.STARTED,
            f"{stage.name} started on {ctx.node_names_of(node_ids)}",
            when=started_at,
            node_id=node_ids[0] if node_ids else None,
        )
        if stage.task_count is None:
            # written with the pass's other stage starts, not flushed (an array's stage is
            # flushed anyway, for its counts: its start goes in the same UPDATE)
            tx.write_held(stage, "status", "started_at", "node_ids")
        if stage.kind == StageKind.SERVICE:
            # a running service releases its dependents. Any other stage counted as started
            # for its workflow's plan once its runs were queued, so its start changes nothing
            # an advance reads: not advanced again (a third of a separate workflow's
            # advances, each with its plan's walk)
            ctx.dirty.add(workflow_id)


def _plain_exit(ctx: EngineContext, node_id: str, exited: node_pb2.RunExited) -> LiveRun | None:
    """The live run, when ``exited`` reports that it exited with code 0 and nothing else to
    say on the one node it ran on: a task of an array, or a job stage's single run
    (:func:`_job_stage`), exiting so is applied from what the engine knows
    (:func:`~fuzzball_core.orchestrate.runs.finish_task`), without its row. None for any
    other report."""
    live = ctx.live_runs.get(exited.run_id)
    if (
        live is None
        or live.node_ids != (node_id,)
        or exited.exit_code != 0
        or exited.timed_out
        or exited.oom_killed
        or exited.canceled
        or exited.signal
        or exited.message
    ):
        return None
    return live


def _job_stage(tx: Transaction, stage_id: int) -> Stage | None:
    """The stage, when it is a job's that runs one run (not an array, a service, an image
    or a volume's transfer): its run's plain exit needs nothing from the run's row (no
    retry, no scaling down, no image noted on the node) and ends the stage."""
    stage = tx.get(Stage, stage_id)
    if stage is None or stage.kind != StageKind.JOB or stage.task_count is not None:
        return None
    return stage


def _run_exited(
    ctx: EngineContext, tx: Transaction, node_id: str, exited: node_pb2.RunExited
) -> None:
    live = _plain_exit(ctx, node_id, exited)
    if live is not None and not tx.holds(Run, exited.run_id):
        stage = (
            tx.get(Stage, live.stage_id)
            if live.task_id is not None
            else _job_stage(tx, live.stage_id)
        )
        if stage is not None and (stage.task_count is not None or live.task_id is None):
            _record_volume_sizes(ctx, tx, node_id, exited)
            counters = _metering(exited.run_id, node_id, exited.metering_json)
            runs.finish_task(
                ctx,
                tx,
                exited.run_id,
                live,
                stage,
                _plain_exit_message(exited.exit_code),
                when=reported_time(exited.time, tx.now),
                metering=None if counters is None else {node_id: counters},
            )
            return
    run = tx.get(Run, exited.run_id)
    if run is None or not _placed_on(ctx, node_id, "exited", run.id, run.node_ids):
        return  # never ours, or another node's: nothing of it is kept
    # kept even for a run already over: a multinode run's other parts report their traffic
    # after the first failing part ended it
    _keep_metering(run, node_id, exited.metering_json)
    _record_volume_sizes(ctx, tx, node_id, exited)
    if run.status not in LIVE_RUN:
        return  # over already: nothing of it runs on a node
    if exited.canceled:
        status = Status.CANCELED
    elif exited.exit_code == 0 and not exited.timed_out and not exited.message:
        status = Status.FINISHED
    else:
        status = Status.FAILED
    if status == Status.FINISHED and multinode.part_finished(run, node_id):
        return  # the run ends with its last part, or with the first that fails
    plain_exit = not (exited.timed_out or exited.oom_killed or exited.message or exited.signal)
    cause = str(exited.exit_code) if status == Status.FAILED and plain_exit else None
    runs.finish_run(
        ctx,
        tx,
        run,
        status,
        _exit_message(ctx, tx, run, exited),
        exited.exit_code if exited.exit_code >= 0 else None,
        signal=exited.signal,
        cause=cause,
        when=reported_time(exited.time, tx.now),
    )


#: The counters of a run's metering, as Substrate's eBPF meters name them.
METERING_COUNTERS = ("ingress_bytes", "ingress_packets", "egress_bytes", "egress_packets")


def _record_volume_sizes(
    ctx: EngineContext, tx: Transaction, node_id: str, exited: node_pb2.RunExited
) -> None:
    """Keep the sizes of the volumes the exit reported, those ``node_id`` may measure."""
    for volume_id, size in exited.volume_sizes.items():
        volume = tx.get(Volume, volume_id)
        if volume is not None and _held_by(ctx, node_id, "volume_sizes", volume):
            volumes.record_size(tx.session, volume_id, size, reported_time(exited.time, tx.now))


def _keep_metering(run: Run, node_id: str, metering_json: str) -> None:
    """Store the traffic ``node_id`` metered for ``run`` under that node (a report sent again
    replaces itself)."""
    counters = _metering(run.id, node_id, metering_json)
    if counters is not None:
        # a new dict, so that the JSON column sees the change
        run.metering = {**(run.metering or {}), node_id: counters}


def _metering(run_id: int, node_id: str, metering_json: str) -> dict[str, int] | None:
    """The counters ``node_id`` metered for the run; None when it metered nothing (metering
    off, or the run never started a container), or sent what is not counters (logged and
    dropped: a report must not fail the pass)."""
    if not metering_json:
        return None
    try:
        sent = json.loads(metering_json)
        return {name: int(sent.get(name, 0)) for name in METERING_COUNTERS}
    except (ValueError, TypeError, AttributeError):
        log.warning("run %d: unreadable metering from %s: %.80r", run_id, node_id, metering_json)
        return None


def _exit_message(ctx: EngineContext, tx: Transaction, run: Run, exited: node_pb2.RunExited) -> str:
    if exited.timed_out:
        stage = tx.get(Stage, run.stage_id)
        workflow = tx.get(Workflow, run.workflow_id)
        limit = ""
        if stage is not None and workflow is not None:
            seconds = timeout_seconds(ctx.plans.run_definition(workflow, stage.name))
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
    return _plain_exit_message(exited.exit_code)


def _plain_exit_message(exit_code: int) -> str:
    """What a run that exited by itself, with nothing else to say, ended with."""
    return f"exited with code {exit_code}"


def reported_time(reported: float, received: float) -> float:
    """When a node says something happened; its word when plausible (nodes' clocks can be
    off, and a report can arrive long after the fact when Orchestrate was away)."""
    return reported if 0 < reported <= received + 5 else received
