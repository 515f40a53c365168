"""Root of the ``fuzzball`` CLI: the real CLI's nouns, each a click group.

Every command runs inside :func:`main`, which turns a :class:`FuzzballError` into one line on
stderr and an exit code (2 for configuration and plugin problems, 1 otherwise) instead of a
traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from typing import Any

import click

from fuzzball_core import __version__
from fuzzball_core.cli import endpoint_cmd, workflow_remote_cmd
from fuzzball_core.cli.admin_cmd import admin
from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.image_references import image_reference_validator
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
    # a file named but missing is an error for every command, not for those that read it
    type=click.Path(dir_okay=False, exists=True),
    help="Configuration file shared by every Fuzzball process (also $FUZZBALL_CONFIG).",
)
@click.pass_context
def cli(ctx: click.Context, config_file: str | None) -> None:
    """Fuzzball: describe containerized HPC and AI/ML workflows once, run them anywhere."""
    ctx.obj = CliState(config_file)
    ctx.meta[EXTRA_VALIDATORS_KEY] = _PluginValidators(ctx.obj)


class DeferredGroup(click.Group):
    """A noun whose commands a module registers only once the noun is used: ``fuzzball
    --help`` or ``fuzzball workflow ...`` does not import what ``fuzzball local`` needs (the
    store, Alembic, the monitoring stack), so every command starts quickly."""

    def __init__(self, *args: Any, registrar: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: ``module:function`` called with this group to add its commands
        self.registrar = registrar
        self._registered = False

    def _register(self) -> None:
        if not self._registered:
            self._registered = True
            module, function = self.registrar.split(":")
            getattr(importlib.import_module(module), function)(self)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._register()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self._register()
        return super().get_command(ctx, cmd_name)


def _deferred(registrar: str) -> dict[str, Any]:
    return {"cls": DeferredGroup, "registrar": registrar}


class _PluginValidators:
    """The plugins' workflow validators and the image backends' offline reference check,
    loaded only when a command iterates over them."""

    def __init__(self, state: CliState) -> None:
        self._state = state

    def __iter__(self) -> Iterator[Any]:
        registry = self._state.registry
        yield from registry.workflow_validators("fuzzball workflow validate")
        images = self._state.config.images.model_dump(mode="json", by_alias=True)
        yield image_reference_validator(registry, images)


@cli.command()
@output_option
def version(output: str) -> None:
    """Show the version of this CLI."""
    data = {"version": __version__, "python": sys.version.split()[0]}
    emit(data, output, headers=["CLIENT VERSION", "PYTHON"], rows=[[__version__, data["python"]]])


@cli.group(**_deferred("fuzzball_core.cli.context_cmd:register"))
def context() -> None:
    """Manage API contexts (address and credentials) in ~/.config/fuzzball/config.yaml."""


@cli.group(**_deferred("fuzzball_core.cli.node_cmd:register"))
def node() -> None:
    """Inspect and manage compute nodes."""


@cli.group(**_deferred("fuzzball_core.cli.cluster_cmd:register"))
def cluster() -> None:
    """Inspect the member clusters of a Federate deployment."""


@cli.group()
def endpoint() -> None:
    """Service endpoints: persistent URLs for workflow services, and running workflows'."""


@cli.group(**_deferred("fuzzball_core.cli.volume_cmd:register"))
def volume() -> None:
    """Volumes: persistent storage workflows refer to as volume://SCOPE/CLASS/NAME."""


@cli.group(**_deferred("fuzzball_core.cli.local_cmd:register"))
def local() -> None:
    """Run the embedded single-machine deployment (Orchestrate + one Substrate)."""


cli.add_command(admin)
cli.add_command(plugin)
cli.add_command(secret)
cli.add_command(workflow)
endpoint_cmd.register(endpoint)
endpoint_cmd.register_workflow_alias(workflow)
workflow_remote_cmd.register(workflow)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    run_console_script(cli, "fuzzball", argv)
