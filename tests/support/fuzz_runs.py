"""How the REST fuzz tests run hypothesis: ``examples`` examples a run, the same ones every
run (derandomized, no example database: CI and a developer see one set), no deadline (a
request to a live stack takes what it takes on a shared machine) and no health checks (the
strategies draw from whole OpenAPI documents, which hypothesis finds slow or filtered)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def fuzz_settings(examples: int) -> settings:
    """The settings of one operation's fuzz run of ``examples`` examples."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
