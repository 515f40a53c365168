"""Registers and Hellos that reach Orchestrate's loop together (the nodes returning to a
restarted Orchestrate) are applied in one transaction, with the same answers and effects as
one by one; an arrival that is refused fails alone."""

from __future__ import annotations

import asyncio

import pytest
from test_restart_reconnects import running_on_nodes

from fuzzball_core.errors import NotFound
from fuzzball_core.orchestrate.node_arrivals import MAX_BATCH, Arrivals, Registration
from fuzzball_core.scheduling import Resources

CAPACITY = Resources(4, 8 << 30, {})


def together(*calls):
    """Run the arrivals' coroutines as RPCs arriving in the same turn of the loop do."""

    async def main():
        return await asyncio.gather(*(call() for call in calls), return_exceptions=True)

    return asyncio.run(main())


def _reading(statements: list[str], table: str) -> list[str]:
    return [s for s in statements if s.lstrip().upper().startswith("SELECT") and f" {table}" in s]


def test_nodes_returning_together_come_back_in_one_transaction_each_way_with_their_jobs(
    harness, statements
):
    names = [f"n{i}" for i in range(6)]
    placed = running_on_nodes(harness, names)
    engine = harness.restarted()
    arrivals = Arrivals(engine.context, engine.change)
    statements.clear()
    ids = together(
        *(
            lambda n=n: arrivals.register(Registration(n, CAPACITY, {}, version="99.0"))
            for n in names
        )
    )
    assert ids == [placed[name][0] for name in names]
    assert (arrivals.batches, arrivals.applied) == (1, 6)
    assert len(_reading(statements, "nodes")) == 1  # the six rows in one query
    assert len(_reading(statements, "node_holds")) == 1  # read once for both of their uses

    harness.clock.now += 10
    statements.clear()
    unwanted = together(*(lambda n=n: arrivals.hello(placed[n][0], [placed[n][2]]) for n in names))
    assert unwanted == [[]] * 6
    assert (arrivals.batches, arrivals.applied) == (2, 12)
    assert len(_reading(statements, "runs")) == 1  # every node's runs in one query
    assert len(_reading(statements, "node_holds")) == 0  # the scheduler has them already
    assert len(_reading(statements, "volumes")) == 1  # the removals to tell them, once

    engine.step()
    for name in names:
        assert harness.stages(placed[name][1]) == {"jobs.held": "STARTED"}, name
    assert engine.context.returning.nodes == set()
    harness.clock.now += 10  # past the lease the restart granted: the Hellos renewed them
    engine.step()
    for name in names:
        assert harness.stages(placed[name][1]) == {"jobs.held": "STARTED"}, name


def test_a_batched_hello_is_told_to_drop_the_runs_that_are_not_its_own(harness):
    placed = running_on_nodes(harness, ["a", "b"])
    engine = harness.restarted()
    arrivals = Arrivals(engine.context, engine.change)
    a, b = placed["a"][0], placed["b"][0]
    answers = together(
        lambda: arrivals.hello(a, [placed["a"][2], placed["b"][2], 987654]),
        lambda: arrivals.hello(b, [placed["b"][2]]),
    )
    assert [sorted(answer) for answer in answers] == [sorted([placed["b"][2], 987654]), []]
    assert arrivals.batches == 1


def test_a_batched_hello_of_a_node_that_lost_its_run_fails_that_run_only(harness):
    placed = running_on_nodes(harness, ["a", "b"])
    engine = harness.restarted()
    arrivals = Arrivals(engine.context, engine.change)
    together(
        lambda: arrivals.hello(placed["a"][0], []),  # a restarted too: its run is gone
        lambda: arrivals.hello(placed["b"][0], [placed["b"][2]]),
    )
    engine.step()
    assert harness.stages(placed["a"][1]) == {"jobs.held": "FAILED"}
    assert harness.stages(placed["b"][1]) == {"jobs.held": "STARTED"}


