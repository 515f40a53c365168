"""``fuzzball local up|down|status``: the embedded single-machine deployment."""

from __future__ import annotations

import click

from fuzzball_core.cli import local as deployment
from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, output_option


def register(group: click.Group) -> None:
    """Add the local deployment's commands to the ``local`` group."""
    group.add_command(up)
    group.add_command(down)
    group.add_command(status)


@click.command()
@click.option(
    "--timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds to wait for the node to become ready.",
)
@click.pass_obj
def up(state: CliState, timeout: float) -> None:
    """Start Orchestrate (SQLite) and one Substrate here, and wait until the node is ready."""
    where = deployment.up(state.config_file, timeout=timeout)
    click.echo(
        f"Fuzzball is up: API {where['api']} (context {where['context']!r},"
        f" node {', '.join(where['nodes'])})"
    )
    click.echo(f"  data:   {where['data']}")
    click.echo(f"  config: {where['config']}")
    for process, log in where["logs"].items():
        click.echo(f"  {process} log: {log}")


@click.command()
@click.pass_obj
def down(state: CliState) -> None:
    """Stop the local Substrate and Orchestrate."""
    stopped = deployment.down(state.config_file)
    click.echo(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")


@click.command()
@output_option
@click.pass_obj
def status(state: CliState, output: str) -> None:
    """Show whether the local processes run and are ready, their health conditions (a
    failing one with its reason), and where their logs are."""
    report = deployment.status(state.config_file)
    rows = [
        [
            name,
            "running" if info["running"] else "stopped",
            {True: "yes", False: "no", None: "unknown"}[info["ready"]],
            info["pid"] or "",
            ", ".join(
                condition["name"]
                if condition["ok"]
                else f"{condition['name']}: {condition['message']}"
                for condition in info["conditions"]
            )
            or info.get("problem", ""),
            info["log"],
        ]
        for name, info in report.items()
    ]
    emit(
        report, output, headers=["PROCESS", "STATE", "READY", "PID", "CONDITIONS", "LOG"], rows=rows
    )
