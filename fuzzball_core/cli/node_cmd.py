"""``fuzzball node ...``: the compute nodes registered with the active context's API.

``list`` and ``show`` read nodes; ``hold list|add|release`` is the general interface to the
holds on a node, and ``cordon``, ``uncordon``, ``evict``, ``deprovision`` and ``remove`` are
the everyday shortcuts over it. A hold is attributed by the server from the caller's identity
(admin, monitoring or provisioner); ``uncordon`` releases admin cordon holds only, so it never
clears what monitoring or the provisioner placed.

Commands given several nodes look every one of them up before changing anything, so that a
mistyped name changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import click

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, format_table, output_option, printable, short_time
from fuzzball_core.client import FuzzballClient
from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.scheduling import HoldEffect
from fuzzball_core.vocabulary import NodeStatus

#: Seconds between two looks at the nodes ``deprovision`` waits for.
DEPROVISION_POLL_INTERVAL = 1.0
#: What a hold can do to its node.
HOLD_EFFECTS = tuple(effect.value for effect in HoldEffect)
#: Node statuses (besides READY) that the commands act on.
OFFLINE = NodeStatus.OFFLINE
DEPROVISIONED = NodeStatus.DEPROVISIONED

_HOLD_HEADERS = ["ID", "EFFECT", "SOURCE", "REASON", "PLACED BY", "PLACED"]
_REASON_OPTION = click.option(
    "--reason", default="", help="Why, recorded with the hold and shown by node show."
)


def register(group: click.Group) -> None:
    """Add the node commands to the ``node`` group."""
    for command in (
        list_nodes,
        show_node,
        node_events,
        hold,
        cordon,
        uncordon,
        evict,
        deprovision,
        remove,
    ):
        group.add_command(command)


# -- presentation -----------------------------------------------------------------------------


def hold_labels(holds: Sequence[pb.NodeHold]) -> str:
    """``cordon(admin), evict(monitoring)``: each distinct effect and source once, in the
    order placed; ``-`` when the node carries no hold."""
    labels = dict.fromkeys(f"{h.effect or '?'}({h.source or '?'})" for h in holds)
    return ", ".join(labels) or "-"


def _hold_rows(holds: Sequence[pb.NodeHold]) -> list[list[object]]:
    return [
        [h.id, h.effect, h.source, h.reason, h.placed_by, short_time(h, "place_time")]
        for h in holds
    ]


def _devices(resource: pb.Resource) -> str:
    return ", ".join(f"{kind}={count}" for kind, count in sorted(resource.devices.items()))


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


# -- reading nodes ----------------------------------------------------------------------------


@click.command("list")
@output_option
@click.pass_obj
def list_nodes(state: CliState, output: str) -> None:
    """List every node with its capacity, running jobs and holds."""
    nodes = state.api.list_nodes()
    rows = []
    for node in nodes:
        rows.append(
            [
                node.id,
                node.host_name,
                node.status,
                node.cores,
                f"{node.memory_gb:g} GiB",
                _devices(node.resource.total),
                node.running_jobs,
                hold_labels(node.holds),
            ]
        )
    emit(
        nodes,
        output,
        headers=["ID", "NAME", "STATUS", "CORES", "MEMORY", "DEVICES", "RUNNING JOBS", "HOLDS"],
        rows=rows,
    )


@click.command("show")
@click.argument("node_id", metavar="NODE")
@output_option
@click.pass_obj
def show_node(state: CliState, node_id: str, output: str) -> None:
    """Show one node (by id or name): capacity, use, annotations, holds and running jobs."""
    node = state.api.get_node(node_id)
    if output != "table":
        emit(node, output)
        return
    summary, resource, holds = node.resource_summary, node.resource, node.holds
    lines = [
        ("Name", node.host_name),
        ("ID", node.id),
        ("Status", node.status),
        ("Cores", f"{summary.allocated_cores} of {summary.total_cores} used"),
        (
            "Memory",
            f"{summary.allocated_memory_gb:g} of {summary.total_memory_gb:g} GiB used",
        ),
        ("Devices", _devices(resource.total) or "none"),
        (
            "Annotations",
            ", ".join(f"{k}={v}" for k, v in sorted(resource.annotations.items())) or "none",
        ),
        ("Holds", hold_labels(holds) if holds else "none"),
        ("Last seen", short_time(node, "last_seen")),
    ]
    for label, value in lines:
        click.echo(f"{label + ':':<13}{printable(value)}")
    if holds:
        click.echo()
        click.echo(format_table(_HOLD_HEADERS, _hold_rows(holds)))
    running = node.running_jobs
    if running:
        click.echo()
        click.echo(
            format_table(["WORKFLOW", "JOB"], [[r.workflow_id or "-", r.job_name] for r in running])
        )


def _running_label(job: pb.RunningJob) -> str:
    """``WORKFLOW/JOB`` of the caller's own work; another account's is only "in use"."""
    return f"{job.workflow_id}/{job.job_name}" if job.workflow_id else job.job_name


# -- holds ------------------------------------------------------------------------------------


@click.group("hold")
def hold() -> None:
    """List, place and release holds on a node (cordon, evict, deprovision)."""


@hold.command("list")
@click.argument("node_id", metavar="NODE")
@output_option
@click.pass_obj
def list_holds(state: CliState, node_id: str, output: str) -> None:
    """List the holds on NODE, oldest first."""
    holds = state.api.list_holds(node_id)
    emit(holds, output, headers=_HOLD_HEADERS, rows=_hold_rows(holds))


@hold.command("add")
@click.argument("node_id", metavar="NODE")
@click.option(
    "--effect",
    type=click.Choice(HOLD_EFFECTS),
    required=True,
    help="cordon: no new work; evict: also take running work off; "
    "deprovision: no new work, tear the node down once empty.",
)
@_REASON_OPTION
@click.pass_obj
def add_hold(state: CliState, node_id: str, effect: str, reason: str) -> None:
    """Place a hold on NODE."""
    placed = state.api.add_hold(node_id, effect, reason)
    click.echo(f'Hold {placed.id} ({effect}, {placed.source or "?"}) placed on node "{node_id}".')


@hold.command("release")
@click.argument("node_id", metavar="NODE")
@click.argument("hold_id", metavar="HOLD_ID", type=click.IntRange(min=1))
@click.pass_obj
def release_hold(state: CliState, node_id: str, hold_id: int) -> None:
    """Release the hold HOLD_ID of NODE, whoever placed it."""
    state.api.release_hold(node_id, hold_id)
    click.echo(f'Hold {hold_id} released from node "{node_id}".')


def _look_up(api: FuzzballClient, node_ids: Sequence[str]) -> list[pb.GetNodeInfo]:
    """Every node named, before anything changes (``NotFound`` names the first unknown)."""
    return [api.get_node(node_id) for node_id in node_ids]


@click.command("cordon")
@click.argument("node_ids", metavar="NODE...", nargs=-1, required=True)
@_REASON_OPTION
@click.pass_obj
def cordon(state: CliState, node_ids: tuple[str, ...], reason: str) -> None:
    """Place no new work on each NODE (running work continues)."""
    _look_up(state.api, node_ids)
    for node_id in node_ids:
        state.api.add_hold(node_id, "cordon", reason)
        click.echo(f'Node "{node_id}" cordoned.')


@click.command("uncordon")
@click.argument("node_ids", metavar="NODE...", nargs=-1, required=True)
@click.pass_obj
def uncordon(state: CliState, node_ids: tuple[str, ...]) -> None:
    """Release the admin cordon holds of each NODE.

    Holds placed by monitoring or the provisioner, and evict or deprovision holds, stay; they
    are listed, with the command that releases one.
    """
    _look_up(state.api, node_ids)
    for node_id in node_ids:
        reply = state.api.uncordon(node_id)
        released = reply.released
        if released:
            click.echo(
                f'Node "{node_id}" uncordoned ({_plural(released, "admin cordon hold")} released).'
            )
        else:
            click.echo(f'Node "{node_id}" had no admin cordon hold.')
        remaining = reply.holds
        if remaining:
            click.echo(
                f'Node "{node_id}" is still held: uncordon releases admin cordon holds only.'
            )
            for left in remaining:
                reason = f": {left.reason}" if left.reason else ""
                click.echo(
                    f"  hold {left.id} {left.effect}({left.source}){reason}"
                    f" (release with: fuzzball node hold release {node_id} {left.id})"
                )


@click.command("evict")
@click.argument("node_ids", metavar="NODE...", nargs=-1, required=True)
@_REASON_OPTION
@click.pass_obj
def evict(state: CliState, node_ids: tuple[str, ...], reason: str) -> None:
    """Take running work off each NODE and place no new work there.

    A step declaring ``policy.retry.on: [node]`` is requeued elsewhere; anything else fails
    with the reason.
    """
    _look_up(state.api, node_ids)
    for node_id in node_ids:
        state.api.add_hold(node_id, "evict", reason)
        click.echo(f'Node "{node_id}" evicted.')


@click.command("deprovision")
@click.argument("node_ids", metavar="NODE...", nargs=-1)
@click.option("--evict", "evict_first", is_flag=True, help="Also take running work off now.")
@click.option(
    "--force",
    is_flag=True,
    help="Evict running work and return at once instead of waiting for the teardown.",
)
@click.option("--all", "all_nodes", is_flag=True, help="Deprovision every node.")
@_REASON_OPTION
@click.pass_obj
def deprovision(
    state: CliState,
    node_ids: tuple[str, ...],
    evict_first: bool,
    force: bool,
    all_nodes: bool,
    reason: str,
) -> None:
    """Tear each NODE down once it is empty, and wait until it is.

    No new work is placed on the node; running work finishes first unless --evict or --force
    takes it off. Without --force the command waits, printing progress, until every node is
    torn down (status DEPROVISIONED). A node holding node-local persistent volumes is refused
    (naming them; delete them first): the others still go, and the command then fails.
    """
    if all_nodes and node_ids:
        raise click.UsageError("give NODE names or --all, not both")
    if all_nodes:
        found = state.api.list_nodes()
        node_ids = tuple(n.host_name or n.id for n in found)
        statuses = [n.status for n in found]
    elif node_ids:
        statuses = [n.status for n in _look_up(state.api, node_ids)]
    else:
        raise click.UsageError("give at least one NODE, or --all")
    targets = []
    refused: list[str] = []
    for node_id, status in zip(node_ids, statuses, strict=True):
        if status == DEPROVISIONED:
            click.echo(f'Node "{node_id}" is already deprovisioned.')
            continue
        try:
            state.api.add_hold(node_id, "deprovision", reason)
        except FailedPrecondition as exc:
            # a node holding node-local volumes' only copy: the others still go
            click.echo(f'Node "{node_id}" is not deprovisioned: {exc.message}', err=True)
            refused.append(exc.message)
            continue
        if force or evict_first:
            state.api.add_hold(node_id, "evict", reason)
        if force:
            click.echo(f'Node "{node_id}" evicted and deprovisioning (forced; not waiting).')
        else:
            evicted = " and running work evicted" if evict_first else ""
            click.echo(f'Node "{node_id}": deprovision hold placed{evicted}.')
        targets.append(node_id)
    if not force:
        wait_until_deprovisioned(state.api, targets)
    if refused:
        raise FailedPrecondition("; ".join(refused))


def wait_until_deprovisioned(api: FuzzballClient, node_ids: Sequence[str]) -> None:
    """Poll until each node is torn down, printing what it still waits for when that changes.

    An offline node cannot be torn down from here: it is reported and no longer waited for
    (its deprovision hold stays, so it is torn down if it comes back empty).
    """
    progress: dict[str, str] = dict.fromkeys(node_ids, "")
    while progress:
        for node_id in list(progress):
            node = api.get_node(node_id)
            status = node.status
            if status == DEPROVISIONED:
                click.echo(f'Node "{node_id}" is empty and was torn down.')
                del progress[node_id]
                continue
            if status == OFFLINE:
                click.echo(
                    f'Node "{node_id}" is offline: not waiting for it; it is torn down if it '
                    "comes back empty."
                )
                del progress[node_id]
                continue
            running = node.running_jobs
            if running:
                jobs = ", ".join(_running_label(r) for r in running)
                line = (
                    f'Node "{node_id}": waiting for {_plural(len(running), "running job")}: {jobs}'
                )
            else:
                line = f'Node "{node_id}": empty; waiting for the teardown'
            if line != progress[node_id]:
                click.echo(printable(line))
                progress[node_id] = line
        if progress:
            time.sleep(DEPROVISION_POLL_INTERVAL)


@click.command("remove")
@click.argument("node_ids", metavar="NODE...", nargs=-1, required=True)
@click.pass_obj
def remove(state: CliState, node_ids: tuple[str, ...]) -> None:
    """Clear the record of each offline or deprovisioned NODE, releasing its holds (refused
    for a node holding node-local persistent volumes, naming them)."""
    nodes = _look_up(state.api, node_ids)
    up = [
        node_id
        for node_id, node in zip(node_ids, nodes, strict=True)
        if node.status not in (OFFLINE, DEPROVISIONED)
    ]
    if up:  # the server refuses these too; checking first leaves the others in place
        raise FailedPrecondition(
            f"{', '.join(up)} {'is' if len(up) == 1 else 'are'} still up: only offline or "
            "deprovisioned nodes can be removed (fuzzball node deprovision first)"
        )
    for node_id in node_ids:
        state.api.remove_node(node_id)
        click.echo(f'Node "{node_id}" removed.')


@click.command("events")
@click.argument("node_id", metavar="NODE")
@output_option
@click.pass_obj
def node_events(state: CliState, node_id: str, output: str) -> None:
    """List a node's events: registration, holds placed and released, allocations."""
    recorded = state.api.list_node_events(node_id)
    rows = [[short_time(e, "time"), e.kind, e.message] for e in recorded]
    emit(recorded, output, headers=["TIME", "KIND", "MESSAGE"], rows=rows)
