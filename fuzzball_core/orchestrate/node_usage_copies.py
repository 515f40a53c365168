"""What the engine's memory says of nodes, copied on its loop for readers on other threads.

A node's view shows what the scheduler holds on it (cores, memory, devices, the running
stages) and when it was last heard (a heartbeat not yet written to its row). Both live in
the engine's memory, which its passes change on the engine's loop; a node list served from
the REST gateway's own thread (:mod:`fuzzball_core.api.gateway_thread`) must not read it
while a pass changes it. :class:`NodeUsages` gives such a reader a copy made on the engine's
loop between two of its turns (a :class:`NodeUsageCopy` of every node the engine knows,
never changed after, swapped by reference). The latest copy is served when it is at most
:data:`MAX_STALE` old rather than wait for a loop busy with a pass (a new one is asked for
meanwhile, for the next reader, once it is ``MAX_AGE / 2`` old); only without a copy that
young does a reader wait for the loop. While readers keep coming (:data:`KEEP_WARM`) the
loop makes a new one every ``MAX_AGE / 2`` unasked, so a list polled every few seconds finds
one about a second old, a little over :data:`MAX_AGE` when passes held the loop; where a
copy's CPU is more than :data:`COPY_SHARE` of that interval (thousands of nodes) they are
made as much less often, at most ``MAX_STALE / 2`` apart, and may be that old; for minutes
after (:data:`KEEP_READY`), one every ``MAX_STALE / 2``, so the next list after a quiet
while need not wait for a busy loop either (the first after a start, or after those minutes,
does). A reader checks each node's row against the copy (:meth:`NodeUsageCopy.agrees`): a
node whose state or capacity changed after the copy was made is not shown with the copy's
usage, the reader asks for a copy made after it instead. A caller on the engine's loop gets
a copy made at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import pickle
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from fuzzball_core.errors import NotFound, Unavailable
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.scheduling import Resources
from fuzzball_core.vocabulary import NodeStatus

#: while readers come, the engine's loop makes a copy every ``MAX_AGE / 2`` seconds: a
#: reader is given one at most about this old unless a pass held the loop longer
MAX_AGE = 2.0
#: the oldest copy a reader off the engine's loop is given, in seconds, when the loop has
#: not made a fresher one (a pass holds it): what a node list shows of usage and last-heard
#: times may lag by so much, never a node's state (see NodeUsageCopy.agrees); heartbeats,
#: which last-heard times show, come every few seconds anyway
MAX_STALE = 10.0
#: while readers came within this many seconds, a new copy is made every ``MAX_AGE / 2``
#: without being asked, so that a list every few seconds never waits for the engine's loop
KEEP_WARM = 30.0
#: after that, for this many seconds since the last reader, a new copy is made every
#: ``MAX_STALE / 2`` unasked: the next reader finds one young enough to be given at once
#: (at 5,000 nodes a copy is 25-50 ms of the loop's CPU, so about 0.5-1 % of a core)
KEEP_READY = 600.0
#: how long a reader waits for the engine's loop to make a copy before giving up
WAIT = 30.0
#: the share of the engine thread's CPU the copies may take while readers come: a copy made
#: every ``MAX_AGE / 2`` unless it costs more than this share of that, then less often (at
#: 5,000 nodes a copy was 40-80 ms of the loop's CPU, so every second 4-8 % of its thread,
#: 27 % of its GIL samples during an array on a loaded machine)
COPY_SHARE = 0.02


class UsageShown(Protocol):
    """What a node list reads of a node's usage: a scheduler's :class:`NodeUsage` in the
    engine's process, a :class:`ShownUsage` in the list worker's."""

    @property
    def capacity(self) -> Resources: ...
    @property
    def used_cores(self) -> int: ...
    @property
    def used_memory(self) -> int: ...
    @property
    def used_devices(self) -> Mapping[str, int]: ...
    @property
    def job_ids(self) -> tuple[str, ...]: ...


class ShownUsage(NamedTuple):
    """A node's usage as the list worker reads it from a copy sent over: only what the lists
    show (a node's view) and check (:meth:`NodeUsageCopy.agrees_with`)."""

    capacity: Resources
    used_cores: int
    used_memory: int
    used_devices: Mapping[str, int]
    job_ids: tuple[str, ...]


@dataclass(frozen=True)
class NodeUsageCopy:
    """The scheduler's usage of nodes and when each was last heard, at one moment."""

    #: when it was made (``time.monotonic``)
    made: float
    #: the nodes it was made for: every node the engine knew then, and those asked for (a
    #: node the scheduler does not know has no usage)
    nodes: frozenset[str]
    usages: Mapping[str, UsageShown]
    #: node id -> when its latest heartbeat came (the READY nodes: those with a lease)
    heard: Mapping[str, float]
    #: the scheduler's ``usage_version`` when ``usages`` were read (None: it counts none)
    usage_version: int | None = None

    def last_seen(self, node_id: str, stored: float) -> float:
        """When the node was last heard from: ``stored`` (its row's), or a heartbeat not
        written there yet."""
        return max(stored, self.heard.get(node_id, stored))

    def agrees(self, node_id: str, status: str, cores: int, memory: int) -> bool:
        """Whether a node's row (its state and capacity, read after the copy was made) is
        what the engine held when the copy was made: a node that registered, went offline,
        came back or changed its capacity since must not be shown with this copy's usage
        (a mixture that never existed)."""
        return self.agrees_with((_NodeRow(node_id, status, cores, memory),))

    def agrees_with(self, rows: Iterable[NodeState]) -> bool:
        """Whether every row :meth:`agrees` (in one loop: at 5,000 nodes a call a row cost
        a node list about 5 ms of CPU)."""
        nodes, heard, usages = self.nodes, self.heard, self.usages
        for row in rows:
            node_id = row.id
            if node_id not in nodes or (row.status == NodeStatus.READY) != (node_id in heard):
                return False
            usage = usages.get(node_id)
            if usage is not None and (
                usage.capacity.cores != row.cores or usage.capacity.memory != row.memory
            ):
                return False
        return True


class NodeUsageReader(Protocol):
    """What the node lists read the engine's memory through: :class:`NodeUsages` in the
    engine's process, a reader of copies sent over in the list worker's."""

    def read(
        self, node_ids: Collection[str], *, fresh: bool = False, asked: bool = True
    ) -> NodeUsageCopy:
        """The usage and last-heard times of ``node_ids`` and of every node the engine
        knows; ``fresh``: made after this call; ``asked``: False for a read no reader asked
        for (a list made ahead of GETs with none since the last), which does not keep the
        engine making copies unasked (see :class:`NodeUsages`)."""
        ...


class NodeState(Protocol):
    """What :meth:`NodeUsageCopy.agrees_with` reads of a node's row."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def cores(self) -> int: ...
    @property
    def memory(self) -> int: ...


class _NodeRow(NamedTuple):
    id: str
    status: str
    cores: int
    memory: int


def copy_now(
    ctx: EngineContext,
    node_ids: Collection[str],
    made: float,
    *,
    every: bool = False,
    before: NodeUsageCopy | None = None,
) -> NodeUsageCopy:
    """A copy of the engine's memory of ``node_ids`` (``every``: and of every node it
    knows): on the engine's loop only. The usages of ``before`` (an earlier copy) when
    it holds those nodes and the scheduler changed none since (its ``usage_version``): an
    idle cluster's usages are as they were, and asking 5,000 nodes' again was 20-50 ms of
    the loop's CPU a copy, made every 5 s unasked for ten minutes after a list (about 1 %
    of a core); the last-heard times are read anew."""
    nodes = frozenset(node_ids)
    if every:
        nodes = nodes.union(ctx.node_names, ctx.leases)
    version = ctx.scheduler.usage_version
    if (
        before is not None
        and version is not None
        and before.usage_version == version
        and nodes <= before.nodes
    ):
        usages: Mapping[str, UsageShown] = before.usages
    else:
        usages = _usages(ctx, nodes)
    # lease_of inline, over the leases (the READY nodes) with bound methods: a call of it a
    # node was 5.8 ms of a copy at 5,000 nodes, this 3.8
    named, configured = ctx.node_leases.get, ctx.lease_seconds
    heard = {
        node_id: until - max(named(node_id, 0.0), configured)
        for node_id, until in ctx.leases.items()
        if until and node_id in nodes
    }
    return NodeUsageCopy(made, nodes, usages, heard, version)


def _usages(ctx: EngineContext, nodes: Collection[str]) -> dict[str, UsageShown]:
    """The scheduler's usage of each of ``nodes`` it knows."""
    usages: dict[str, UsageShown] = {}
    node_usage = ctx.scheduler.node_usage
    for node_id in nodes:
        # try, not contextlib.suppress: a context entered a node cost 0.5 µs of the loop's
        # CPU, 2.5 ms a copy at 5,000 nodes
        try:
            usages[node_id] = node_usage(node_id)
        except NotFound:  # a node the scheduler does not know has no usage
            continue
    return usages


