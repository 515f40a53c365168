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
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Collection, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzzball_core.scheduling import JobShape
from fuzzball_plugins.schedulers.node_index import IndexedNode, NodeClass, NodeIndex

#: A running job as the replay reads it: a record whose first item is the ids of its nodes
#: (the scheduler's allocation record, a plain tuple: see ``default._Allocation``).
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


class EndTimes:
    """Running jobs' expected ends, iterated as ``(end, job id)`` ascending.

    Jobs placed in one pass with one timeout share their end, so the jobs are kept in one
    bucket per distinct end (job ids sorted within it) and only the distinct ends in a sorted
    list, bisected when a bucket is made or emptied, where one sorted list of every running
    job's ``(end, job id)`` shifted tens of thousands of entries at each placement and each
    release.

    A bucket is a dict of job ids (values None) in sorted order: a release takes its job
    out by the id's hash, where bisecting a sorted list compared it with several other ids,
    each a string read cold from memory (the job's own id is in the cache: the release has
    just looked it up). Ids mostly come in sorted order (a pass places jobs in queue
    order); a bucket an id came into out of order is sorted before it is next walked.
    """

    __slots__ = ("_buckets", "_last", "_times", "_unsorted")

    def __init__(self) -> None:
        #: the distinct ends, ascending (``math.inf`` for jobs with no expected end)
        self._times: list[float] = []
        #: end -> ids of the jobs expected to end then, sorted (but see ``_unsorted``)
        self._buckets: dict[float, dict[str, None]] = {}
        #: end -> the greatest id ever added to its bucket (a later one goes last in order)
        self._last: dict[float, str] = {}
        #: the ends whose bucket took an id out of order since it was last walked
        self._unsorted: set[float] = set()

    def add(self, end: float, job_id: str) -> None:
        """``job_id`` runs until ``end``."""
        bucket = self._buckets.get(end)
        if bucket is None:
            self._buckets[end] = {job_id: None}
            self._last[end] = job_id
            insort(self._times, end)
            return
        bucket[job_id] = None
        if job_id > self._last[end]:
            self._last[end] = job_id  # the usual case: a pass places jobs in queue order
        else:
            self._unsorted.add(end)

    def remove(self, end: float, job_id: str) -> bool:
        """``job_id``, added with ``end``, no longer runs; True when no job is left."""
        bucket = self._buckets[end]
        del bucket[job_id]
        if bucket:
            return False
        del self._buckets[end]
        del self._last[end]
        self._unsorted.discard(end)
        times = self._times
        del times[bisect_left(times, end)]
        return not times

    def sort(self) -> None:
        """Put the ids of the buckets that took one out of order back in order."""
        buckets = self._buckets
        for end in self._unsorted:
            buckets[end] = dict.fromkeys(sorted(buckets[end]))
        self._unsorted.clear()

    def __iter__(self) -> Iterator[tuple[float, str]]:
        for end, job_ids in self.buckets():
            for job_id in job_ids:
                yield end, job_id

    def buckets(self) -> Iterator[tuple[float, Collection[str]]]:
        """``(end, ids of the jobs ending then)`` ascending: what a replay walks. One pair
        per distinct end, made without a Python frame, where a generator of ``(end, job
        id)`` pairs was resumed once per running job (placed in one pass with one timeout,
        tens of jobs share an end)."""
        if self._unsorted:
            self.sort()
        times = self._times
        return zip(times, map(self._buckets.__getitem__, times), strict=True)

    def __len__(self) -> int:
        return sum(map(len, self._buckets.values()))

    def __bool__(self) -> bool:
        # without it, truth would count every bucket (__len__)
        return bool(self._times)


