"""The default scheduler's usage_version: it changes with every change of what node_usage
says of a node (Orchestrate's node lists keep a copy of every node's usage while it stands),
and only then."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.scheduler_cluster import cluster, job, node

from fuzzball_plugins.schedulers.default import DefaultScheduler

CHANGES: dict[str, Callable[[DefaultScheduler], object]] = {
    "a one-node job placed": lambda s: s.schedule([job("new", cores=2)], now=1),
    "a job with devices placed": lambda s: s.schedule([job("new", cores=1, gpus=1)], now=1),
    "a running job recorded": lambda s: s.allocate(job("new", cores=2), ["n"]),
    "a job released": lambda s: s.release("running"),
    "a node updated": lambda s: s.upsert_node(node("n", cores=8, gpus=2)),
    "a node registered": lambda s: s.upsert_node(node("m")),
    "a node removed": lambda s: s.remove_node("idle"),
}


def busy_cluster() -> DefaultScheduler:
    scheduler = cluster(node("n", cores=16, gpus=2), node("idle"))
    scheduler.allocate(job("running", cores=4), ["n"])
    return scheduler


@pytest.mark.parametrize("change", CHANGES)
def test_the_usage_version_changes_with_each_change_of_a_nodes_usage(change):
    scheduler = busy_cluster()
    before = scheduler.usage_version
    CHANGES[change](scheduler)
    assert scheduler.usage_version != before


def test_the_usage_version_stands_while_passes_place_nothing():
    scheduler = busy_cluster()
    before = scheduler.usage_version
    scheduler.schedule([job("too big", cores=64)], now=1)
    scheduler.schedule([], now=2)
    scheduler.node_usage("n")
    assert scheduler.usage_version == before


def test_the_usage_version_stands_when_a_node_registers_again_unchanged():
    # a reconnecting agent's Register tells the scheduler the node as it already was
    scheduler = busy_cluster()
    before = scheduler.usage_version
    scheduler.upsert_node(node("n", cores=16, gpus=2))
    scheduler.upsert_node(node("idle"))
    assert scheduler.usage_version == before
    assert scheduler.node_usage("n").job_ids == ("running",)
