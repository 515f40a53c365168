"""Root of the ``fuzzball`` CLI: the real CLI's nouns, each a click group.

Every command runs inside :func:`main`, which turns a :class:`FuzzballError` into one line on
stderr and an exit code (2 for configuration and plugin problems, 1 otherwise) instead of a
traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import click

from fuzzball_core import __version__
from fuzzball_core.cli import (
    cluster_cmd,
    context_cmd,
    endpoint_cmd,
    local_cmd,
    node_cmd,
    volume_cmd,
    workflow_remote_cmd,
)
from fuzzball_core.cli.admin_cmd import admin
from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.cli.plugin_cmd import plugin
from fuzzball_core.cli.secret_cmd import secret
from fuzzball_core.cli.workflow_cmd import EXTRA_VALIDATORS_KEY, workflow
from fuzzball_core.console import run_console_script


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_file",
    envvar="FUZZBALL_CONFIG",
    type=click.Path(dir_okay=False),
    help="Configuration file shared by every Fuzzball process (also $FUZZBALL_CONFIG).",
)
@click.pass_context
def cli(ctx: click.Context, config_file: str | None) -> None:
    """Fuzzball: describe containerized HPC and AI/ML workflows once, run them anywhere."""
    ctx.obj = CliState(config_file)
    ctx.meta[EXTRA_VALIDATORS_KEY] = _PluginValidators(ctx.obj)


class _PluginValidators:
    """The plugins' workflow validators, loaded only when a command iterates over them."""

    def __init__(self, state: CliState) -> None:
        self._state = state

    def __iter__(self) -> Iterator[Any]:
        return iter(self._state.registry.workflow_validators("fuzzball workflow validate"))


@cli.command()
@output_option
def version(output: str) -> None:
    """Show the version of this CLI."""
    data = {"version": __version__, "python": sys.version.split()[0]}
    emit(data, output, headers=["CLIENT VERSION", "PYTHON"], rows=[[__version__, data["python"]]])


@cli.group()
def context() -> None:
    """Manage API contexts (address and credentials) in ~/.config/fuzzball/config.yaml."""


@cli.group()
def node() -> None:
    """Inspect and manage compute nodes."""


@cli.group()
def cluster() -> None:
    """Inspect the member clusters of a Federate deployment."""


@cli.group()
def endpoint() -> None:
    """Service endpoints: persistent URLs for workflow services, and running workflows'."""


@cli.group()
def volume() -> None:
    """Volumes: persistent storage workflows refer to as volume://SCOPE/CLASS/NAME."""


@cli.group()
def local() -> None:
    """Run the embedded single-machine deployment (Orchestrate + one Substrate)."""


cli.add_command(admin)
cli.add_command(plugin)
cli.add_command(secret)
cli.add_command(workflow)
cluster_cmd.register(cluster)
context_cmd.register(context)
node_cmd.register(node)
endpoint_cmd.register(endpoint)
volume_cmd.register(volume)
endpoint_cmd.register_workflow_alias(workflow)
local_cmd.register(local)
workflow_remote_cmd.register(workflow)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    run_console_script(cli, "fuzzball", argv)
