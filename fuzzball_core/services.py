"""Entry points of the long-running services; each lands with its own issue."""

from __future__ import annotations

import sys


def _not_yet(name: str) -> int:
    print(f"{name}: not available yet", file=sys.stderr)
    return 2


def orchestrate_main() -> int:
    """``fuzzball-orchestrate``."""
    return _not_yet("fuzzball-orchestrate")


def substrate_main() -> int:
    """``fuzzball-substrate``."""
    return _not_yet("fuzzball-substrate")


def federate_main() -> int:
    """``fuzzball-federate``."""
    return _not_yet("fuzzball-federate")
