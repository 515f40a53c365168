"""``fuzzball workflow start|list|describe|status|logs|events|stop|why``: workflows on a server.

Each command talks to the API of the active context, whose replies come as ``fuzzball.v1``
messages. ``-o json|yaml`` prints the API's own objects; tables show statuses without their
``STAGE_STATUS_`` prefix (pending for ``UNSPECIFIED``) and times in UTC to the second.
The server's warnings about a started file go to stderr as ``warning: FIELD: TEXT``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import click
from google.protobuf.message import Message

from fuzzball_core.api.proto_messages import status_of
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.image_progress import IMAGE_STAGE_PREFIX, ImageProgress
from fuzzball_core.cli.output import (
    emit,
    format_table,
    moment,
    output_option,
    printable,
    short_time,
)
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.vocabulary import TERMINAL_STATUSES, EventKind, Status

#: Seconds between two status polls of ``start --wait``.
WAIT_POLL_INTERVAL = 0.5


def register(group: click.Group) -> None:
    """Add the server-side workflow commands to the ``workflow`` group."""
    for command in (start, list_workflows, describe, status, logs, events, stop, why):
        group.add_command(command)


def status_name(value: int) -> Status:
    """``STAGE_STATUS_FAILED`` -> ``FAILED``; unspecified is ``PENDING``."""
    return status_of(value)


def kind_name(value: int) -> str:
    """``STAGE_KIND_JOB`` -> ``Job``."""
    return pb.StageKind.Name(value).removeprefix("STAGE_KIND_").capitalize()


def _stage_rows(stages: Sequence[pb.WorkflowStage]) -> list[list[str]]:
    return [
        [
            kind_name(s.kind),
            status_name(s.status),
            s.name,
            short_time(s, "start_time"),
            short_time(s, "end_time"),
        ]
        for s in stages
    ]


_STAGE_HEADERS = ["KIND", "STATUS", "NAME", "STARTED", "FINISHED"]

#: ``describe``'s columns of the traffic each stage's containers received and sent.
_TRAFFIC_HEADERS = ["RECEIVED", "SENT"]


def byte_count(count: int) -> str:
    """``512 B``, ``1.5 KiB``, ``20.0 MiB``: a byte count in binary units, one decimal."""
    if count < 1024:
        return f"{count} B"
    size = float(count)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024:
            return f"{size:.1f} {unit}"
    return f"{size / 1024:.1f} TiB"


def _traffic_cells(stage: pb.WorkflowStage) -> list[str]:
    """What the stage's containers received and sent; empty cells when never metered."""
    if not stage.details.HasField("metering"):
        return ["", ""]
    metering = stage.details.metering
    return [byte_count(metering.ingress_bytes), byte_count(metering.egress_bytes)]


@click.command("start")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", default=None, help="Name of the workflow (the server picks one if unset).")
@click.option(
    "-w",
    "--wait",
    is_flag=True,
    help="Wait until the workflow ends (stage changes on stderr), then show it: who, where,"
    " when, and its stages; exit 1 unless it finished.",
)
@click.option(
    "--logs",
    "show_logs",
    is_flag=True,
    help="With --wait: print every job's output once the workflow ends.",
)
@output_option
@click.pass_obj
def start(
    state: CliState, file: Path, name: str | None, wait: bool, show_logs: bool, output: str
) -> None:
    """Start the workflow in FILE (sent unchanged to the server).

    The server's warnings about the file (fields it accepts but does not act on, ...) are
    printed on stderr; ``-o json|yaml`` prints the server's reply, its id and warnings.
    """
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"{file}: not UTF-8 text (byte {exc.start})") from None
    if name is not None and not name.strip():
        # an empty name would silently become the file's: say so instead
        raise click.BadParameter(
            "must not be empty (leave --name out to use the file's name)", param_hint="--name"
        )
    if show_logs and not wait:
        raise click.UsageError("--logs needs --wait")
    if wait and output != "table":
        raise click.UsageError("--wait prints stage changes as text; it takes no -o")
    # like the real CLI, a workflow is named after its file unless --name says otherwise
    reply = state.api.start_workflow_reply(text, name=name or file.name)
    workflow_id = reply.id
    for warning in reply.warnings:
        click.echo(f"warning: {printable(warning)}", err=True)
    if output != "table":
        emit(reply, output)
        return
    click.echo(f'Workflow "{workflow_id}" started.')
    if wait:
        final = _wait_for_end(state, workflow_id)
        click.echo(ended_workflow(state.api.get_workflow(workflow_id)))
        if show_logs:
            _print_job_logs(state, workflow_id)
        if final != Status.FINISHED:
            sys.exit(1)


