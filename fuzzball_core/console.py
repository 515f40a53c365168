"""Running a click group as a console script: exit codes and one-line errors, no traceback.

Every Fuzzball command (``fuzzball``, ``fuzzball-orchestrate``, ``fuzzball-substrate``) ends
the same way: a :class:`FuzzballError` becomes one line on stderr; configuration and plugin
problems that stop a process from starting exit 2, other errors 1; a command's own
``ctx.exit(n)`` is kept.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NoReturn

import click

from fuzzball_core.config import ConfigError
from fuzzball_core.errors import FuzzballError
from fuzzball_core.plugins import PluginLoadError
from fuzzball_core.spec.names import printable

#: errors that mean "this process may not start" (exit code 2)
STARTUP_ERRORS: tuple[type[FuzzballError], ...] = (ConfigError, PluginLoadError)


def run_console_script(
    group: click.Group,
    prog_name: str,
    argv: list[str] | None = None,
    *,
    service: bool = False,
    startup_errors: tuple[type[BaseException], ...] = STARTUP_ERRORS,
) -> NoReturn:
    """Run ``group`` and exit. ``service`` processes prefix errors with their name and say
    ``cannot start`` for start-up errors; the user CLI prints ``Error: ...``."""
    try:
        # without standalone mode, click returns ctx.exit()'s code instead of exiting
        code = group.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except startup_errors as exc:
        text = getattr(exc, "message", str(exc))
        prefix = f"{prog_name}: cannot start: " if service else "Error: "
        click.echo(f"{prefix}{text}", err=True)
        sys.exit(2)
    except FuzzballError as exc:
        prefix = f"{prog_name}: " if service else "Error: "
        # the message may come from a server: nothing in it may drive the terminal
        click.echo(f"{prefix}{printable(exc.message, keep_newlines=True)}", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def serve_until_signalled(
    serve: Callable[[asyncio.Event], Awaitable[None]],
    run: Callable[[Coroutine[Any, Any, None]], None] = asyncio.run,
) -> None:
    """Run ``serve(stop)`` on a new event loop made by ``run`` (asyncio's own, or e.g.
    ``uvloop.run``); SIGTERM or SIGINT sets ``stop``."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(stop)

    run(main())


def settle_startup_objects() -> None:
    """Leave what a service's start-up made (modules, plugins, configuration, the agent or
    Orchestrate's wiring) out of the garbage collector's full collections: it lives as long
    as the process. In a 2,000-task array a full collection in an agent walked all of it,
    about 0.1 s of CPU with the event loop stalled meanwhile; after this it walks the
    objects of the work alone. Call it once, just before serving, in a process of its own
    (never in a test process hosting many services: frozen objects are never collected)."""
    gc.collect()  # what start-up already dropped is not kept forever
    gc.freeze()
