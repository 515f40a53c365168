"""Entry points of the long-running services that live outside ``fuzzball_core``."""

from __future__ import annotations


def federate_main() -> None:
    """``fuzzball-federate`` (the process lives in ``fuzzball_federation.main``)."""
    from fuzzball_federation.main import main

    main()
