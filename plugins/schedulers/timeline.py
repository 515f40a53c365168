"""When could a job start? Replays running jobs' expected ends against the node index.

The default scheduler asks this for two things each pass: the EASY-backfill reservation of the
first job that cannot start (which nodes, from when, and how much room those nodes keep for
other work), and an estimated start for every other shape left waiting.

The replay walks running allocations in order of expected end (``start + expected_runtime``;
jobs with no expected runtime end at infinity), gives each ending job's capacity back to a
*shadow* copy of the nodes it touched, and stops as soon as every question is answered. Only
nodes that take new work count: capacity coming back on a held or not-ready node helps no one.
Other pending work is ignored, so an estimate for anything but the reservation is a lower
bound.

The estimated starts (questions of start only) are replayed in one C call over the node
index's book (:func:`replay_starts`): the running jobs' ends walked from the C store, each
job given back from its entries, without a Python record read; the reservation's replay,
which also needs its nodes and their room, is :func:`replay_ends`. Both answer a question
alike (the C one is checked against it in the tests), and the Python one is made for the
estimates too when the book lacks a job's entries.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzzball_core.scheduling import JobShape
from fuzzball_plugins.schedulers._free_index import ffi, lib
from fuzzball_plugins.schedulers.node_index import IndexedNode, NodeClass, NodeIndex, Usage

#: How many job handles a walk's buffer holds at first (it grows for an end with more jobs).
_WALK_ROOM = 256

#: A running job as the replay reads it: a record whose first item is the ids of its nodes
#: and whose last is its entry in the node index's book, or a tuple of them for a job of
#: several nodes, one per node id in order (the scheduler's allocation
#: record, a plain tuple: see ``default._Allocation``).
Running = tuple[Any, ...]


@dataclass(eq=False)
class StartQuery:
    """One question for the replay: from when do ``shape.nodes`` nodes have room for ``shape``?

    ``request_keys`` maps each class the shape may run on to the request as a free key of that
    class. ``fitting`` starts with the nodes that have room now and grows, in the order nodes
    gain room, until it holds enough; ``start`` is then the time that happened (``math.inf``
    when it took a job with no expected end). ``start`` stays None when the nodes that take
    new work can never hold the shape.
    """

    shape: JobShape
    request_keys: Mapping[NodeClass, tuple[int, ...]]
    fitting: dict[str, None] = field(default_factory=dict)
    start: float | None = None

    @property
    def answered(self) -> bool:
        """True once enough nodes have room."""
        return len(self.fitting) >= self.shape.nodes


class EndsByClass:
    """Running jobs' expected ends kept per node class, by the class's number
    (:attr:`NodeClass.number`), in C (``csrc/end_times.c``, ``fi_ends`` in free_index.h).

    A replay's questions can use only a few classes (in the churn benchmark 2-3 of 16), and
    a job ending on nodes of other classes gives them nothing: walking every running job's
    end spent nine steps in ten on such jobs. A job is listed under each distinct class of
    its nodes; :meth:`walk` merges the lists of the classes asked about, each job once.

    Per class the C store keeps the distinct ends ascending and each end's jobs in id order
    (ids as UTF-8 bytes, compared bytewise: the order of Python's str), so a placement's
    addition and a release's removal are one C call each, where the dicts and lists they
    were kept in as Python objects cost a placement and a release a few cold reads each
    (5-6 % of the churn run). The scheduler's placements and releases call the C store
    themselves (:attr:`store`); these methods are the same calls for everyone else.
    """

    __slots__ = ("store",)

    def __init__(self) -> None:
        store = lib.fi_ends_new()
        if store == ffi.NULL:
            raise MemoryError("no memory for the running jobs' ends")
        #: the C store (fi_ends), freed with this object
        self.store = ffi.gc(store, lib.fi_ends_free)

    def add(self, number: int, end: float, job_id: str, entry: int = -1) -> None:
        """``job_id`` runs until ``end`` on nodes of class ``number`` (once per class);
        ``entry``: its first entry in the node index's book, which the estimated starts'
        replay in C gives back from (-1: none, and such a replay is made in Python)."""
        data = job_id.encode("utf-8", "surrogatepass")
        if lib.fi_end_add(self.store, number, end, data, len(data), entry):
            raise MemoryError(f"no memory to list job {job_id}'s end")

    def remove(self, number: int, end: float, job_id: str) -> None:
        """``job_id``, added under class ``number`` with ``end``, no longer runs (KeyError
        when it is not listed so)."""
        data = job_id.encode("utf-8", "surrogatepass")
        if lib.fi_end_remove(self.store, number, end, data, len(data)):
            raise KeyError(job_id)

    def count(self, number: int) -> int:
        """How many jobs are listed under class ``number``."""
        return int(lib.fi_ends_count(self.store, number))

    def walk(self, classes: Iterable[NodeClass]) -> EndsWalk:
        """``(end, ids of the jobs ending then, sorted)`` ascending, of every job running on
        nodes of ``classes`` (each job once): an :class:`EndsWalk`, which a replay narrows
        as its questions' classes are answered. Nothing may be added or removed while it is
        walked."""
        return EndsWalk(self.store, sorted({cls.number for cls in classes}))


class EndsWalk:
    """The ``(end, job ids)`` of several classes' ends ascending, each end and job once,
    that can be narrowed to fewer classes as it goes (:meth:`keep`): one C call per end.

    A replay answers its questions of some classes long before others: in the churn
    benchmark three job steps in four were jobs of classes whose questions were all
    answered, walked for nothing until the last question was.
    """

    __slots__ = (
        "_count",
        "_cursors",
        "_end",
        "_jobs",
        "_lengths",
        "_numbers",
        "_out",
        "_plain",
        "_room",
        "_store",
    )

    def __init__(self, store: Any, numbers: Sequence[int]) -> None:
        self._store = store
        self._count = len(numbers)
        #: the classes walked, and where each one's walk stands (see fi_ends_next)
        self._numbers = ffi.new("int32_t[]", list(numbers))
        self._cursors = ffi.new("int32_t[]", self._count)
        #: what fi_ends_next writes: the end, its jobs' ids and their lengths, how many,
        #: whether no id holds a NUL byte
        self._end = ffi.new("double[1]")
        self._jobs = ffi.new("int32_t[1]")
        self._plain = ffi.new("int32_t[1]")
        self._room = _WALK_ROOM
        self._out = ffi.new("char[]", _WALK_ROOM)
        self._lengths = ffi.new("int32_t[]", _WALK_ROOM)

    def __iter__(self) -> EndsWalk:
        # an iterator by these two methods, not by subclassing collections.abc.Iterator:
        # the replay's isinstance check would go through ABCMeta each time
        return self

    def keep(self, numbers: Container[int]) -> None:
        """Walk on over the classes of ``numbers`` only (their jobs still each once)."""
        kept = [
            (number, cursor)
            for number, cursor in zip(self._numbers, self._cursors, strict=True)
            if number in numbers
        ]
        self._count = len(kept)
        self._numbers = ffi.new("int32_t[]", [number for number, _ in kept])
        self._cursors = ffi.new("int32_t[]", [cursor for _, cursor in kept])

    def __next__(self) -> tuple[float, list[str]]:
        while True:
            size = lib.fi_ends_next(
                self._store,
                self._numbers,
                self._count,
                self._cursors,
                self._end,
                self._out,
                self._lengths,
                self._room,
                self._jobs,
                self._plain,
            )
            if size >= 0:
                break
            if size == -1:
                raise StopIteration
            if size == -2:
                raise MemoryError("no memory to walk the running jobs' ends")
            # the end's ids need more room than the buffer has: asked again with it
            self._room = -3 - size
            self._out = ffi.new("char[]", self._room)
            self._lengths = ffi.new("int32_t[]", self._room)
        text = ffi.unpack(self._out, size)
        if self._plain[0]:
            # one decode and split per end, not a step per job
            ids = text.decode("utf-8", "surrogatepass").split("\0")
            ids.pop()  # after the last id's NUL
            return self._end[0], ids
        # an id holds a NUL byte: the ids are cut by their lengths
        ids = []
        at = 0
        for length in ffi.unpack(self._lengths, self._jobs[0]):
            ids.append(text[at : at + length].decode("utf-8", "surrogatepass"))
            at += length + 1
        return self._end[0], ids


class Shadow:
    """Nodes' free capacity at a future moment, copied from the index on first touch."""

    __slots__ = ("_index", "state")

    def __init__(self, index: NodeIndex) -> None:
        self._index = index
        #: node id -> [free key as a list, free memory, jobs still running]
        self.state: dict[str, list] = {}

    def free_of(self, node: IndexedNode) -> tuple[list[int], int, int]:
        """The node's shadow free key, free memory and running-job count."""
        state = self.state.get(node.id)
        if state is None:
            return self._index.state_of(node)
        return state[0], state[1], state[2]

    def give_back(self, node: IndexedNode, usage: Usage) -> list:
        """Return a job's ``usage`` on ``node`` to the shadow and the node's new state."""
        state = self.state.get(node.id)
        if state is None:
            state = list(self._index.state_of(node))
            self.state[node.id] = state
        cores, memory, devices = usage
        key = state[0]
        key[-1] += cores
        state[1] += memory
        kinds = node.cls.device_kinds
        for kind, count in devices:
            if kind in kinds:
                key[kinds.index(kind)] += count
        state[2] -= 1
        return state


def replay_ends(
    index: NodeIndex,
    ends: Iterable[tuple[float, Collection[str]]],
    allocations: Mapping[str, Running],
    queries: Iterable[StartQuery],
    shadow: Shadow | None = None,
) -> Shadow:
    """Answer ``queries`` by giving back running jobs' capacity in order of expected end.

    ``ends`` yields ``(expected end, ids of the jobs ending then)`` ascending
    (:meth:`EndsByClass.walk`); ``allocations`` maps a running job's id to its record, whose
    first item is its node ids. Returns the shadow as it stood when the last query was
    answered (or when the running jobs ran out), so a caller can read the reserved nodes'
    room at that moment.
    """
    shadow = shadow or Shadow(index)
    open_queries = [query for query in queries if not query.answered]
    if not open_queries:
        return shadow
    # each class's open questions with the request as a free key of that class: a node
    # coming free is asked about only by the questions that could run there, and a node of
    # a class no question wants is not even copied into the shadow
    by_class = _questions_by_class(open_queries)
    still_open = len(open_queries)
    # a walk over several classes goes on over the asked ones only (see EndsWalk)
    narrow = ends.keep if isinstance(ends, EndsWalk) else None
    if narrow is not None:
        narrow({cls.number for cls in by_class})
    nodes = index.nodes
    give_back = shadow.give_back
    usage_at = index.usage_at
    for end, job_ids in ends:
        for job_id in job_ids:
            answered: list[StartQuery] = []
            allocation = allocations[job_id]
            # the job's entries name its usage on each node: one entry for a one-node job,
            # else one per node, in the order of its node ids
            entries = allocation[-1]
            for at, node_id in enumerate(allocation[0]):
                node = nodes[node_id]
                if node.unavailable_label is not None:
                    continue
                asking = by_class.get(node.cls)
                if asking is None:
                    continue
                # a one-node job's charge is its usage there (see DefaultScheduler._record)
                usage = allocation[2] if entries.__class__ is int else usage_at(entries[at])
                free_key, free_memory, running = give_back(node, usage)
                for query, request_key, fitting, memory, exclusive, needed in asking:
                    if node_id in fitting:
                        continue
                    if exclusive:
                        if running:
                            continue
                    elif free_memory < memory:
                        break  # the later questions ask at least as much memory
                    elif len(request_key) == 1:
                        # no device kinds: the cores alone, without a call
                        if free_key[0] < request_key[0]:
                            continue
                    elif len(request_key) == 2:
                        # one device kind (a GPU node): its count and the cores, without a
                        # call (the call was 3 % of the churn run)
                        if free_key[0] < request_key[0] or free_key[1] < request_key[1]:
                            continue
                    elif not _covers(free_key, request_key):
                        continue
                    fitting[node_id] = None
                    if len(fitting) >= needed and query.start is None:
                        query.start = end
                        answered.append(query)
            if answered:
                # each question is answered once (its start is set as it is)
                still_open -= len(answered)
                if not still_open:
                    return shadow
                if _drop_answered(by_class, answered) and narrow is not None:
                    narrow({cls.number for cls in by_class})
    return shadow


#: One start question for :func:`replay_starts`: the shape, the classes it may run on with
#: its request as a C array of each one's key (:attr:`NodeIndex.request_array`), in two
#: lists, and the ids of the nodes that have room for it now (fewer than it needs)
StartAsk = tuple[JobShape, tuple[list[int], list[Any]], Collection[str]]


def replay_starts(
    index: NodeIndex, ends: EndsByClass, asks: Sequence[StartAsk]
) -> list[float | None] | None:
    """Each question's start (the end at which enough nodes have room; None when never) as
    :func:`replay_ends` would answer it, in one C call over the book's entries
    (``fi_replay``) instead of a walk of Python records; None when a job or node is not
    recorded for it (then nothing is answered: the caller replays in Python)."""
    ask_number: list[int] = []
    asked_by: list[int] = []
    asked_key: list[Any] = []
    memory: list[int] = []
    exclusive: list[bool] = []
    needed: list[int] = []
    seed_start = [0]
    seeds: list[int] = []
    nodes = index.nodes
    for at, (shape, (numbers, keys), fitting) in enumerate(asks):
        ask_number += numbers
        asked_key += keys
        asked_by += [at] * len(numbers)
        memory.append(shape.memory)
        exclusive.append(shape.exclusive)
        needed.append(shape.nodes)
        if fitting:
            seeds.extend([nodes[node_id].slot for node_id in fitting])
        seed_start.append(len(seeds))
    count = len(asks)
    starts = ffi.new("double[]", count)
    failed = lib.fi_replay(
        index.book,
        ends.store,
        len(ask_number),
        ask_number,
        asked_by,
        asked_key,
        count,
        memory,
        exclusive,
        needed,
        seed_start,
        seeds,
        starts,
    )
    if failed < 0:
        raise MemoryError("no memory to replay the running jobs' ends")
    if failed:
        return None
    return [None if math.isnan(start) else start for start in ffi.unpack(starts, count)]


def _drop_answered(by_class: dict[NodeClass, list[_Asking]], answered: list[StartQuery]) -> bool:
    """Take the ``answered`` questions out of the lists of the classes they ask about (in
    place, order kept), and the classes left with none; True when a class was left with
    none. Rebuilding every list from the open questions cost as much again each time one
    of a replay's 20-odd questions was answered, and filtering every class's list, not only
    the answered questions' few, 4 % of the churn run."""
    dropped = False
    for cls in {cls for query in answered for cls in query.request_keys}:
        asking = by_class.get(cls)
        if asking is None:
            continue
        still = [entry for entry in asking if entry[0].start is None]
        if not still:
            del by_class[cls]
            dropped = True
        elif len(still) != len(asking):
            by_class[cls] = still
    return dropped


#: One question as a class's list holds it: the query, the request as a free key of the
#: class, the query's fitting nodes, and the shape's memory, exclusivity and node count (read
#: once here, not for every node a replay gives back)
_Asking = tuple[StartQuery, tuple[int, ...], dict[str, None], int, bool, int]


def _questions_by_class(queries: Sequence[StartQuery]) -> dict[NodeClass, list[_Asking]]:
    """Each class's questions, with the request as a free key of that class: the exclusive
    ones first, then by the memory they ask, so that a freed node's walk stops at the first
    question asking more memory than it has (a question's answer does not depend on the
    others', so their order within a class is free)."""
    by_class: dict[NodeClass, list[_Asking]] = {}
    for query in queries:
        shape = query.shape
        for cls, request_key in query.request_keys.items():
            asking = (query, request_key, query.fitting, shape.memory, shape.exclusive, shape.nodes)
            by_class.setdefault(cls, []).append(asking)
    for asking_list in by_class.values():
        asking_list.sort(key=_memory_asked)
    return by_class


def _memory_asked(asking: _Asking) -> int:
    """The sort key of a class's questions: -1 for an exclusive one (it needs an idle node,
    whatever its memory: strictly before every other, so that no stop skips it), else the
    memory it asks."""
    return -1 if asking[4] else asking[3]


def _covers(have: list[int], need: tuple[int, ...]) -> bool:
    """True when every component of ``have`` is at least the one of ``need``."""
    # a plain loop: it runs for every question a freed node is asked about
    for available, wanted in zip(have, need, strict=True):  # noqa: SIM110
        if available < wanted:
            return False
    return True


def start_or_none(start: float | None) -> float | None:
    """A replayed start as callers report it: None when unknown (infinite or never)."""
    if start is None or math.isinf(start):
        return None
    return start