class NodeUsages:
    """Copies of the engine's memory of nodes for the service's node views: made at once on
    the engine's loop (or anywhere before :meth:`serve_from`), recent ones elsewhere."""

    def __init__(
        self,
        ctx: EngineContext,
        *,
        max_age: float = MAX_AGE,
        max_stale: float = MAX_STALE,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        self._ctx = ctx
        self._max_age = max_age
        self._max_stale = max_stale
        self._clock = clock
        self._cpu_clock = cpu_clock
        #: seconds between two copies while readers come: ``MAX_AGE / 2``, longer when the
        #: last copy's CPU was more than COPY_SHARE of that (at most ``MAX_STALE / 2``)
        self._every = max_age / 2
        self._home: asyncio.AbstractEventLoop | None = None
        self._home_thread: int | None = None
        #: the latest copy made on the engine's loop, replaced whole
        self._copy: NodeUsageCopy | None = None
        #: the copy asked for and not yet made, and the nodes it is for
        self._making: concurrent.futures.Future[NodeUsageCopy] | None = None
        self._wanted: set[str] = set()
        self._lock = threading.Lock()
        #: when a reader off the loop last came, and the loop's timer for the next copy
        self._last_read = -math.inf
        self._warm: asyncio.TimerHandle | None = None

    def serve_from(self, loop: asyncio.AbstractEventLoop) -> None:
        """From now on the engine runs on ``loop``, whose thread calls this: readers on other
        threads are given copies made there."""
        self._home, self._home_thread = loop, threading.get_ident()

    def read(
        self, node_ids: Collection[str], *, fresh: bool = False, asked: bool = True
    ) -> NodeUsageCopy:
        """The usage and last-heard times of ``node_ids`` (and of every node the engine
        knows).

        On the engine's loop: made now. Elsewhere: the latest copy when it covers them and
        is at most :data:`MAX_STALE` old, unless ``fresh`` (a new one is asked for, for the
        next reader, when it is ``MAX_AGE / 2`` old or more), else a new one, made after this
        call and waited for (at most :data:`WAIT` seconds). A read ``asked`` for by a reader
        keeps copies coming unasked for a while (:data:`KEEP_WARM`, :data:`KEEP_READY`); the
        list worker's lists made ahead of GETs, none since the last, do not (they kept the
        engine's loop making copies for 40 s after the last GET, and then every 5 s for ten
        minutes).
        """
        if self._home is None or threading.get_ident() == self._home_thread:
            return copy_now(self._ctx, node_ids, self._clock())
        now = self._clock()
        if asked:
            self._last_read = now
        latest = self._copy
        if latest is not None and not fresh and latest.nodes.issuperset(node_ids):
            age = now - latest.made
            if age <= self._max_stale:
                # a new one for the next reader only once this one is as old as the loop makes
                # them unasked: one asked for by every read cost the engine's loop a copy a
                # list (8 % of its thread during an array at 500 nodes, two lists a second)
                if age >= self._every:
                    self._ask(node_ids)
                return latest
        making = self._ask(node_ids)
        try:
            return making.result(timeout=WAIT)
        except concurrent.futures.TimeoutError:
            raise Unavailable("the engine's loop did not answer; try again") from None

    def _ask(self, node_ids: Collection[str]) -> concurrent.futures.Future[NodeUsageCopy]:
        """The copy being made for the readers so far, with ``node_ids`` among its nodes."""
        home = self._home
        assert home is not None
        with self._lock:
            self._wanted.update(node_ids)
            if self._making is None:
                self._making = concurrent.futures.Future()
                try:
                    home.call_soon_threadsafe(self._make)
                except RuntimeError:  # the loop is closed: Orchestrate is stopping
                    self._making = None
                    raise Unavailable("Orchestrate is stopping") from None
            return self._making

    def _make(self) -> None:
        """Make the copy asked for (on the engine's loop, between two of its turns)."""
        with self._lock:
            future, self._making = self._making, None
            wanted, self._wanted = self._wanted, set()
        assert future is not None
        started = self._cpu_clock()
        try:
            # every node, not only those asked for: a node that joined since the last reader
            # is in the copy the next one is given
            made = copy_now(self._ctx, wanted, self._clock(), every=True, before=self._copy)
        except Exception as exc:  # the readers waiting for it are answered with it
            future.set_exception(exc)
            return
        cost = self._cpu_clock() - started
        self._every = min(max(self._max_age / 2, cost / COPY_SHARE), self._max_stale / 2)
        self._copy = made
        future.set_result(made)
        delay = self._next_copy_in(self._clock() - self._last_read)
        if self._warm is None and delay is not None:
            assert self._home is not None
            self._warm = self._home.call_later(delay, self._keep_warm, made.nodes)

    def _next_copy_in(self, since_read: float) -> float | None:
        """Seconds until the next copy made unasked, ``since_read`` seconds after the last
        reader came: every ``MAX_AGE / 2`` while readers keep coming (less often when a copy
        costs more than :data:`COPY_SHARE` of that), every ``MAX_STALE / 2`` for a while
        after (the next reader, even the first in minutes, finds one it may be given while a
        pass holds the loop), none after :data:`KEEP_READY`."""
        if since_read <= KEEP_WARM:
            return self._every
        if since_read <= KEEP_READY:
            return self._max_stale / 2
        return None

    def _keep_warm(self, node_ids: frozenset[str]) -> None:
        """Ask for a new copy unasked (on the engine's loop, while readers keep coming)."""
        self._warm = None
        self._ask(node_ids)


class WireWriter:
    """Writes the copies for one list worker process (:class:`WiredCopies` reads them there,
    in the same order): of each node's usage only what the lists read (:class:`ShownUsage`),
    and only when it or the node's last-heard time changed since the copy written before;
    the nodes only when they changed. Between two copies a second apart most nodes of a
    large cluster are as they were: every field of 5,000 nodes' usages pickled was 7-13 ms
    of CPU a copy in Orchestrate's process (in GIL turns with the engine's thread), and
    reading them back 5-12 ms of the worker's."""

    def __init__(self) -> None:
        #: what the copy written before held
        self._usages: Mapping[str, UsageShown] = {}
        self._heard: Mapping[str, float] = {}
        self._nodes: frozenset[str] | None = None

    def write(self, copy: NodeUsageCopy) -> bytes:
        """``copy`` as bytes, given the copy written before: each usage that changed as a
        plain tuple, an empty mapping of devices as ``None`` (a ``NodeUsage`` holds
        read-only mappings, which pickle refuses, and most nodes' are empty)."""
        before, heard_before = self._usages, self._heard
        if copy.usages is before:  # the scheduler changed none since: none to write
            usages: list[tuple[Any, ...]] = []
            gone: list[str] = []
        else:
            usages = [
                (
                    node_id,
                    u.capacity.cores,
                    u.capacity.memory,
                    _wired(u.capacity.devices),
                    u.used_cores,
                    u.used_memory,
                    _wired(u.used_devices),
                    u.job_ids,
                )
                for node_id, u in copy.usages.items()
                # what the lists read, the likeliest to change first, inline (a call a node
                # was a third of the comparisons' CPU); a node's capacity is the same object
                # while its registration stands
                if (last := before.get(node_id)) is None
                or last.job_ids != u.job_ids
                or last.used_cores != u.used_cores
                or last.used_memory != u.used_memory
                or last.used_devices != u.used_devices
                or (last.capacity is not u.capacity and last.capacity != u.capacity)
            ]
            gone = [node_id for node_id in before if node_id not in copy.usages]
        heard = {n: t for n, t in copy.heard.items() if heard_before.get(n) != t}
        unheard = [node_id for node_id in heard_before if node_id not in copy.heard]
        nodes = None if copy.nodes == self._nodes else list(copy.nodes)
        self._usages, self._heard, self._nodes = copy.usages, copy.heard, copy.nodes
        return pickle.dumps((copy.made, nodes, usages, gone, heard, unheard), protocol=5)


def _wired(mapping: Mapping[str, int]) -> dict[str, int] | None:
    return dict(mapping) if mapping else None


class WiredCopies:
    """Reads the copies a :class:`WireWriter` wrote (from the engine's process: trusted
    bytes), one after another: a node not in a copy's bytes keeps the usage and last-heard
    time it had in the copy read before (the same :class:`ShownUsage`)."""

    def __init__(self) -> None:
        self._usages: dict[str, UsageShown] = {}
        self._heard: dict[str, float] = {}
        self._nodes: frozenset[str] = frozenset()
        # most nodes of a cluster have the same capacity: one Resources for them all
        self._capacities: dict[tuple[int, int, tuple[tuple[str, int], ...]], Resources] = {}

    def read(self, data: bytes) -> NodeUsageCopy:
        """The copy ``data`` holds."""
        made, nodes, wired, gone, heard, unheard = pickle.loads(data)
        capacities = self._capacities
        # new mappings each copy: a copy read before is never changed
        usages = dict(self._usages)
        for node_id, cores, memory, devices, used_cores, used_memory, used, job_ids in wired:
            key = (cores, memory, tuple(sorted((devices or {}).items())))
            capacity = capacities.get(key)
            if capacity is None:
                capacity = capacities[key] = Resources(cores, memory, devices or {})
            usages[node_id] = ShownUsage(capacity, used_cores, used_memory, used or {}, job_ids)
        for node_id in gone:
            del usages[node_id]
        last_heard = dict(self._heard)
        last_heard.update(heard)
        for node_id in unheard:
            del last_heard[node_id]
        if nodes is not None:
            self._nodes = frozenset(nodes)
        self._usages, self._heard = usages, last_heard
        return NodeUsageCopy(made, self._nodes, usages, last_heard)
