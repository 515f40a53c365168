"""Node views' copies of the engine's memory (NodeUsages): made at once on the engine's loop,
made there for readers on other threads (of every node the engine knows), one up to
MAX_STALE old served without the loop, an older one replaced before it is served, new ones
made unasked while readers keep coming, and a node's row checked against the copy."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pickle
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fuzzball_core.errors import NotFound
from fuzzball_core.orchestrate.node_usage_copies import (
    COPY_SHARE,
    KEEP_WARM,
    MAX_AGE,
    MAX_STALE,
    NodeUsageCopy,
    NodeUsages,
    ShownUsage,
    WiredCopies,
    WireWriter,
)
from fuzzball_core.scheduling import NodeUsage, Resources

PATIENCE = 60.0


@dataclass
class FakeScheduler:
    """node_usage answers the cores in use it is told, and records the reading thread."""

    used: dict[str, int]
    readers: list[str] = field(default_factory=list)
    #: counts no changes (Scheduler.usage_version's default): every copy asks each node
    usage_version: int | None = None

    def node_usage(self, node_id: str) -> Any:
        self.readers.append(threading.current_thread().name)
        if node_id not in self.used:
            raise NotFound(node_id)
        return self.used[node_id]


@dataclass
class FakeContext:
    scheduler: FakeScheduler
    leases: dict[str, float] = field(default_factory=dict)
    node_names: dict[str, str] = field(default_factory=dict)
    node_leases: dict[str, float] = field(default_factory=dict)
    lease_seconds: float = 15.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Engine:
    ctx: FakeContext
    usages: NodeUsages
    clock: Clock
    loop: asyncio.AbstractEventLoop


@contextlib.contextmanager
def engine_loop(usages: NodeUsages) -> Iterator[asyncio.AbstractEventLoop]:
    """A loop on a thread named ``engine`` that ``usages`` is served from."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="engine")
    thread.start()
    try:
        loop.call_soon_threadsafe(usages.serve_from, loop)
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(PATIENCE)
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(PATIENCE)
        loop.close()


@pytest.fixture
def engine() -> Iterator[Engine]:
    """NodeUsages of two nodes served from an engine's loop, with a clock the test moves."""
    ctx = FakeContext(FakeScheduler({"a": 1, "b": 2}))
    clock = Clock()
    usages = NodeUsages(ctx, clock=clock)
    with engine_loop(usages) as loop:
        yield Engine(ctx, usages, clock, loop)


def test_a_reader_on_the_engines_thread_gets_a_copy_of_now():
    ctx = FakeContext(FakeScheduler({"a": 1}))
    usages = NodeUsages(ctx)
    usages.read(["a"])
    ctx.scheduler.used["a"] = 3
    assert usages.read(["a"]).usages == {"a": 3}


def test_a_node_the_scheduler_does_not_know_has_no_usage():
    usages = NodeUsages(FakeContext(FakeScheduler({})))
    assert usages.read(["gone"]).usages == {}


def test_a_reader_on_another_thread_is_given_a_copy_made_on_the_engines_loop(engine):
    copy = engine.usages.read(["a", "b"])
    assert copy.usages == {"a": 1, "b": 2}
    assert set(engine.ctx.scheduler.readers) == {"engine"}


def test_a_recent_copy_is_served_while_the_engines_loop_is_held(engine):
    engine.usages.read(["a", "b"])
    # the pass ends only after the read: a read needing the loop would never return
    with _a_long_pass(engine.loop):
        assert engine.usages.read(["a", "b"]).usages == {"a": 1, "b": 2}


def test_a_copy_older_than_max_age_is_served_while_the_engines_loop_is_held(engine):
    engine.usages.read(["a"])
    engine.ctx.scheduler.used["a"] = 5
    engine.clock.now += MAX_AGE + 1
    with _a_long_pass(engine.loop):
        assert engine.usages.read(["a"]).usages == {"a": 1}


def test_a_copy_older_than_max_stale_is_made_again_before_it_is_served(engine):
    engine.usages.read(["a"])
    engine.ctx.scheduler.used["a"] = 5
    engine.clock.now += MAX_STALE + 1
    assert engine.usages.read(["a"]).usages == {"a": 5}


def test_a_fresh_copy_is_made_after_it_is_asked_for(engine):
    engine.usages.read(["a"])
    engine.ctx.scheduler.used["a"] = 5
    assert engine.usages.read(["a"], fresh=True).usages == {"a": 5}


def test_a_copy_made_for_a_reader_holds_every_node_the_engine_knows(engine):
    engine.ctx.node_names.update(a="a", b="b")
    assert engine.usages.read(["a"]).usages == {"a": 1, "b": 2}


def test_a_copy_without_the_nodes_asked_for_is_made_again(engine):
    engine.usages.read(["a"])
    assert engine.usages.read(["a", "b"]).usages == {"a": 1, "b": 2}


