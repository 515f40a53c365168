"""``fuzzball-runtime``: the node runtime's debug CLI (lands with the runtime issue)."""

from __future__ import annotations

import sys


def main() -> int:
    print("fuzzball-runtime: not available yet", file=sys.stderr)
    return 2
