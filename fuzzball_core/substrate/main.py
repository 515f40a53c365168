"""The ``fuzzball-substrate`` command: run the node agent until SIGTERM/SIGINT.

``fuzzball-substrate --config FILE`` (``serve`` is the default command) reads the
``substrate`` and ``images`` sections, sweeps what a crashed agent left in its work directory,
registers with Orchestrate and runs the jobs it is given. It exits 0 on SIGTERM/SIGINT, and
when Orchestrate deprovisions the node (a ``Shutdown`` once the node is empty; the log says
so). A bad configuration, a missing required plugin, a missing node token or a host that
cannot guard its jobs from the instance metadata (``substrate.metadata-guard``, on by
default: :func:`fuzzball_runtime.check_metadata_guard`) refuses to start with exit code 2.
Its health is served beside its metrics on ``substrate.metrics-listen``: ``/healthz``, and
``/readyz`` (ready once registered and its stream to Orchestrate is up).
"""

from __future__ import annotations

import logging
import warnings

import click
import uvloop

from fuzzball_core.config import ConfigError
from fuzzball_core.console import (
    run_console_script,
    serve_until_signalled,
    settle_startup_objects,
)
from fuzzball_core.errors import FuzzballError
from fuzzball_core.plugins import PluginLoadError
from fuzzball_core.startup import prepare_process
from fuzzball_core.substrate.agent import Agent, check_settings
from fuzzball_runtime import RuntimeWarningMessage


class _StartRefused(Exception):
    """The agent cannot start with this configuration (exit code 2)."""


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_file",
    envvar="FUZZBALL_CONFIG",
    type=click.Path(dir_okay=False),
    help="Configuration file.",
)
@click.pass_context
def cli(ctx: click.Context, config_file: str | None) -> None:
    """Fuzzball Substrate: the node agent."""
    ctx.obj = config_file
    if ctx.invoked_subcommand is None:
        ctx.invoke(serve)


@cli.command("serve")
@click.pass_obj
def serve(config_file: str | None) -> None:
    """Register with Orchestrate and run assigned jobs until SIGTERM/SIGINT or until
    Orchestrate deprovisions this node."""
    try:
        context = prepare_process("substrate", config_file)
        check_settings(context.config)
    except (ConfigError, PluginLoadError, FuzzballError) as exc:
        raise _StartRefused(exc.message) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per registry request
    # The executor logs each container's runtime warnings with its run id.
    warnings.filterwarnings("ignore", category=RuntimeWarningMessage)
    agent = Agent(context.config, context.registry)
    settle_startup_objects()

    # On uvloop: the loop's own work (call_soon, handles, the selector, futures) runs in C
    # there, and an array's jobs are mostly such turns (bench/e2e.py's array: the agents'
    # CPU per job about 0.15 ms lower than on asyncio's loop, docs/performance.md).
    serve_until_signalled(lambda stop: agent.run(stop), run=uvloop.run)


def main(argv: list[str] | None = None) -> None:
    """``fuzzball-substrate``."""
    run_console_script(
        cli, "fuzzball-substrate", argv, service=True, startup_errors=(_StartRefused,)
    )
