"""``fuzzball plugin``: what is installed, and whether a process's plugins load."""

from __future__ import annotations

import click

from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.plugins import DRIVER_GROUPS, HOOK_GROUP, KIND_OF_GROUP
from fuzzball_core.startup import PROCESSES, prepare_process


@click.group()
def plugin() -> None:
    """List installed plugins and check the ones a process needs."""


@plugin.command("list")
@output_option
@click.pass_obj
def list_plugins(state: CliState, output: str) -> None:
    """List every driver (by kind) and hook plugin, with its distribution and status."""
    registry = state.registry
    drivers = {
        KIND_OF_GROUP[group]: [r.to_dict() for r in registry.records if r.group == group]
        for group in DRIVER_GROUPS
    }
    hooks = [r.to_dict() for r in registry.records if r.group == HOOK_GROUP]
    rows = [
        [r.kind, r.name, r.distribution, r.version, r.status, ", ".join(r.hooks) or r.value]
        for group in (*DRIVER_GROUPS, HOOK_GROUP)
        for r in registry.records
        if r.group == group
    ]
    emit(
        {"drivers": drivers, "hooks": hooks},
        output,
        headers=["KIND", "NAME", "DISTRIBUTION", "VERSION", "STATUS", "PROVIDES"],
        rows=rows,
    )
    if output == "table":
        for record in registry.broken():
            click.echo(
                f"broken: {record.kind} {record.name!r} from {record.distribution}"
                f" ({record.group}: {record.value}): {record.error}",
                err=True,
            )


@plugin.command("check")
@click.option(
    "--process",
    type=click.Choice(PROCESSES),
    default="cli",
    show_default=True,
    help="Check the plugins this process needs.",
)
@click.pass_obj
def check_plugins(state: CliState, process: str) -> None:
    """Load everything PROCESS needs, exactly as it does at start-up; exit 2 if it cannot."""
    context = prepare_process(process, state.config_file)
    names = ", ".join(f"{r.kind} {r.name}" for r in context.required) or "no plugins"
    click.echo(f"{process}: ready ({names})")