def _print_job_logs(state: CliState, workflow_id: str) -> None:
    """Each job's output under a ``==> jobs.NAME <==`` header, as ``tail`` shows files."""
    workflow = state.api.get_workflow(workflow_id)
    for stage in workflow.jobs:
        name = stage.name
        if not name.startswith("jobs."):
            continue
        click.echo(f"==> {name} <==")
        for chunk in state.api.stream_logs(workflow_id, name, follow=False):
            click.echo(
                chunk.output.decode("utf-8", errors="replace"),
                nl=False,
                err=chunk.stream == "stderr",
            )


def _wait_for_end(state: CliState, workflow_id: str) -> Status:
    """Print each stage status change, image stages' progress and why a stage waits for a
    node, until the workflow ends; return its final status."""
    seen: dict[str, str] = {}
    events = _EventCursor(state, workflow_id)
    blocked = BlockedReasons()
    # stdout keeps the article's lines (started, then the ended workflow); progress is stderr's
    with ImageProgress(err=True) as progress:
        while True:
            reply = state.api.workflow_status(workflow_id)
            changes = []
            for stage in reply.status.stages:
                current = status_name(stage.status)
                if seen.get(stage.name) != current:
                    seen[stage.name] = current
                    said = stage.error or stage.details.message
                    message = f" ({said})" if said else ""
                    changes.append((current, f"{stage.name}: {current}{message}"))
            # a stage's progress comes after it started and before it ended
            for line in (line for current, line in changes if not current.terminal):
                progress.echo(line)
            recorded = events.new()
            progress.feed(recorded)
            for line in blocked.lines(recorded):
                progress.echo(line)
            for line in (line for current, line in changes if current.terminal):
                progress.echo(line)
            final = status_name(reply.workflow_status)
            if final.terminal:
                error = f": {reply.error}" if reply.error else ""
                progress.echo(f'Workflow "{workflow_id}" {final.lower()}{error}.')
                return final
            time.sleep(WAIT_POLL_INTERVAL)


class BlockedReasons:
    """Why stages wait for placement, from ``scheduling_blocked`` events: a line each time a
    stage's reason changes (the same reason again says nothing new), so a wait for a node
    never looks like a hang."""

    def __init__(self) -> None:
        #: the reason last shown, by stage
        self._shown: dict[str, str] = {}

    def lines(self, events: Sequence[pb.WorkflowEvent]) -> list[str]:
        """The lines to print for ``events`` (other kinds of event are left out)."""
        lines = []
        for event in events:
            if event.kind != EventKind.SCHEDULING_BLOCKED:
                continue
            if self._shown.get(event.stage_name) != event.message:
                self._shown[event.stage_name] = event.message
                lines.append(f"waiting: {event.message}")
        return lines


class _EventCursor:
    """A workflow's events, each handed out once."""

    def __init__(self, state: CliState, workflow_id: str) -> None:
        self.state = state
        self.workflow_id = workflow_id
        self.after = 0

    def new(self) -> list[pb.WorkflowEvent]:
        """The events recorded since the last call."""
        events = self.state.api.list_events(self.workflow_id, after_seq=self.after)
        if events:
            self.after = max(e.seq for e in events)
        return events


def stage_status_word(value: int) -> str:
    """``STAGE_STATUS_FINISHED`` -> ``Finished``, as the real CLI's tables show statuses."""
    return status_name(value).capitalize()


def article_time(message: Message, field: str) -> str:
    """A ``Timestamp`` field as the real CLI shows it (``2024-11-14 04:05:03AM``, UTC);
    empty when unset."""
    when = moment(message, field)
    return "" if when is None else when.strftime("%Y-%m-%d %I:%M:%S%p")


#: the prefixes of stage names that the ended workflow's Stages table leaves out
_STAGE_PREFIXES = ("jobs.", "images.", "volumes.", "services.")


def ended_workflow(workflow: pb.Workflow) -> str:
    """The lines ``workflow start --wait`` prints once the workflow ends, as the real CLI
    does: who started it, its status, its cluster, its times and error, then its stages
    (the workflow itself first, then each image, volume and job by name)."""
    header = [
        ("Name", workflow.name),
        ("Email", workflow.email),
        ("UserId", workflow.user_id),
        ("Status", pb.WorkflowStatus.Name(workflow.status)),
        ("Cluster", workflow.cluster_name),
        ("Created", article_time(workflow, "create_time")),
        ("Started", article_time(workflow, "start_time")),
        ("Finished", article_time(workflow, "end_time")),
        ("Error", workflow.error),
    ]
    if workflow.status_reason:
        header.insert(4, ("Reason", workflow.status_reason))
    lines = [f"{label}: {printable(value)}".rstrip() for label, value in header]
    rows = [
        [
            "Workflow",
            stage_status_word(workflow.status),
            workflow.id,
            article_time(workflow, "create_time"),
            article_time(workflow, "end_time"),
        ]
    ]
    for stage in workflow.jobs:
        name = stage.name
        for prefix in _STAGE_PREFIXES:
            name = name.removeprefix(prefix)
        rows.append(
            [
                kind_name(stage.kind),
                stage_status_word(stage.status),
                name,
                article_time(stage, "start_time"),
                article_time(stage, "end_time"),
            ]
        )
    lines += ["Stages:", format_table(_STAGE_HEADERS, rows)]
    return "\n".join(lines)


