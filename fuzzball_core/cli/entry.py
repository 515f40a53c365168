"""The ``fuzzball`` console script's entry point.

It imports nothing of the CLI at module level: the CLI's imports (click, httpx, protobuf,
rich) take a second or two, and a Ctrl-C during them, before
:func:`fuzzball_core.console.run_console_script` handles interrupts, would print a Python
traceback. Here an interrupt at any moment prints ``Aborted.`` and exits 130, as one while a
command runs does.
"""

from __future__ import annotations

import importlib
import sys

#: the module holding the CLI's own ``main``
CLI_MODULE = "fuzzball_core.cli.main"


def main() -> None:
    """Import the CLI and run it; Ctrl-C while it loads is ``Aborted.``, not a traceback."""
    try:
        importlib.import_module(CLI_MODULE).main()
    except KeyboardInterrupt:
        sys.stderr.write("Aborted.\n")
        sys.exit(130)