def test_a_refused_arrival_fails_alone_and_the_others_in_its_turn_apply(harness):
    placed = running_on_nodes(harness, ["a"])
    engine = harness.restarted()
    arrivals = Arrivals(engine.context, engine.change)
    answers = together(
        lambda: arrivals.hello("no-such-node", []),
        lambda: arrivals.hello(placed["a"][0], [placed["a"][2]]),
        lambda: arrivals.register(Registration("new", CAPACITY, {})),
    )
    assert isinstance(answers[0], NotFound)
    assert answers[1] == []
    assert "new" in {node.name for node in harness.service.list_nodes(harness.admin)}
    engine.step()
    assert harness.stages(placed["a"][1]) == {"jobs.held": "STARTED"}


def test_one_name_registered_twice_in_a_turn_is_one_node(harness):
    arrivals = Arrivals(harness.engine.context, harness.engine.change)
    first, second = together(
        lambda: arrivals.register(Registration("twin", CAPACITY, {})),
        lambda: arrivals.register(Registration("twin", Resources(8, 8 << 30, {}), {})),
    )
    assert first == second
    (node,) = [n for n in harness.service.list_nodes(harness.admin) if n.name == "twin"]
    assert node.id == first
    assert arrivals.batches == 1


@pytest.mark.parametrize("version", ["", "0.0.1"])
def test_a_batched_register_of_a_too_old_substrate_is_cordoned(harness, version):
    arrivals = Arrivals(harness.engine.context, harness.engine.change)
    answers = together(
        lambda: arrivals.register(Registration("old", CAPACITY, {}, version=version)),
        lambda: arrivals.register(Registration("new", CAPACITY, {}, version="99.0")),
    )
    held = {
        node.id: [hold.effect for hold in node.holds]
        for node in harness.service.list_nodes(harness.admin)
    }
    assert [held[node_id] for node_id in answers] == [["cordon"], []]
    assert arrivals.batches == 1


def test_more_arrivals_than_a_batch_holds_are_applied_over_several_turns(harness):
    arrivals = Arrivals(harness.engine.context, harness.engine.change)
    names = [f"n{i}" for i in range(MAX_BATCH + 6)]
    ids = together(*(lambda n=n: arrivals.register(Registration(n, CAPACITY, {})) for n in names))
    assert (arrivals.batches, arrivals.applied) == (2, len(names))
    listed = {node.name: node.id for node in harness.service.list_nodes(harness.admin)}
    assert ids == [listed[name] for name in names]


def test_nodes_reconnecting_while_ready_leave_the_next_pass_no_holds_to_read(harness, statements):
    # a flap: every node's stream dropped, every node READY all along registers and says
    # Hello again; none came to be READY, so none can be a held node to deprovision
    names = [f"n{i}" for i in range(3)]
    ids = [harness.node(name) for name in names]
    harness.engine.step()  # the look the registrations asked for: no held node
    arrivals = Arrivals(harness.engine.context, harness.engine.arrivals_change)
    together(*(lambda n=n: arrivals.register(Registration(n, CAPACITY, {})) for n in names))
    together(*(lambda i=i: arrivals.hello(i, []) for i in ids))
    statements.clear()
    harness.engine.step()
    assert _reading(statements, "node_holds") == []


def test_a_held_node_back_from_offline_in_a_batch_is_deprovisioned_once_empty(harness):
    (placed,) = running_on_nodes(harness, ["n1"]).values()
    harness.service.add_hold(harness.admin, "n1", "deprovision", "retiring")
    harness.engine.step()
    harness.clock.now += 60  # the lease lapses: the node is OFFLINE, its run lost
    harness.engine.step()
    assert harness.service.get_node(harness.admin, "n1").status == "OFFLINE"
    arrivals = Arrivals(harness.engine.context, harness.engine.arrivals_change)
    together(lambda: arrivals.register(Registration("n1", CAPACITY, {})))
    harness.engine.step()
    assert harness.service.get_node(harness.admin, "n1").status == "DEPROVISIONED"
    assert [n for n, _ in harness.hub.take("shutdown")] == [placed[0]]