@click.command("list")
@click.option(
    "-t",
    "--tail",
    "tail",
    type=click.IntRange(min=1),
    default=None,
    help="Only the newest N workflows.",
)
@output_option
@click.pass_obj
def list_workflows(state: CliState, tail: int | None, output: str) -> None:
    """List your workflows, newest first: who started each, its status and its cluster."""
    workflows = state.api.list_workflows()
    if tail is not None:
        workflows = workflows[:tail]
    rows = [[w.id, w.name, w.email, stage_status_word(w.status), w.cluster_name] for w in workflows]
    emit(workflows, output, headers=["ID", "NAME", "EMAIL", "STATUS", "CLUSTER"], rows=rows)


@click.command("describe")
@click.argument("workflow_id", metavar="ID")
@output_option
@click.pass_obj
def describe(state: CliState, workflow_id: str, output: str) -> None:
    """Show a workflow and every one of its stages.

    The workflow's annotations are shown under its header and, once some stage's containers
    were metered, the bytes each stage received and sent (every run and task summed).
    """
    workflow = state.api.get_workflow(workflow_id)
    if output != "table":
        emit(workflow, output)
        return
    header = [
        ("Name", workflow.name),
        ("ID", workflow.id),
        ("Status", status_name(workflow.status)),
        ("Created", short_time(workflow, "create_time")),
        ("Started", short_time(workflow, "start_time")),
        ("Finished", short_time(workflow, "end_time")),
    ]
    if workflow.error:
        header.append(("Error", workflow.error))
    if workflow.annotations:
        shown = ", ".join(
            f"{key}={workflow.annotations[key]}" for key in sorted(workflow.annotations)
        )
        header.append(("Annotations", shown))
    for label, value in header:
        click.echo(f"{label + ':':<9} {printable(value)}")  # a longer label gets its space
    click.echo()
    headers, rows = _STAGE_HEADERS, _stage_rows(workflow.jobs)
    if any(stage.details.HasField("metering") for stage in workflow.jobs):
        headers = headers + _TRAFFIC_HEADERS
        rows = [row + _traffic_cells(stage) for row, stage in zip(rows, workflow.jobs, strict=True)]
    click.echo(format_table(headers, rows))


@click.command("status")
@click.argument("workflow_id", metavar="ID")
@output_option
@click.pass_obj
def status(state: CliState, workflow_id: str, output: str) -> None:
    """Show a workflow's status and its stages' statuses."""
    reply = state.api.workflow_status(workflow_id)
    if output != "table":
        emit(reply, output)
        return
    error = f" ({printable(reply.error)})" if reply.error else ""
    click.echo(f"Workflow {workflow_id}: {status_name(reply.workflow_status)}{error}")
    click.echo(format_table(_STAGE_HEADERS, _stage_rows(reply.status.stages)))


@click.command("logs")
@click.argument("workflow_id", metavar="ID")
@click.argument("job")
@click.option("-f", "--follow", is_flag=True, help="Keep printing output until the workflow ends.")
@click.option(
    "--task",
    "task_id",
    type=click.IntRange(min=0),
    default=None,
    help="Only this task of a task array.",
)
@click.pass_obj
def logs(state: CliState, workflow_id: str, job: str, follow: bool, task_id: int | None) -> None:
    """Print the output of JOB in a workflow (stderr lines go to stderr).

    For an image stage (``images.URI`` or ``images.NAME``) its pull, conversion and upload
    progress comes first, on stderr; with ``--follow`` a job waiting for its images shows
    theirs until it starts.
    """
    if job.startswith(IMAGE_STAGE_PREFIX) or follow:
        _show_image_progress(state, workflow_id, job, follow)
    for chunk in state.api.stream_logs(workflow_id, job, follow=follow, task_id=task_id):
        stream = sys.stderr if chunk.stream == "stderr" else sys.stdout
        click.echo(
            chunk.output.decode("utf-8", errors="replace"), nl=False, err=stream is sys.stderr
        )


