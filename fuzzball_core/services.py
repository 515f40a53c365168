"""Entry points of the long-running services; each lands with its own issue."""

from __future__ import annotations

import sys


def _not_yet(name: str) -> int:
    print(f"{name}: not available yet", file=sys.stderr)
    return 2


def federate_main() -> int:
    """``fuzzball-federate``."""
    return _not_yet("fuzzball-federate")
