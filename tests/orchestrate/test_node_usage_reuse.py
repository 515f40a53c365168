"""A copy of the engine's memory of nodes made while the scheduler changed no node's usage
(its ``usage_version``) holds the copy before's usages rather than asking every node again;
their last-heard times are read anew, and any change of usage makes the next copy ask."""

from __future__ import annotations

from support.engine_workflows import HELLO

from fuzzball_core.orchestrate.node_usage_copies import NodeUsageCopy, copy_now
from fuzzball_core.orchestrate.nodes import heartbeat


def copy_after(harness, before: NodeUsageCopy | None = None) -> NodeUsageCopy:
    ctx = harness.engine.context
    return copy_now(ctx, ctx.node_names, harness.clock.now, every=True, before=before)


def test_a_copy_made_while_no_usage_changed_holds_the_last_copys_usages(harness):
    harness.node("a")
    first = copy_after(harness)
    assert copy_after(harness, first).usages is first.usages


def test_a_copy_made_while_no_usage_changed_reads_the_last_heard_times_anew(harness):
    node_id = harness.node("a")
    first = copy_after(harness)
    harness.clock.now += 30.0
    assert heartbeat(harness.engine.context, node_id)
    assert copy_after(harness, first).heard[node_id] == first.heard[node_id] + 30.0


def test_a_copy_made_after_a_job_started_asks_the_scheduler_again(harness):
    node_id = harness.node("a")
    first = copy_after(harness)
    harness.submit(HELLO)
    again = copy_after(harness, first)
    assert again.usages is not first.usages
    assert again.usages[node_id].job_ids and not first.usages[node_id].job_ids


def test_a_copy_made_after_a_node_joined_asks_the_scheduler_again(harness):
    harness.node("a")
    first = copy_after(harness)
    joined = harness.node("b")
    assert joined in copy_after(harness, first).usages