def _show_image_progress(state: CliState, workflow_id: str, job: str, follow: bool) -> None:
    """Image progress on stderr: the named image stage's, or (following a job) every image
    stage's while the job waits; recorded events only, unless ``follow``."""
    events = _EventCursor(state, workflow_id)
    own = job.startswith(IMAGE_STAGE_PREFIX)

    def relevant(event: pb.WorkflowEvent) -> bool:
        return event.stage_name == job if own else True

    with ImageProgress(err=True) as progress:
        while True:
            stages = {
                s.name: status_name(s.status)
                for s in state.api.workflow_status(workflow_id).status.stages
            }
            progress.feed(e for e in events.new() if relevant(e))
            if not follow:
                return
            if own:
                waiting = stages.get(job, Status.FINISHED) not in TERMINAL_STATUSES
            else:
                pulling = any(
                    name.startswith(IMAGE_STAGE_PREFIX) and not status.terminal
                    for name, status in stages.items()
                )
                stage = job if job in stages else f"jobs.{job}"
                waiting = stages.get(stage) == Status.PENDING and pulling
            if not waiting:
                progress.feed(e for e in events.new() if relevant(e))
                return
            time.sleep(WAIT_POLL_INTERVAL)


@click.command("events")
@click.argument("workflow_id", metavar="ID")
@output_option
@click.pass_obj
def events(state: CliState, workflow_id: str, output: str) -> None:
    """List a workflow's recorded events, oldest first."""
    recorded = state.api.list_events(workflow_id)
    rows = [[short_time(e, "time"), e.kind, e.stage_name, e.message] for e in recorded]
    emit(recorded, output, headers=["TIME", "KIND", "STAGE", "MESSAGE"], rows=rows)


@click.command("stop")
@click.argument("workflow_id", metavar="ID")
@click.pass_obj
def stop(state: CliState, workflow_id: str) -> None:
    """Stop a workflow: every stage not yet finished is canceled."""
    note = state.api.stop_workflow(workflow_id)
    if note:  # recorded, not yet done (a Federate whose member does not answer)
        click.echo(f'Workflow "{workflow_id}": {note}')
    else:
        click.echo(f'Workflow "{workflow_id}" stopped.')


#: Stage kinds whose waiting is decided by the scheduler, so an estimated start applies.
_SCHEDULED_KINDS = frozenset({pb.STAGE_KIND_JOB, pb.STAGE_KIND_SERVICE})


def duration_words(seconds: float) -> str:
    """``45s``, ``4m``, ``2h 5m``, ``3d 4h``: the two largest units, rounded down."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 3600:
        return f"{minutes}m"
    if seconds < 86400:
        return f"{hours}h {minutes % 60}m" if minutes % 60 else f"{hours}h"
    return f"{days}d {hours % 24}h" if hours % 24 else f"{days}d"


def estimated_start(when: datetime | None, now: datetime | None = None) -> str:
    """``estimated start in 4m (2026-12-02T15:30:00Z)``, or ``no estimate`` when unset."""
    if when is None:
        return "no estimate"
    shown = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    remaining = (when - (now or datetime.now(UTC))).total_seconds()
    soon = f"in {duration_words(remaining)}" if remaining >= 1 else "now"
    return f"estimated start {soon} ({shown})"


#: Reasons of a pending stage that the scheduler has already placed.
_PLACED_REASONS = frozenset({"STARTING", "RUNNING"})


def _waits_for_placement(stage: pb.StageExplanation) -> bool:
    """A pending job or service not yet placed: the stages an estimated start is for."""
    return (
        stage.kind in _SCHEDULED_KINDS
        and status_name(stage.status) == Status.PENDING
        and stage.reason not in _PLACED_REASONS
    )


@click.command("why")
@click.argument("workflow_id", metavar="ID")
@click.option("--all", "include_finished", is_flag=True, help="Include finished stages too.")
@output_option
@click.pass_obj
def why(state: CliState, workflow_id: str, include_finished: bool, output: str) -> None:
    """Explain why each stage still waiting is where it is, in describe order.

    Pending jobs show the scheduler's reason and the earliest start it estimates.
    """
    stages = state.api.explain_workflow(workflow_id, include_finished=include_finished)
    headers = ["STAGE", "STATUS", "REASON", "DETAILS"]
    rows = [[s.stage_name, status_name(s.status), s.reason, s.message] for s in stages]
    if any(_waits_for_placement(s) for s in stages):
        headers.append("ESTIMATED START")
        for row, stage in zip(rows, stages, strict=True):
            pending = _waits_for_placement(stage)
            row.append(estimated_start(moment(stage, "estimated_start_time")) if pending else "")
    if output == "table" and not stages:
        click.echo(f"No stage of workflow {workflow_id} is waiting (--all shows every stage).")
        return
    emit(stages, output, headers=headers, rows=rows)
