"""``fuzzball node list|show``: the compute nodes registered with the active context's API."""

from __future__ import annotations

from typing import Any

import click

from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, format_table, output_option


def register(group: click.Group) -> None:
    """Add the node commands to the ``node`` group."""
    group.add_command(list_nodes)
    group.add_command(show_node)


def _devices(resource: dict[str, Any]) -> str:
    devices = resource.get("devices") or {}
    return ", ".join(f"{kind}={count}" for kind, count in sorted(devices.items()))


@click.command("list")
@output_option
@click.pass_obj
def list_nodes(state: CliState, output: str) -> None:
    """List every node with its capacity and running jobs."""
    nodes = state.api.list_nodes()
    rows = []
    for node in nodes:
        total = node.get("resource", {}).get("total", {})
        rows.append(
            [
                node["id"],
                node.get("hostName", ""),
                node.get("status", ""),
                node.get("cores", 0),
                f"{node.get('memoryGb', 0):g} GiB",
                _devices(total),
                node.get("runningJobs", 0),
            ]
        )
    emit(
        nodes,
        output,
        headers=["ID", "NAME", "STATUS", "CORES", "MEMORY", "DEVICES", "RUNNING JOBS"],
        rows=rows,
    )


@click.command("show")
@click.argument("node_id", metavar="ID")
@output_option
@click.pass_obj
def show_node(state: CliState, node_id: str, output: str) -> None:
    """Show one node (by id or name): capacity, use, annotations and running jobs."""
    node = state.api.get_node(node_id)
    if output != "table":
        emit(node, output)
        return
    summary = node.get("resourceSummary", {})
    resource = node.get("resource", {})
    lines = [
        ("Name", node.get("hostName", "")),
        ("ID", node["id"]),
        ("Status", node.get("status", "")),
        ("Cores", f"{summary.get('allocatedCores', 0)} of {summary.get('totalCores', 0)} used"),
        (
            "Memory",
            f"{summary.get('allocatedMemoryGb', 0):g} of "
            f"{summary.get('totalMemoryGb', 0):g} GiB used",
        ),
        ("Devices", _devices(resource.get("total", {})) or "none"),
        (
            "Annotations",
            ", ".join(f"{k}={v}" for k, v in sorted((resource.get("annotations") or {}).items()))
            or "none",
        ),
        ("Last seen", (node.get("lastSeen") or "").replace("T", " ")[:19]),
    ]
    for label, value in lines:
        click.echo(f"{label + ':':<13}{value}")
    running = node.get("runningJobs", [])
    if running:
        click.echo()
        click.echo(
            format_table(
                ["WORKFLOW", "JOB"],
                [[r.get("workflowId", ""), r.get("jobName", "")] for r in running],
            )
        )