def test_last_seen_is_the_latest_heartbeat_not_yet_written():
    ctx = FakeContext(FakeScheduler({"a": 1}), leases={"a": 1_015.0})
    copy = NodeUsages(ctx).read(["a"])
    assert copy.last_seen("a", 900.0) == 1_000.0  # the lease's end less its length
    assert copy.last_seen("a", 1_010.0) == 1_010.0  # the row is newer


def test_copies_are_made_unasked_while_readers_keep_coming():
    ctx = FakeContext(FakeScheduler({"a": 1}))
    usages = NodeUsages(ctx, max_age=0.02)
    with engine_loop(usages) as loop:
        usages.read(["a"])  # from this thread: made on the loop, which then keeps them coming
        assert _copies_reach(loop, ctx, 3)


def test_reads_no_reader_asked_for_keep_no_copies_coming_unasked():
    ctx = FakeContext(FakeScheduler({"a": 1}))
    usages = NodeUsages(ctx, max_age=0.02)
    with engine_loop(usages) as loop:
        usages.read(["a"], asked=False)  # made on the loop, and nothing after
        # the loop's timer for a copy made unasked would be due well before this ends
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0.2), loop).result(PATIENCE)
    assert ctx.scheduler.readers == ["engine"]


@contextlib.contextmanager
def _a_long_pass(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """The engine's loop held (as by a long pass) until the block ends."""
    held, released = threading.Event(), threading.Event()

    def a_long_pass() -> None:
        held.set()
        released.wait(PATIENCE)

    loop.call_soon_threadsafe(a_long_pass)
    assert held.wait(PATIENCE)
    try:
        yield
    finally:
        released.set()


def _copies_reach(loop: asyncio.AbstractEventLoop, ctx: FakeContext, count: int) -> bool:
    """Whether the engine's loop has made ``count`` copies within :data:`PATIENCE`."""
    reached = threading.Event()

    def check() -> None:
        if len(ctx.scheduler.readers) >= count:
            reached.set()
        else:
            loop.call_later(0.01, check)

    loop.call_soon_threadsafe(check)
    return reached.wait(PATIENCE)


def _usage(node_id: str, cores: int, memory: int) -> NodeUsage:
    return NodeUsage(
        node_id, Resources(cores, memory, {}), 0, 0, {}, cores, memory, {}, (), None, True
    )


def test_a_ready_row_agrees_with_a_copy_of_its_lease_and_capacity():
    ctx = FakeContext(FakeScheduler({"a": _usage("a", 4, 8)}), leases={"a": 1_015.0})
    copy = NodeUsages(ctx).read(["a"])
    assert copy.agrees("a", "READY", 4, 8)


@pytest.mark.parametrize(
    ("status", "cores", "memory"),
    [("OFFLINE", 4, 8), ("READY", 8, 8), ("READY", 4, 16)],
    ids=["went-offline", "more-cores", "more-memory"],
)
def test_a_row_changed_after_the_copy_does_not_agree(status, cores, memory):
    ctx = FakeContext(FakeScheduler({"a": _usage("a", 4, 8)}), leases={"a": 1_015.0})
    copy = NodeUsages(ctx).read(["a"])
    assert not copy.agrees("a", status, cores, memory)


def test_a_ready_row_does_not_agree_with_a_copy_made_while_it_was_offline():
    copy = NodeUsages(FakeContext(FakeScheduler({}))).read(["a"])
    assert not copy.agrees("a", "READY", 4, 8)
    assert copy.agrees("a", "OFFLINE", 4, 8)


def test_a_node_registered_after_the_copy_does_not_agree_with_it(engine):
    engine.usages.read(["a"])
    assert not engine.usages.read(["a"]).agrees("new", "READY", 4, 8)


def test_copies_are_made_unasked_for_minutes_after_the_last_reader():
    ctx = FakeContext(FakeScheduler({"a": 1}))
    clock = Clock()
    usages = NodeUsages(ctx, max_age=0.5, max_stale=0.02, clock=clock)
    with engine_loop(usages) as loop:
        usages.read(["a"])
        clock.now += KEEP_WARM + 1  # readers stopped coming a while ago
        assert _copies_reach(loop, ctx, 4)


def test_a_copy_younger_than_half_max_age_is_served_without_asking_for_another():
    ctx = FakeContext(FakeScheduler({"a": 1}))
    # copies made unasked every 30 s: none within the test
    usages = NodeUsages(ctx, max_age=60.0, clock=Clock())
    with engine_loop(usages) as loop:
        usages.read(["a"])
        usages.read(["a"])
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(PATIENCE)
    assert ctx.scheduler.readers == ["engine"]


class CpuClock:
    """The engine thread's CPU time: each look ``step`` seconds later."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_copy_costing_more_than_its_share_is_made_again_less_often():
    ctx = FakeContext(FakeScheduler({"a": 1}))
    clock = Clock()
    # a copy costs 2.5 times its share of MAX_AGE / 2: the next is due 2.5 times later
    cost = 2.5 * COPY_SHARE * MAX_AGE / 2
    usages = NodeUsages(ctx, clock=clock, cpu_clock=CpuClock(cost))
    with engine_loop(usages) as loop:
        usages.read(["a"])
        clock.now += MAX_AGE  # past MAX_AGE / 2, not yet 2.5 times it
        usages.read(["a"])
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(PATIENCE)
    assert ctx.scheduler.readers == ["engine"]


BUSY = NodeUsage(
    "n1", Resources(8, 16 << 30, {"gpu": 2}), 2, 1 << 30, {"gpu": 1}, 6, 15 << 30,
    {"gpu": 1}, ("run-1",), None, True, {"run-1": (0, 1)}, {"tcp/80": "run-1"},
)  # fmt: skip
IDLE = NodeUsage("n2", Resources(8, 16 << 30), 0, 0, {}, 8, 16 << 30, {}, (), None, True)


def shown(copy: NodeUsageCopy) -> NodeUsageCopy:
    """``copy`` with only what the lists read of each usage (what the worker reads back)."""
    usages = {
        node_id: ShownUsage(u.capacity, u.used_cores, u.used_memory, u.used_devices, u.job_ids)
        for node_id, u in copy.usages.items()
    }
    return dataclasses.replace(copy, usages=usages)


def test_a_copy_sent_to_the_list_worker_is_read_back_with_what_the_lists_read():
    copy = NodeUsageCopy(5.0, frozenset({"n1", "n2", "n3"}), {"n1": BUSY, "n2": IDLE}, {"n1": 4.0})
    assert WiredCopies().read(WireWriter().write(copy)) == shown(copy)


def test_copies_sent_one_after_another_are_each_read_back_as_they_were():
    first = NodeUsageCopy(1.0, frozenset({"n1", "n2"}), {"n1": BUSY, "n2": IDLE}, {"n1": 0.5})
    busy_n2 = dataclasses.replace(IDLE, used_cores=1, free_cores=7, job_ids=("run-2",))
    second = NodeUsageCopy(2.0, frozenset({"n2", "n3"}), {"n2": busy_n2}, {"n2": 1.5, "n3": 1.0})
    third = NodeUsageCopy(3.0, frozenset({"n2", "n3"}), {"n2": busy_n2}, {"n3": 2.0})
    writer, copies = WireWriter(), WiredCopies()
    read = [copies.read(writer.write(copy)) for copy in (first, second, third)]
    assert read == [shown(first), shown(second), shown(third)]


def test_a_node_that_reregistered_with_other_capacity_is_sent_again():
    bigger = dataclasses.replace(IDLE, capacity=Resources(16, 16 << 30))
    writer, copies = WireWriter(), WiredCopies()
    copies.read(writer.write(NodeUsageCopy(1.0, frozenset({"n2"}), {"n2": IDLE}, {})))
    copy = NodeUsageCopy(2.0, frozenset({"n2"}), {"n2": bigger}, {})
    assert copies.read(writer.write(copy)).usages["n2"].capacity.cores == 16


def test_only_the_usages_and_heartbeats_changed_since_the_last_copy_are_sent():
    writer = WireWriter()
    writer.write(NodeUsageCopy(1.0, frozenset({"n1", "n2"}), {"n1": BUSY, "n2": IDLE}, {"n1": 1.0}))
    busy_n2 = dataclasses.replace(IDLE, used_cores=1, free_cores=7, job_ids=("run-2",))
    data = writer.write(
        NodeUsageCopy(
            2.0,
            frozenset({"n1", "n2"}),
            {"n1": BUSY, "n2": busy_n2},
            {"n1": 1.0, "n2": 2.0},
        )
    )
    _, nodes, usages, gone, heard, unheard = pickle.loads(data)
    assert (nodes, [u[0] for u in usages], gone, heard, unheard) == (
        None,
        ["n2"],
        [],
        {"n2": 2.0},
        [],
    )


def test_a_nodes_usage_unchanged_since_the_last_copy_sent_is_read_as_the_same():
    busy = dataclasses.replace(IDLE, used_cores=1, free_cores=7, job_ids=("run-1",))
    one = dataclasses.replace(IDLE, node_id="n1")
    writer, copies = WireWriter(), WiredCopies()
    first = copies.read(writer.write(NodeUsageCopy(1.0, frozenset(), {"n1": one, "n2": IDLE}, {})))
    second = copies.read(writer.write(NodeUsageCopy(2.0, frozenset(), {"n1": one, "n2": busy}, {})))
    assert second.usages["n1"] is first.usages["n1"]
    assert (
        second.usages["n2"] == shown(NodeUsageCopy(2.0, frozenset(), {"n2": busy}, {})).usages["n2"]
    )