class EndsByClass:
    """Running jobs' expected ends kept per node class (an :class:`EndTimes` each), by the
    class's number (:attr:`NodeClass.number`).

    A replay's questions can use only a few classes (in the churn benchmark 2-3 of 16), and
    a job ending on nodes of other classes gives them nothing: walking every running job's
    end spent nine steps in ten on such jobs. A job is listed under each distinct class of
    its nodes; :meth:`walk` merges the lists of the classes asked about, each job once.
    """

    __slots__ = ("_by_class",)

    def __init__(self) -> None:
        self._by_class: dict[int, EndTimes] = {}

    def add(self, number: int, end: float, job_id: str) -> None:
        """``job_id`` runs until ``end`` on nodes of class ``number`` (once per class)."""
        ends = self._by_class.get(number)
        if ends is None:
            ends = self._by_class[number] = EndTimes()
        else:
            # most additions: a job behind the last of an end's bucket, written here (the
            # call to EndTimes.add was a fifth of a placement's bookkeeping)
            bucket = ends._buckets.get(end)
            if bucket is not None and job_id > ends._last[end]:
                bucket[job_id] = None
                ends._last[end] = job_id
                return
        ends.add(end, job_id)

    def remove(self, number: int, end: float, job_id: str) -> None:
        """``job_id``, added under class ``number`` with ``end``, no longer runs."""
        ends = self._by_class[number]
        bucket = ends._buckets[end]
        if len(bucket) > 1:
            # most removals: the bucket keeps other jobs, written here (as above)
            del bucket[job_id]
            return
        # the removal tells whether the list emptied (asking the list was one more call)
        if ends.remove(end, job_id):
            del self._by_class[number]

    def walk(self, classes: Iterable[NodeClass]) -> Iterator[tuple[float, Collection[str]]]:
        """``(end, ids of the jobs ending then, sorted)`` ascending, of every job running on
        nodes of ``classes`` (each job once). Over several classes the walk is an
        :class:`EndsWalk`, which a replay narrows as its questions' classes are answered."""
        by_class = self._by_class
        numbers = {cls.number for cls in classes}
        lists = {number: by_class[number] for number in numbers if number in by_class}
        if len(lists) == 1:
            return next(iter(lists.values())).buckets()
        return EndsWalk(lists)


class EndsWalk:
    """The ``(end, job ids)`` of several classes' :class:`EndTimes` ascending, each end and
    job once, that can be narrowed to fewer classes as it goes (:meth:`keep`).

    Only the distinct ends are merged (floats, a few hundred), not every job's pair: each
    end's jobs are its bucket, or the sorted union of its buckets when several lists have
    that end (a job on nodes of several classes is listed in each). A replay answers its
    questions of some classes long before others: in the churn benchmark three job steps
    in four were jobs of classes whose questions were all answered, walked for nothing
    until the last question was.
    """

    __slots__ = ("_live",)

    def __init__(self, lists: Mapping[int, EndTimes]) -> None:
        for ends in lists.values():
            if ends._unsorted:
                ends.sort()
        #: class number -> [its distinct ends, its buckets, the position of its next end]
        self._live: dict[int, list[Any]] = {
            number: [ends._times, ends._buckets, 0] for number, ends in lists.items()
        }

    def __iter__(self) -> EndsWalk:
        # an iterator by these two methods, not by subclassing collections.abc.Iterator:
        # the replay's isinstance check would go through ABCMeta each time
        return self

    def keep(self, numbers: Container[int]) -> None:
        """Walk on over the classes of ``numbers`` only (their jobs still each once)."""
        live = self._live
        for number in [number for number in live if number not in numbers]:
            del live[number]

    def __next__(self) -> tuple[float, Collection[str]]:
        cursors = [cursor for cursor in self._live.values() if cursor[2] < len(cursor[0])]
        if not cursors:
            raise StopIteration
        end = min(cursor[0][cursor[2]] for cursor in cursors)
        buckets = []
        for cursor in cursors:
            if cursor[0][cursor[2]] == end:
                buckets.append(cursor[1][end])
                cursor[2] += 1
        return end, buckets[0] if len(buckets) == 1 else sorted(set().union(*buckets))


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
            return [*node.free_devices, node.free_cores], node.free_memory, len(node.jobs)
        return state[0], state[1], state[2]

    def give_back(self, node: IndexedNode, job_id: str) -> list:
        """Return ``job_id``'s usage on ``node`` to the shadow and the node's new state."""
        state = self.state.get(node.id)
        if state is None:
            state = [[*node.free_devices, node.free_cores], node.free_memory, len(node.jobs)]
            self.state[node.id] = state
        cores, memory, devices = node.jobs[job_id]
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
    for end, job_ids in ends:
        for job_id in job_ids:
            answered: list[StartQuery] = []
            for node_id in allocations[job_id][0]:
                node = nodes[node_id]
                if node.unavailable_label is not None:
                    continue
                asking = by_class.get(node.cls)
                if asking is None:
                    continue
                free_key, free_memory, running = give_back(node, job_id)
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
