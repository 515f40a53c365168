"""The default scheduler: best-fit placement, fair share with EASY backfill, Kubernetes-style
reasons.

Registered as ``default`` in the ``fuzzball.schedulers`` entry-point group.

A pass (:meth:`DefaultScheduler.schedule`) walks the pending jobs in fair-share order (see
:mod:`.fair_share`: the accounts using least of their share of the cluster first; plain queue
order, FIFO, when fair share is off or every waiting job is of one account). A job that
fits is placed at once on the best-fitting nodes (see :mod:`.node_index` for the search and
the order classes are tried in). The first job that does not fit and that the ready, unheld
nodes could hold once running work ends becomes the *reservation*: the replay in
:mod:`.timeline` finds the earliest time enough nodes have room for it and which nodes those
are. Every later job may still start now (backfill) provided it cannot delay that
reservation: it either ends before the reservation starts, or it fits in the room the reserved
nodes keep beyond what the reserved job needs. Jobs that were not placed are diagnosed by
:mod:`.diagnostics`, once per distinct :class:`~fuzzball_core.scheduling.JobShape` and
situation; while no node class is annotated ``PLACE_UNTIL`` a shape's runtime has no say in
where it can go, so shapes that differ only by it are answered (planned, surveyed, given an
estimated start) as one. Once a shape has failed in a pass, the later jobs of that very shape
join its group without another look (capacity only shrinks during a pass).

Jobs that ask for a CPU layout or host ports take the general search: each node with room by
count is also asked whether its free cores allow the layout and its host ports are free
(:meth:`.IndexedNode.refusal`), and the placement names the logical CPUs each node gives a
pinned job. Reservations and estimated starts count capacity only, so for those jobs they are
a lower bound; placement itself is exact.

A multinode job with a domain policy (``multinode.nvlink-domain``) is kept inside one NVLink
domain when one has enough nodes with room (:mod:`.domains`); one that prefers it spreads
otherwise, its placement noting why; one that requires it waits, never holding the
reservation (its nodes must all come from one domain, which the replay does not model).

Configuration (the driver's mapping, ``scheduler.options`` in the configuration file):

``estimate_starts`` (bool, default true)
    Replay running jobs' ends for every shape left waiting to give it an estimated start.
    The reservation always gets one.
``fair_share`` (mapping)
    ``enabled`` (default true), ``half_life`` (default ``168h``), ``shares`` (account id ->
    shares, default 1 each), ``organization_shares`` (organization -> shares, default 1
    each), ``weights`` (``fair_share``, default 1; ``age``, default 0) and ``max_age``
    (default ``168h``); see :mod:`.fair_share`.
"""

from __future__ import annotations

import itertools
import math
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from types import MappingProxyType
from typing import Any, TypeVar

from fuzzball_core.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
)
from fuzzball_core.scheduling import (
    CpuPinning,
    Diagnosis,
    DomainPolicy,
    JobRequest,
    JobShape,
    NodeInfo,
    NodeUsage,
    Placement,
    QueueChanges,
    ReasonCode,
    Reservation,
    Scheduler,
    ScheduleResult,
)
from fuzzball_plugins.schedulers import domains
from fuzzball_plugins.schedulers._free_index import ffi, lib
from fuzzball_plugins.schedulers.cpu_layout import cores_of, logical_cpus
from fuzzball_plugins.schedulers.diagnostics import RESERVED, Diagnostics, Survey
from fuzzball_plugins.schedulers.fair_share import (
    AccountUse,
    Charge,
    FairShare,
    FairShareConfig,
    Queue,
)
from fuzzball_plugins.schedulers.node_index import (
    NO_SLOTS,
    ClassList,
    IndexedNode,
    NodeClass,
    NodeIndex,
    SlotSet,
    Usage,
)
from fuzzball_plugins.schedulers.queue_run import QueueRuns
from fuzzball_plugins.schedulers.timeline import (
    EndsByClass,
    StartAsk,
    StartQuery,
    replay_ends,
    replay_starts,
    start_or_none,
)

#: the driver's options (``scheduler.options``)
_OPTIONS = ("estimate_starts", "fair_share")
#: the C call unlisting a running job's end (see EndsByClass)
remove_end = lib.fi_end_remove
release_entry = lib.fi_release_entry
#: the C call releasing a one-node job with devices (see DefaultScheduler.release)
release_devices = lib.fi_release_devices
#: the C call placing a one-node job (see NodeIndex.place)
place_call = lib.fi_place
#: the C calls placing and releasing a job of several nodes (see DefaultScheduler._spread)
place_nodes = lib.fi_place_nodes
release_nodes = lib.fi_release_nodes
#: the C calls placing and releasing an exclusive job of one node (see DefaultScheduler._whole)
place_whole = lib.fi_place_whole
release_whole = lib.fi_release_whole
#: How many shapes' feasibility verdicts are kept by shape object before the table starts
#: over (shapes are interned, so a few hundred normally; more only when their table
#: started over)
_STATIC_BOUND = 4096

# Why a job was left waiting in a pass; decides its reason code and how it is surveyed.
_NO_ROOM = 0  # no reservation was held yet when it failed
_HOLDER = 1  # it failed first and now holds the reservation
_BACKFILL_NO_ROOM = 2  # a reservation was held; too few nodes had room
_REFUSED = 3  # a reservation was held; the nodes with room were kept for it
_INFEASIBLE = 4  # no registered node could ever hold it
_NO_DOMAIN = 5  # enough nodes have room, but no NVLink domain has enough (and it requires one)
_BACKFILL = frozenset({_BACKFILL_NO_ROOM, _REFUSED})
#: a blocked key's sets, as bits (see DefaultScheduler._pass's ``blocked``)
_IN_NO_ROOM = 1
_IN_INFEASIBLE = 2
_IN_REFUSED = 4
#: reasons that fair share may put first: a job waits for room others took
_WAITS_FOR_ROOM = frozenset({ReasonCode.INSUFFICIENT_RESOURCES, ReasonCode.BACKFILL_NO_FIT})
#: situations whose estimated start is the reservation's
_STARTS_WITH_RESERVATION = frozenset({_HOLDER, _REFUSED})
#: how many shapes the pass keys remember before starting over (equal shapes of distinct
#: objects each take an entry, so this bounds memory, not the number of distinct shapes)
_KEYS_BOUND = 50_000
#: queue order within an account (see JobRequest.order_key)
_ORDER = attrgetter("order_key")
_SHAPE = attrgetter("shape")
_ID = attrgetter("id")
_JOB_ID = attrgetter("job_id")
_ACCOUNT_OF = attrgetter("account")
_Items = TypeVar("_Items", list[JobRequest], "array[int]")
#: a filtering pass over the queue copy costs about this many bisected removals
_BISECTS_PER_FILTER = 32
#: jobs a queue copy made whole gives its queue in C per call
_FILL_CHUNK = 16384


#: A running job as the scheduler remembers it: its node ids, its expected end, what it holds
#: on all its nodes together (its account's fair-share charge), the numbers of the classes its
#: end is listed under (see EndsByClass; each once), its account, the CPU layout it asked
#: for and its entry in the node index's book (NodeIndex.release_entry; a job of several
#: nodes: a tuple of its entries, one per node id in order). A plain tuple, read by the
#: positions below: one of strings, numbers and tuples of them (and None for a job without a
#: CPU layout) is untracked by the cyclic collector after its
#: first young collection, where an object per running job (a slotted class, holding the job
#: and its nodes' classes) lived until a full collection and made those come sooner and walk
#: longer (tens of thousands of running jobs).
_Allocation = tuple[
    tuple[str, ...], float, Charge, tuple[int, ...], str, CpuPinning | None, int | tuple[int, ...]
]
_NODE_IDS, _END, _CHARGE, _CLASSES, _ACCOUNT, _PINNING, _ENTRY = range(7)


class _Running(dict[str, _Allocation]):
    """Job id -> :data:`_Allocation` of every running job.

    A dict subclass only so that the cyclic collector never untracks it: it untracks a plain
    dict whose keys and values are all untracked (as the records are), and each insertion
    of a new record then tracked it again as a young object, so that every young collection
    walked all its entries (with 600,000 running jobs at 100,000 nodes a placement cost
    twice as much). The collector leaves a subclass's instance tracked, in the oldest
    generation, where only full collections walk it.
    """

    __slots__ = ()


@dataclass(eq=False)
class _Plan:
    """Where a shape may run: the statically suitable classes, most preferred first."""

    classes: list[tuple[NodeClass, tuple[int, ...]]]
    #: the classes as C arrays when a job of the shape is placed by one C call
    #: (:meth:`NodeIndex.place`: one node, not exclusive, no CPU layout, host ports or domain
    #: policy, devices or not, no class annotated PLACE_UNTIL or taking one job at a time),
    #: else None
    fast: ClassList | None = None
    #: the classes as C arrays for the search of a job of several nodes or an exclusive one
    #: (:meth:`NodeIndex.choose`) when no class is annotated PLACE_UNTIL, else None
    search: ClassList | None = None
    #: a job's usage of one node, (cores, memory, device items), one tuple for every job of
    #: the shape (the placements by one C call record it: a new tuple per placement was one
    #: more object per running job for the cyclic collector and for memory)
    usage: Usage = (0, 0, ())
    #: ``usage``'s number in the node index's table (what the book's entries keep)
    usage_number: int = -1
    #: the classes' numbers and the request as a C array of each one's key, for the
    #: estimated starts' replay in C (:func:`.timeline.replay_starts`)
    asks: tuple[list[int], list[Any]] = ([], [])
    #: the plan's number among the scheduler's current plans (its slot in the pass's count
    #: of leading classes without room, which the walk in C reads and raises too)
    number: int = -1
    #: ``search`` when a job of the shape is placed and recorded by one C call
    #: (:meth:`DefaultScheduler._spread`: several nodes, not exclusive, no devices, CPU
    #: layout, host ports or domain policy, no class taking one job at a time), else None
    spread: ClassList | None = None
    #: the classes' capacities as C arrays when an exclusive job of the shape is placed and
    #: recorded by one C call (:meth:`DefaultScheduler._whole`: one node, no CPU layout,
    #: host ports or domain policy, no class annotated PLACE_UNTIL), else None
    whole: WholeList | None = None
    #: the same as class -> request key, read-only: built once, not at every placement
    #: under a reservation and every start question
    keys: dict[NodeClass, tuple[int, ...]] = field(init=False)

    def __post_init__(self) -> None:
        self.keys = dict(self.classes)


class _Protection:
    """The room EASY backfill keeps on the reserved nodes during one pass.

    ``spare`` maps each reserved node to what it has at the reservation's start beyond the
    reserved job's request, as (free key list, free memory), or None when nothing may be
    added (the reserved job is exclusive).
    """

    __slots__ = ("job_id", "node_ids", "slots", "spare", "start")

    def __init__(
        self,
        job_id: str,
        start: float,
        spare: dict[str, tuple[list[int], int] | None],
        slots: SlotSet = NO_SLOTS,
    ) -> None:
        self.job_id = job_id
        self.start = start
        self.spare = spare
        self.node_ids = tuple(spare)
        #: the reserved nodes' slots: the one-call placement keeps off them (and leaves a
        #: job whose best fit is one of them to the search that asks :meth:`admits`)
        self.slots = slots

    def applies_to(self, job: JobRequest, now: float) -> bool:
        """True unless ``job`` is expected to end before the reservation starts.

        A reservation with no known start (it waits on a job with no expected end) could
        start at any moment, so it applies to every job.
        """
        runtime = job.expected_runtime
        return runtime is None or self.start == math.inf or now + runtime > self.start

    def admits(self, node: IndexedNode, request_key: tuple[int, ...], memory: int) -> bool:
        """True when ``node`` may take the request without delaying the reservation."""
        if node.id not in self.spare:
            return True
        room = self.spare[node.id]
        return room is not None and _covers(room, request_key, memory)

    def refuses(self, node_id: str, request_key: tuple[int, ...], memory: int) -> bool:
        """The survey's question: is a node with room kept for the reservation?"""
        if node_id not in self.spare:
            return False
        room = self.spare[node_id]
        return room is None or not _covers(room, request_key, memory)

    def take(self, node: IndexedNode, request_key: tuple[int, ...], memory: int) -> None:
        """Spend room on a reserved node for a job placed there."""
        room = self.spare.get(node.id)
        if room is not None:
            key, free_memory = room
            for i, need in enumerate(request_key):
                key[i] -= need
            self.spare[node.id] = (key, free_memory - memory)


#: the CPUs of a placement of a job that asked for no CPU layout
_NO_CPUS: Mapping[str, tuple[int, ...]] = MappingProxyType({})


def _sum(first: Charge, second: Charge) -> Charge:
    """Two amounts of cores, memory and devices together."""
    devices = dict(first[2])
    for kind, count in second[2]:
        devices[kind] = devices.get(kind, 0) + count
    return (first[0] + second[0], first[1] + second[1], tuple(sorted(devices.items())))


def _covers(room: tuple[list[int], int], request_key: tuple[int, ...], memory: int) -> bool:
    key, free_memory = room
    return free_memory >= memory and all(
        have >= need for have, need in zip(key, request_key, strict=True)
    )


class DefaultScheduler(Scheduler):
    """Best-fit, FIFO with EASY backfill, over an index of nodes by free capacity."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        unknown = sorted(str(key) for key in self.config if key not in _OPTIONS)
        if unknown:
            raise InvalidArgument(
                f"scheduler.options: unknown option {unknown[0]!r} "
                f"(the default scheduler accepts: {', '.join(_OPTIONS)})"
            )
        estimate = self.config.get("estimate_starts", True)
        if not isinstance(estimate, bool):
            raise InvalidArgument("scheduler.options.estimate_starts must be true or false")
        self._estimate_starts = estimate
        self._fair = FairShare(FairShareConfig.from_options(self.config.get("fair_share")))
        self._index = NodeIndex()
        #: the index's book (the placing and releasing C calls are made on it here)
        self._book = self._index.book
        self._diagnostics = Diagnostics(self._index)
        #: every running job (the replay reads their nodes here): a :class:`_Running`, not a
        #: plain dict (see there)
        self._allocations = _Running()
        #: (expected end, job id) of every running job, ascending, per class of its nodes;
        #: unknown ends are inf
        self._ends = EndsByClass()
        #: its C store, which a one-node job's placement and release call themselves
        #: (NodeIndex.place, NodeIndex.release_listed)
        self._ends_store = self._ends.store
        self._plans: dict[JobShape, _Plan] = {}
        self._plans_epoch = -1
        #: the current pass's time: nodes annotated PLACE_UNTIL take only jobs ending by then
        self._now = 0.0
        #: this pass's words for the shapes that wait for room in one NVLink domain
        self._domain_shortfalls: dict[JobShape, str] = {}
        #: this pass's count, per plan number, of its plan's leading classes without room
        #: for its shape (see _find), as a C array the queue's walk in C raises too
        self._full = ffi.new("int32_t[]", 64)
        #: the current plans by number, and their usages (``_Plan.usage``)
        self._plan_list: list[_Plan] = []
        self._plan_usages: list[Usage] = []
        #: the shapes whose jobs a pass over a plain queue places in C (see queue_run)
        self._runs = QueueRuns()
        #: (a job, fi_place's answer for it) when the walk in C tried to place the job and
        #: stopped there (nothing placed): _place_one takes the answer instead of asking again
        self._tried: tuple[JobRequest, int] | None = None
        #: _spread's answers (the nodes' slots and the entries made on them) and
        #: DefaultScheduler.release's class numbers for fi_release_nodes, grown as needed
        self._spread_slots = ffi.new("int32_t[]", 8)
        self._spread_entries = ffi.new("int32_t[]", 8)
        self._release_numbers = ffi.new("int32_t[]", 8)
        #: _whole's answer (the class's position, the entry, the node's free cores and memory)
        self._whole_where = ffi.new("int64_t[]", 4)
        #: the current pass's reservation, once made (the walk in C keeps off its nodes)
        self._protection: _Protection | None = None
        #: id(a job's shape) -> (that shape, the shape the pass answers for it): the shape
        #: without its runtime while no class is annotated PLACE_UNTIL (then equal requests
        #: with different timeouts share plans, surveys and start estimates), else itself.
        #: Holding the shape keeps its id from being reused while the entry lives.
        self._keys: dict[int, tuple[JobShape, JobShape]] = {}
        #: shapes without runtime, by value, so that equal ones are one object
        self._bare: dict[JobShape, JobShape] = {}
        self._keys_timed = False
        #: id(a job's shape) -> (that shape, its feasibility verdict, its NVLink domain
        #: verdict) for the index's ``version`` below (see _infeasibility)
        self._static: dict[int, tuple[JobShape, tuple[str, Survey] | None, str | None]] = {}
        self._static_version = -1
        #: the diagnoses of the jobs the last pass left waiting (read by _check_pending)
        self._waited: _Diagnoses = _Diagnoses({}, None)
        #: ids of the jobs allocate() recorded since the last pass
        self._allocated_since: set[str] = set()
        #: the queue as of the last pass through schedule_changes (None: none, or stale)
        self._copy: _QueueCopy | None = None
        #: the generation of the last QueueChanges seen
        self._generation = -1

    # -- nodes ----------------------------------------------------------------------------

    def upsert_node(self, node: NodeInfo) -> None:
        """Register or update a node; see :meth:`Scheduler.upsert_node`."""
        if not isinstance(node, NodeInfo):
            raise InvalidArgument("node must be a NodeInfo")
        indexed = self._index.upsert(node)
        # a node re-registered into another class takes its running jobs' ends along, so
        # a replay asking about that class still sees them end
        number = indexed.cls.number
        for job_id in indexed.jobs:
            allocation = self._allocations.get(job_id)
            if allocation is not None and number not in allocation[_CLASSES]:
                classes = (*allocation[_CLASSES], number)
                self._allocations[job_id] = (
                    *allocation[:_CLASSES],
                    classes,
                    *allocation[_ACCOUNT:],
                )
                entry = allocation[-1]
                first = entry if entry.__class__ is int else entry[0]
                self._ends.add(number, allocation[_END], job_id, first)

    def remove_node(self, node_id: str) -> None:
        """Forget a node with nothing allocated; see :meth:`Scheduler.remove_node`."""
        node = self._index.get(node_id)
        if node.jobs:
            running = ", ".join(sorted(node.jobs)[:5])
            raise FailedPrecondition(
                f"node {node_id} still has {len(node.jobs)} job(s) allocated ({running}); "
                "release them first"
            )
        self._index.remove(node_id)

    @property
    def usage_version(self) -> int:
        """See :attr:`Scheduler.usage_version`: the node index's count of its changes."""
        return self._index.usage_changes

    def node_usage(self, node_id: str) -> NodeUsage:
        """A node's allocations and free capacity; see :meth:`Scheduler.node_usage`."""
        node = self._index.get(node_id)
        cls = node.cls
        capacity = node.info.capacity
        free_devices = dict(zip(cls.device_kinds, node.free_devices, strict=True))
        return NodeUsage.of_fields(
            {
                "node_id": node_id,
                "capacity": capacity,
                "used_cores": capacity.cores - node.free_cores,
                "used_memory": capacity.memory - node.free_memory,
                "used_devices": {
                    kind: count - free_devices[kind] for kind, count in capacity.device_items
                },
                "free_cores": node.free_cores,
                "free_memory": node.free_memory,
                "free_devices": free_devices,
                "job_ids": tuple(node.jobs),
                "exclusive_job": node.exclusive_job,
                "takes_new_work": node.usable(),
                "pinned_cpus": {
                    job_id: self._cpus_of(node, job_id, core_ids)
                    for job_id, core_ids in node.pinned.items()
                },
                "host_ports": dict(node.ports),
            }
        )

    def _cpus_of(self, node: IndexedNode, job_id: str, core_ids: Sequence[int]) -> tuple[int, ...]:
        """The logical CPUs ``job_id``'s cores on ``node`` give its cpuset."""
        pinning = self._allocations[job_id][_PINNING]
        threads = pinning is not None and pinning.threads
        return logical_cpus(node.cls.topology, core_ids, threads)

    # -- allocations ----------------------------------------------------------------------

    def allocate(
        self,
        job: JobRequest,
        node_ids: Sequence[str],
        *,
        started_at: float | None = None,
        cpus: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        """Record a running job as it is; see :meth:`Scheduler.allocate`."""
        if job.id in self._allocations:
            raise AlreadyExists(f"job {job.id} is already allocated")
        distinct = tuple(dict.fromkeys(node_ids))
        if len(distinct) != job.nodes:
            raise InvalidArgument(
                f"job {job.id}: node_ids names {len(distinct)} distinct node(s) "
                f"but the job runs on {job.nodes}"
            )
        nodes = [self._index.get(node_id) for node_id in distinct]
        end = math.inf
        if started_at is not None and job.expected_runtime is not None:
            end = started_at + job.expected_runtime
        self._record(job, nodes, end, cpus or {})
        self._allocated_since.add(job.id)

    def release(self, job_id: str) -> None:
        """Give back a job's capacity; see :meth:`Scheduler.release`."""
        allocation = self._allocations.pop(job_id, None)
        if allocation is None:
            raise NotFound(f"job {job_id} holds no allocation")
        node_ids, end, charge, classes, account, _, entry = allocation
        self._fair.refund(account, charge)
        if entry.__class__ is int and len(classes) == 1:
            store = self._ends_store
            number = classes[0]
            if not charge[2]:
                # a job placed by one C call: its entry names its node, cores and memory and
                # keeps its id, and (usually) one C call forgets it, unlists its end and moves
                # its node (the call itself, as NodeIndex.release_entry makes it, without
                # that frame, and without encoding the id)
                failed = release_entry(self._book, entry, store, number, end)
                if not failed:
                    return
                if failed != 1:
                    data = job_id.encode("utf-8", "surrogatepass")
                    self._index.entry_released(
                        failed, entry, node_ids[0], job_id, store, number, end, data
                    )
                    return
            # not a plain entry: a job holding its node alone (out of the index) puts it
            # back by one C call, unless the node is held since, or pins cores or ports
            node = self._index.nodes.get(node_ids[0])
            if (
                node is not None
                and node.exclusive_job == job_id
                and node.unavailable_label is None
                and node.cls.number == number
                and not node.pinned
                and not node.ports
            ):
                failed = release_whole(
                    self._book, entry, store, number, end, node.cls.free, node.rank
                )
                if failed != 1:
                    self._index.given_back_whole(node, charge, failed, job_id)
                    return
            elif (
                node is not None
                and node.in_index
                and charge[2]
                and not node.pinned
                and not node.ports
            ):
                # a job with devices on an indexed node (as NodeIndex.release_listed's):
                # unlisted, its entry forgotten and its node moved by one C call
                failed = release_devices(self._book, entry, store, number, end)
                if failed != 1:
                    self._index.given_back_devices(node, charge, failed, job_id)
                    return
        if entry.__class__ is tuple and not charge[2]:
            # a job of several nodes without devices (plain entries, chained): unlisted,
            # its entries forgotten and its nodes moved by one C call, unless one of them is
            # not plain or is out of the index (1: nothing done, the Python way below)
            numbers = self._release_numbers
            if len(numbers) < len(classes):
                numbers = self._release_numbers = ffi.new("int32_t[]", 2 * len(classes))
            numbers[0 : len(classes)] = classes
            failed = release_nodes(
                self._book, entry[0], self._ends_store, numbers, len(classes), end
            )
            if failed != 1:
                if failed:
                    self._index.released_nodes(failed, node_ids, job_id)
                return
        data = job_id.encode("utf-8", "surrogatepass")
        if len(node_ids) == 1 and len(classes) == 1:
            # one node of one class (a job with devices: its end is unlisted and node moved
            # in one C call)
            self._index.release_listed(
                node_ids[0], job_id, self._ends_store, classes[0], end, data, entry
            )
            return
        # the C store's call itself, as EndsByClass.remove makes it, without that frame
        for number in classes:
            if remove_end(self._ends_store, number, end, data, len(data)):
                raise KeyError(job_id)
        release = self._index.release
        if entry.__class__ is int:
            release(node_ids[0], job_id, entry)
            return
        for node_id, node_entry in zip(node_ids, entry, strict=True):
            release(node_id, job_id, node_entry)

    def _place_one(
        self,
        job: JobRequest,
        shape: JobShape,
        plan: _Plan,
        protection: _Protection | None,
    ) -> tuple[str, ...] | None:
        """Place ``job`` of a plan placed by one C call (``plan.fast`` is set) on its best
        fit and record it as :meth:`_record` would; its node ids, or None when nothing was
        placed (no class has room, or the best fit is one of the reserved nodes)."""
        classes = plan.fast
        assert classes is not None
        full = self._full[plan.number]
        # the shape's usage: JobRequest made its shape from these very resources
        usage = plan.usage
        index = self._index
        runtime = job.expected_runtime
        end = math.inf if runtime is None else self._now + runtime
        # the node found, moved, the job's entry made and its end listed under its class in
        # one C call (the call itself, as NodeIndex.place makes it, without that frame)
        avoid = NO_SLOTS if protection is None else protection.slots
        where = index.where
        tried = self._tried
        if tried is not None and tried[0] is job:
            # the walk in C tried it and stopped here (index.where holds that call's where)
            self._tried = None
            slot = tried[1]
        else:
            data = job.id.encode("utf-8", "surrogatepass")
            slot = place_call(
                self._book,
                classes.classes,
                classes.needs,
                classes.count,
                full,
                usage[0],
                usage[1],
                avoid.array,
                avoid.count,
                where,
                self._ends_store,
                classes.numbers,
                end,
                data,
                len(data),
                plan.usage_number,
            )
        if slot < 0 or usage[2] or where[3] < 0:
            # nothing placed, a job with devices, or an error
            node = index.placed(slot, classes, job.id, usage)
        else:
            node = index.by_slot[slot]
        leading = where[0]
        if leading > full:
            # as _find: the classes before the first with room have none for the pass
            self._full[plan.number] = leading
        if node is None:
            return None
        node_ids, classes_of = node.id_tuple, node.cls.number_tuple
        # a one-node job's charge is its usage (see _record)
        entry = where[3]
        self._allocations[job.id] = (node_ids, end, usage, classes_of, job.account, None, entry)
        self._fair.charge(job, usage)
        return node_ids

    def _spread(
        self, job: JobRequest, shape: JobShape, plan: _Plan, protection: _Protection | None
    ) -> tuple[str, ...] | None:
        """Place ``job`` (of key ``shape``) of a plan with ``spread`` (several nodes, see
        :func:`_spread_call`) on the nodes :meth:`_choose` would choose and record it as
        :meth:`_record` would, in one C call (``fi_place_nodes``: the nodes moved, an entry
        on each, chained, the end listed under each class); its node ids, or None when too
        few nodes have room (nothing placed). When one of the nodes is one of
        ``protection``'s, :meth:`_choose` and :meth:`_place` decide (what the reservation
        leaves there is Python's)."""
        spread = plan.spread
        assert spread is not None
        need = job.nodes
        slots, entries = self._spread_slots, self._spread_entries
        if len(slots) < need:
            slots = self._spread_slots = ffi.new("int32_t[]", 2 * need)
            entries = self._spread_entries = ffi.new("int32_t[]", 2 * need)
        cores, memory, _ = plan.usage
        avoid = NO_SLOTS if protection is None else protection.slots
        runtime = job.expected_runtime
        end = math.inf if runtime is None else self._now + runtime
        job_id = job.id
        data = job_id.encode("utf-8", "surrogatepass")
        placed = place_nodes(
            self._book,
            spread.classes,
            spread.needs,
            spread.count,
            need,
            cores,
            memory,
            avoid.array,
            avoid.count,
            self._ends_store,
            spread.numbers,
            end,
            data,
            len(data),
            plan.usage_number,
            slots,
            entries,
        )
        if placed != need:
            if placed == -3:
                # a reserved node among the first: the search that asks the reservation
                return self._searched(job, shape, plan, protection)
            if placed == -1:
                raise MemoryError(f"no memory to record job {job_id}")
            if placed < -3:
                # a node the C index had no memory to move (out of the index now)
                self._index.lost(slots[-4 - placed])
            return None
        by_slot = self._index.by_slot
        nodes = [by_slot[slot] for slot in ffi.unpack(slots, need)]
        node_ids = tuple([node.id for node in nodes])
        classes = tuple(dict.fromkeys(node.cls.number for node in nodes))
        # as _record charges a job of several nodes: its usage on each, times their count
        charge: Charge = (cores * need, memory * need, ())
        self._allocations[job_id] = (
            node_ids,
            end,
            charge,
            classes,
            job.account,
            None,
            tuple(ffi.unpack(entries, need)),
        )
        self._fair.charge(job, charge)
        return node_ids

    def _searched(
        self, job: JobRequest, shape: JobShape, plan: _Plan, protection: _Protection | None
    ) -> tuple[str, ...] | None:
        """Place ``job`` by :meth:`_choose`'s search and :meth:`_place` (the path that asks
        ``protection``, which the C calls hand back when a reserved node is among their
        choices); its node ids, or None when nothing fits."""
        chosen = self._choose(shape, plan, protection)
        if chosen is None:
            return None
        self._place(job, chosen, plan, self._now, protection)
        return self._allocations[job.id][_NODE_IDS]

    def _whole(
        self, job: JobRequest, shape: JobShape, plan: _Plan, protection: _Protection | None
    ) -> tuple[str, ...] | None:
        """Place exclusive ``job`` (of key ``shape``) of a plan with ``whole`` (one node, see
        :func:`_whole_call`) on the idle node :meth:`_choose` would choose and record it as
        :meth:`_record` would, in one C call (``fi_place_whole``: the node out of the index,
        the entry of its whole capacity, the book told, the end listed); its node ids, or
        None when no class has an idle node. When the node is one of ``protection``'s,
        :meth:`_choose` and :meth:`_place` decide."""
        whole, search = plan.whole, plan.search
        assert whole is not None and search is not None
        avoid = NO_SLOTS if protection is None else protection.slots
        runtime = job.expected_runtime
        end = math.inf if runtime is None else self._now + runtime
        job_id = job.id
        data = job_id.encode("utf-8", "surrogatepass")
        where = self._whole_where
        slot = place_whole(
            self._book,
            search.classes,
            whole.caps,
            whole.memories,
            whole.numbers,
            search.count,
            avoid.array,
            avoid.count,
            self._ends_store,
            search.numbers,
            end,
            data,
            len(data),
            where,
        )
        if slot < 0:
            if slot == -3:
                # the reservation's node: the search that asks the reservation
                return self._searched(job, shape, plan, protection)
            if slot == -4:
                raise MemoryError(f"no memory to record job {job_id}")
            return None
        node = self._index.by_slot[slot]
        assert node is not None
        usage = whole.usages[where[0]]
        # what NodeIndex.add_job does in Python for a job holding its node alone
        self._index.taken_whole(node, job_id, usage, where[2], where[3])
        node_ids = node.id_tuple
        self._allocations[job_id] = (
            node_ids,
            end,
            usage,
            node.cls.number_tuple,
            job.account,
            None,
            int(where[1]),
        )
        self._fair.charge(job, usage)
        return node_ids

    def _record(
        self,
        job: JobRequest,
        nodes: Sequence[IndexedNode],
        end: float,
        given: Mapping[str, Sequence[int]] | None = None,
    ) -> Mapping[str, tuple[int, ...]]:
        """Deduct ``job``'s usage from ``nodes`` and remember it as running until ``end``;
        the logical CPUs a pinned job gets on each node (``given`` ones as they are)."""
        index = self._index
        job_id = job.id
        resources = job.resources
        usage: Usage = (resources.cores, resources.memory, resources.device_items)
        exclusive = job.exclusive
        pinning = job.cpu
        ports = job.shape.host_ports
        cpus: dict[str, tuple[int, ...]] = {}
        charge: Charge = usage
        entries: list[int] = []
        if len(nodes) > 1 and not exclusive:
            count = len(nodes)
            devices = tuple((kind, n * count) for kind, n in resources.device_items)
            charge = (resources.cores * count, resources.memory * count, devices)
        for node in nodes:
            if exclusive:
                capacity = node.info.capacity
                usage = (capacity.cores, capacity.memory, capacity.device_items)
                # an exclusive job holds its nodes whole, whatever it asked for
                charge = usage if node is nodes[0] else _sum(charge, usage)
            core_ids: Sequence[int] = ()
            if pinning is not None:
                topology = node.cls.topology
                if given is not None and node.id in given:
                    core_ids = cores_of(topology, given[node.id])
                    cpus[node.id] = tuple(sorted(given[node.id]))
                else:
                    core_ids = node.cores_for(job.shape) or ()
                    cpus[node.id] = logical_cpus(topology, core_ids, pinning.threads)
            entries.append(index.add_job(node, job_id, usage, exclusive, core_ids, ports))
        # most jobs run on one node: no generator, and the node's and its class's one-item
        # tuples (new ones were two more objects per running job for the cyclic collector
        # to count toward its full collections)
        node_ids: tuple[str, ...]
        classes: tuple[int, ...]
        if len(nodes) == 1:
            node_ids, classes = nodes[0].id_tuple, nodes[0].cls.number_tuple
        else:
            node_ids = tuple([node.id for node in nodes])
            classes = tuple(dict.fromkeys(n.cls.number for n in nodes))
        entry = entries[0] if len(entries) == 1 else tuple(entries)
        if len(entries) > 1:
            index.chain(entries)
        self._allocations[job_id] = (node_ids, end, charge, classes, job.account, pinning, entry)
        self._fair.charge(job, charge)
        for number in classes:
            self._ends.add(number, end, job_id, entries[0])
        # a job that asked for no CPU layout shares one empty mapping (a dict per placement
        # was one more container for the cyclic collector to count)
        return cpus or _NO_CPUS

    # -- feasibility ----------------------------------------------------------------------

    def check_feasible(self, job: JobRequest) -> Diagnosis | None:
        """Could enough registered nodes hold ``job`` when idle? See
        :meth:`Scheduler.check_feasible`."""
        if self._static_version == self._index.version:
            # the usual: a shape already found to fit while no node changed, told without
            # _infeasibility's frame (every arriving job is checked)
            entry = self._static.get(id(job.shape))
            if entry is not None and entry[1] is None and entry[2] is None:
                return None
        verdict = self._infeasibility(job)
        if verdict is None:
            return None
        message, findings = verdict
        return _diagnosis(job.id, ReasonCode.INFEASIBLE, message, findings, None)

    def _infeasibility(self, job: JobRequest) -> tuple[str, Survey] | None:
        """Why no registered nodes could ever hold ``job``: too few could, or (for a job
        that requires one NVLink domain) no domain has enough that could."""
        shape = job.shape
        version = self._index.version
        if self._static_version != version:
            self._static.clear()
            self._static_version = version
        # both verdicts are the registered nodes' alone: asked once per shape object while
        # no node changes (every arriving job is checked: hashing its shape for the by-value
        # cache, and walking every class's nodes for the domain verdict of a job requiring
        # one NVLink domain, made check_feasible 5.5 % of the churn run's py-spy samples)
        entry = self._static.get(id(shape))
        if entry is None:
            if len(self._static) >= _STATIC_BOUND:
                self._static.clear()
            verdict = self._diagnostics.infeasibility(job)
            domain = None if verdict is not None else domains.infeasible(self._index, shape)
            # the shape is held so that its id is not reused while the entry lives
            entry = self._static[id(shape)] = (shape, verdict, domain)
        verdict, domain = entry[1], entry[2]
        if verdict is not None or domain is None:
            return verdict
        # the survey counts the nodes' present room: made afresh each time
        return domain, self._diagnostics.survey(shape)

    # -- the pass -------------------------------------------------------------------------

    def schedule(self, pending: Sequence[JobRequest], now: float) -> ScheduleResult:
        """One scheduling pass; see :meth:`Scheduler.schedule` and the module docstring."""
        # this pass's queue did not come as changes: the copy of the queue is stale
        self._copy = None
        self._check_pending(pending)
        return self._pass(self._fair.queue(pending, now, self._index), now)

    def schedule_changes(
        self,
        changes: QueueChanges,
        pending: Callable[[], Sequence[JobRequest]],
        now: float,
    ) -> ScheduleResult:
        """One scheduling pass over the scheduler's own copy of the queue, patched with
        ``changes``; see :meth:`Scheduler.schedule_changes`.

        The copy is kept in queue order between passes, so a pass neither collects the ids
        of every waiting job to check them nor sorts them again. It is read afresh from
        ``pending()`` when it is missing or stale (a generation was skipped, the engine
        reset its queue, the sizes disagree).
        """
        copy = self._copy
        follows = changes.generation == self._generation + 1
        self._generation = changes.generation
        if copy is None or changes.reset or not follows:
            return self._resync(pending(), now)
        self._copy = None  # until this pass has succeeded: one that raises leaves it stale
        allocations = self._allocations
        for job in changes.arrived:
            if job.id in allocations:
                raise InvalidArgument(f"pending job {job.id} is already allocated")
        for job_id in changes.departed:
            copy.remove(job_id)
        copy.add_all(changes.arrived)
        if len(copy.jobs) != changes.size:
            return self._resync(pending(), now)
        # a job left waiting by the last pass was not allocated then; since then only
        # allocate() can have allocated it
        allocated_since, self._allocated_since = self._allocated_since, set()
        for job_id in allocated_since:
            if job_id in copy.jobs:
                raise InvalidArgument(f"pending job {job_id} is already allocated")
        queue = self._fair.queue(
            copy.ordered, now, self._index, ordered=True, accounts=len(copy.accounts)
        )
        result = self._pass(queue, now, copy)
        # a queue met in the copy's order left its waiting jobs in that order
        copy.remove_placed(result.placements, self._waited.placed_at())
        self._copy = copy
        return result

    def _resync(self, jobs: Sequence[JobRequest], now: float) -> ScheduleResult:
        """A pass over the whole queue ``jobs``, keeping a copy of what it leaves waiting."""
        result = self.schedule(jobs, now)
        copy = _QueueCopy(jobs)
        copy.remove_placed(result.placements)
        self._copy = copy
        return result

    def _pass(self, queue: Queue, now: float, copy: _QueueCopy | None = None) -> ScheduleResult:
        """Place, reserve and diagnose the jobs of ``queue`` (checked) in its order;
        ``copy``, when given, is the queue copy ``queue`` was made from, in its order (a pass
        through :meth:`schedule`, without a copy, keeps a table of every waiting job, which
        its next check reads whole)."""
        plans = self._current_plans()
        self._now = self._diagnostics.now = now
        placements: list[Placement] = []
        waiting = _Waiting()
        no_room: set[JobShape] = set()
        refused: set[JobShape] = set()
        infeasible: dict[JobShape, tuple[str, Survey]] = {}
        self._domain_shortfalls.clear()
        self._full = ffi.new("int32_t[]", len(self._full))
        self._tried = None
        self._protection = None
        protection: _Protection | None = None
        keys = self._pass_keys()
        #: id(a job's shape) -> the answer later jobs of that very shape take without a look:
        #: once a shape has failed, every later job of it in the pass fails the same way
        #: (capacity only shrinks during a pass), so a long array costs one entry per job
        #: in the table of waiting jobs
        settled: dict[int, _Answer] = {}
        left_waiting = waiting.per_job
        in_order = queue.in_order
        queue.pass_over(settled, left_waiting, _Answer)
        visits: Iterable[JobRequest] = queue
        skipped: _Skipped | None = None
        runs: QueueRuns | None = None
        #: a key shape -> which of no_room, infeasible and refused hold it (_IN_*): what the
        #: walk's settles read (one lookup, not three)
        blocked: dict[JobShape, int] = {}
        if in_order is not None and copy is not None:
            # A plain queue: the jobs of settled shapes are passed over, and the one-node
            # jobs of shapes placed by one C call placed, by the walk in C (see queue_run),
            # not a Python step each (a long queue's tail is mostly settled jobs: the loop's
            # step per waiting job was 8-9 % of the churn run, and the step per placed job
            # most of what was left of a placement); what each passed-over job is told is
            # read from ``settled`` when someone asks (see _Skipped).
            skipped = _Skipped(in_order, placements, settled)
            runs = self._runs
            runs.start_pass()
            # (id(key), situation, guarded) -> the answer: waiting.bucket's, without hashing
            # the key shape (a tuple of a dozen fields) at each settle
            answers: dict[tuple[int, int, bool], _Answer] = {}

            def settle(job: JobRequest, guarded: int) -> None:
                # the loop's steps below for a job of a shape whose key is blocked (known),
                # made for the walk in C at the job it met (nothing else changed since);
                # ``guarded``: the walk's protection.applies_to(job, now)
                shape_id = id(job.shape)
                key = keys[shape_id][1]
                kinds = blocked[key]
                if kinds & _IN_NO_ROOM:
                    known = _NO_ROOM if protection is None else _BACKFILL_NO_ROOM
                elif kinds & _IN_INFEASIBLE:
                    known = _INFEASIBLE
                elif guarded and kinds & _IN_REFUSED:
                    known = _REFUSED
                else:
                    raise AssertionError(f"the walk settled job {job.id}, whose key is open")
                backfill = bool(guarded) and known in _BACKFILL
                same = answers.get((id(key), known, backfill))
                if same is None:
                    same = answers[id(key), known, backfill] = waiting.bucket(key, known, backfill)
                settled[shape_id] = left_waiting[job.id] = same

            visits = self._walked(skipped, copy.queue, len(copy.accounts) == 1, settle)
        # the positions in the queue of the jobs placed, noted as they are (see _Skipped)
        met: list[int] = []
        placed_at: list[int] | None = None
        if skipped is not None:
            met, placed_at = skipped.met, skipped.placed_positions
        for job in visits:
            same = settled.get(id(job.shape))
            if same is not None:
                left_waiting[job.id] = same
                continue
            job_id = job.id
            entry = keys.get(id(job.shape))
            shape = (entry or self._key_entry(job.shape))[1]
            if runs is not None:
                # the walk in C settles the shape's later jobs once its key is blocked
                runs.note(job.shape, shape)
            guarded = protection is not None and protection.applies_to(job, now)
            known: int | None = None
            if shape in no_room:
                known = _NO_ROOM if protection is None else _BACKFILL_NO_ROOM
            elif shape in infeasible:
                known = _INFEASIBLE
            elif guarded and shape in refused:
                known = _REFUSED
            if known is not None:
                same = settled[id(job.shape)] = waiting.bucket(shape, known, guarded)
                left_waiting[job_id] = same
                if runs is not None:
                    runs.settle(id(job.shape))
                continue
            plan = plans.get(shape) or self._plan(shape)
            if plan.fast is not None:
                # most jobs: found, placed and recorded with one C call over the plan
                node_ids = self._place_one(job, shape, plan, protection if guarded else None)
                if node_ids is not None:
                    placements.append(Placement(job_id, node_ids, _NO_CPUS))
                    if placed_at is not None:
                        placed_at.append(met[-1])
                    if runs is not None and shape not in refused and not runs.placing(job.shape):
                        # the walk in C places this shape's later jobs
                        usage = plan.usage
                        runs.place(
                            job.shape,
                            shape,
                            plan.fast,
                            usage[0],
                            usage[1],
                            plan.usage_number,
                            plan.number,
                        )
                    continue
                # no room from the first class not known full (now known), or the best fit
                # is kept for the reservation: the search below asks again from there
            if plan.spread is not None or plan.whole is not None:
                # a job of several nodes, or an exclusive one: found, placed and recorded by
                # one C call (None: too few nodes have room, as _choose would have found)
                if plan.spread is not None:
                    node_ids = self._spread(job, shape, plan, protection if guarded else None)
                else:
                    node_ids = self._whole(job, shape, plan, protection if guarded else None)
                if node_ids is not None:
                    placements.append(Placement(job_id, node_ids, _NO_CPUS))
                    if placed_at is not None:
                        placed_at.append(met[-1])
                    continue
            else:
                if shape.domain is None:
                    # most shapes: best fit, without _locate's call and tuple
                    chosen, note = self._find(shape, plan, protection if guarded else None), ""
                else:
                    chosen, note = self._locate(shape, plan, protection if guarded else None)
                if chosen is not None:
                    cpus = self._place(job, chosen, plan, now, protection if guarded else None)
                    # _place recorded the node ids as a tuple already
                    node_ids = self._allocations[job_id][_NODE_IDS]
                    placements.append(Placement(job_id, node_ids, cpus, note=note))
                    if placed_at is not None:
                        placed_at.append(met[-1])
                    continue
            if guarded and self._locate(shape, plan, None)[0] is not None:
                refused.add(shape)
                if runs is not None:
                    runs.block(shape, refused=True)
                    blocked[shape] = blocked.get(shape, 0) | _IN_REFUSED
                waiting.add(job_id, shape, _REFUSED, guarded)
                continue
            verdict = self._infeasibility(job)
            if verdict is not None:
                infeasible[shape] = verdict
                if runs is not None:
                    runs.block(shape)
                    blocked[shape] = blocked.get(shape, 0) | _IN_INFEASIBLE
                waiting.add(job_id, shape, _INFEASIBLE, guarded)
                continue
            no_room.add(shape)
            if runs is not None:
                runs.block(shape)
                blocked[shape] = blocked.get(shape, 0) | _IN_NO_ROOM
            if shape.domain is DomainPolicy.REQUIRE:
                waiting.add(job_id, shape, self._domain_wait(shape, plan), guarded)
            elif protection is None:
                protection = self._protection = self._reserve(job, plan)
                waiting.add(job_id, shape, _NO_ROOM if protection is None else _HOLDER, guarded)
                if protection is not None:
                    # later jobs of the shapes settled so far now wait behind a reservation
                    if skipped is not None:
                        skipped.reserved_at()
                    settled.clear()
                    if runs is not None:
                        runs.unsettle()
            else:
                waiting.add(job_id, shape, _BACKFILL_NO_ROOM, guarded)
        diagnoses = self._diagnose(waiting, no_room, infeasible, protection, now, queue, skipped)
        self._waited = diagnoses
        self._fair.finish(now, self._index)
        reservation = None
        if protection is not None:
            reservation = Reservation(
                protection.job_id, start_or_none(protection.start), protection.node_ids
            )
        return ScheduleResult(tuple(placements), diagnoses, reservation)

    def _charge_run(
        self, jobs: list[JobRequest], positions: list[int], plans: list[int], single: bool
    ) -> None:
        """Charge fair share for the jobs a walk in C placed (at ``positions`` of ``jobs``, of
        the plans numbered ``plans``): each holds its plan's usage, so the jobs of one plan
        and account are charged in one call; ``single``: the queue holds one account's jobs."""
        charge_many = self._fair.charge_many
        plan_list = self._plan_list
        if single:
            for number, count in Counter(plans).items():
                first = jobs[positions[plans.index(number)]]
                charge_many(first, plan_list[number].usage, count)
            return
        for position, number in zip(positions, plans, strict=True):
            job = jobs[position]
            charge_many(job, plan_list[number].usage, 1)

    def _walked(
        self,
        skipped: _Skipped,
        queue: Any,
        single: bool,
        settle: Callable[[JobRequest, int], None],
    ) -> Iterator[JobRequest]:
        """The jobs of the queue (its copy's ``queue`` in C) the pass must
        look at, in order. The jobs between them of settled shapes are passed over, those of
        shapes placed by one C call placed (and recorded here as :meth:`_place_one` records
        its placements), by the walk; a job where the walk tried a placement that failed is
        yielded with the call's answer kept for :meth:`_place_one` (``_tried``)."""
        runs = self._runs
        jobs = skipped.jobs
        met = skipped.met
        placed_at = skipped.placed_positions
        placements = skipped.placements
        count = len(jobs)
        out, settled_out, stop = runs.out, runs.settled, runs.stop
        index = self._index
        by_slot, where = index.by_slot, index.where
        take_devices = index.take_devices
        plan_list = self._plan_list
        #: each plan's usage by number (a plan made during the pass is appended)
        usage_of = self._plan_usages
        allocations = self._allocations
        make = tuple.__new__
        run, table = lib.fi_place_run, runs.table
        runs.bind(self._book, self._ends_store, queue, self._full)
        now = self._now
        inf = math.inf
        charged_positions: list[int] = []
        charged_plans: list[int] = []
        try:
            position = 0
            while position < count:
                protection = self._protection
                if protection is None:
                    placed = run(table, position, now, 0, 0.0, ffi.NULL, 0)
                else:
                    slots = protection.slots
                    placed = run(
                        table, position, now, 1, protection.start, slots.array, slots.count
                    )
                if stop[6]:
                    # jobs of blocked shapes: the walk settled each shape at the job noted
                    noted = ffi.unpack(settled_out, 2 * stop[6])
                    for position, guarded in zip(*[iter(noted)] * 2, strict=True):
                        settle(jobs[position], guarded)
                if placed:
                    numbers = ffi.unpack(out, 5 * placed)
                    for position, slot, entry, plan_number, class_at in zip(
                        *[iter(numbers)] * 5, strict=True
                    ):
                        job = jobs[position]
                        node = by_slot[slot]
                        usage = usage_of[plan_number]
                        if usage[2]:
                            # as NodeIndex.placed: the devices off the node's free devices
                            plan = plan_list[plan_number]
                            take_devices(node, plan.fast.request_keys[class_at])
                        runtime = job.expected_runtime
                        node_ids = node.id_tuple
                        job_id = job.id
                        allocations[job_id] = (
                            node_ids,
                            inf if runtime is None else now + runtime,
                            usage,
                            node.cls.number_tuple,
                            job.account,
                            None,
                            entry,
                        )
                        # the named tuple made without its __new__'s frame
                        placements.append(make(Placement, (job_id, node_ids, _NO_CPUS, "")))
                    positions = numbers[0::5]
                    placed_at += positions
                    charged_positions += positions
                    charged_plans += numbers[3::5]
                position = stop[0]
                if position >= count:
                    break
                job = jobs[position]
                if stop[1] != -5:
                    where[0], where[1], where[2], where[3] = stop[2], stop[3], stop[4], stop[5]
                    self._tried = (job, stop[1])
                met.append(position)
                yield job
                position += 1
        finally:
            # fair share's charges once per pass (nothing in the pass reads them), and for
            # the jobs placed before whatever stopped the pass
            self._charge_run(jobs, charged_positions, charged_plans, single)

    def _check_pending(self, pending: Sequence[JobRequest]) -> None:
        """InvalidArgument, before anything is placed, for a job listed twice or running."""
        # a comprehension: it beats set(map(attrgetter)) over slotted jobs
        ids = {job.id for job in pending}
        if len(ids) != len(pending):
            seen: set[str] = set()
            for job in pending:
                if job.id in seen:
                    raise InvalidArgument(f"pending job {job.id} is listed twice")
                seen.add(job.id)
        waited, self._waited = self._waited, _Diagnoses({}, None)
        allocated_since, self._allocated_since = self._allocated_since, set()
        # A job left waiting by the last pass was not allocated then, and since then only
        # allocate() can have allocated it: only the other jobs are looked up among the
        # tens of thousands running (a lookup there misses the cache; the last pass's
        # waiting jobs are a small table)
        suspects = waited.others(ids)
        if allocated_since:
            suspects.update(allocated_since.intersection(ids))
        allocations = self._allocations
        if any(map(allocations.__contains__, suspects)):
            running = sorted(job_id for job_id in suspects if job_id in allocations)[0]
            raise InvalidArgument(f"pending job {running} is already allocated")

    def _pass_keys(self) -> dict[int, tuple[JobShape, JobShape]]:
        """The shape keys for this pass (see ``_keys``), started over when a class annotated
        PLACE_UNTIL appeared or the last one left, or when they grew past a bound."""
        timed = bool(self._index.timed_classes)
        keys = self._keys
        if timed != self._keys_timed or len(keys) > _KEYS_BOUND:
            keys.clear()
            self._bare.clear()
            self._keys_timed = timed
            # the shapes' keys, and so their plans, may change
            self._runs.clear()
        return keys

    def _key_entry(self, shape: JobShape) -> tuple[JobShape, JobShape]:
        """Remember which shape the pass answers for ``shape`` (see ``_keys``)."""
        key = shape
        if not self._keys_timed and shape.runtime is not None:
            bare = shape._replace(runtime=None)
            key = self._bare.setdefault(bare, bare)
        entry = self._keys[id(shape)] = (shape, key)
        return entry

    def _key_of(self, shape: JobShape) -> JobShape:
        """The shape this pass answers for ``shape``."""
        entry = self._keys.get(id(shape))
        return (entry or self._key_entry(shape))[1]

    def _current_plans(self) -> dict[JobShape, _Plan]:
        if self._plans_epoch != self._index.epoch:
            self._plans.clear()
            self._plan_list.clear()
            self._plan_usages.clear()
            # the walk in C reads the plans' arrays
            self._runs.clear()
            self._plans_epoch = self._index.epoch
        return self._plans

    def _plan(self, shape: JobShape) -> _Plan:
        """The classes ``shape`` may run on, preferred first: classes without device kinds
        the job does not use, then smaller nodes (keep big nodes for big jobs)."""
        wanted_kinds = {kind for kind, _ in shape.devices}
        ranked = []
        for cls in self._index.classes.values():
            request_key = cls.request_key(shape)
            if (
                request_key is None
                or not cls.matches_annotations(shape)
                or (wanted_kinds and cls.device_plugin_failed)
                or not cls.holds_when_idle(request_key, shape.memory)
                or cls.pinning_label(shape) is not None
            ):
                continue
            unused_kinds = sum(kind not in wanted_kinds for kind in cls.device_kinds)
            rank = (unused_kinds, cls.cap_cores, cls.cap_memory, cls.cap_devices)
            ranked.append((rank, cls.profile, cls, request_key))
        ranked.sort(key=lambda item: item[:2])
        classes = [(cls, request_key) for _, _, cls, request_key in ranked]
        fast = search = None
        if not any(cls.place_until is not None for cls, _ in classes):
            search = ClassList(classes)
            if _one_call(shape) and not any(cls.one_job_at_a_time for cls, _ in classes):
                fast = search
        usage = (shape.cores, shape.memory, shape.devices)
        index = self._index
        asks = (
            [cls.number for cls, _ in classes],
            [index.request_array(request_key) for _, request_key in classes],
        )
        number = len(self._plan_list)
        spread = whole = None
        if (
            search is not None
            and _spread_call(shape)
            and not any(c.one_job_at_a_time for c, _ in classes)
        ):
            spread = search
        if search is not None and _whole_call(shape):
            whole = WholeList(search, index)
        plan = _Plan(
            classes, fast, search, usage, index.usage_number(usage), asks, number, spread, whole
        )
        self._plans[shape] = plan
        self._plan_list.append(plan)
        self._plan_usages.append(plan.usage)
        if number >= len(self._full):
            # the pass's counts so far kept
            grown = ffi.new("int32_t[]", 2 * len(self._full))
            ffi.memmove(grown, self._full, ffi.sizeof(self._full))
            self._full = grown
            self._runs.rebind_full(grown)
        return plan

    def _find(
        self, shape: JobShape, plan: _Plan, protection: _Protection | None
    ) -> list[IndexedNode] | None:
        """``shape.nodes`` distinct nodes with room for ``shape``, best fit first, or None."""
        index = self._index
        memory = shape.memory
        # only pinned and port-holding jobs need each node with room asked more
        particular = shape.cpu is not None or bool(shape.host_ports)
        if shape.nodes == 1 and not shape.exclusive and not particular:
            first_fit = index.first_fit
            classes = plan.classes
            # Capacity only shrinks during a pass, so a class that had no room for the shape
            # has none for the rest of the pass: a shape placed on its fifth class asks the
            # first four once per pass, not once per job. ``full`` is how many leading
            # classes are known to be so (or to be closed to it by PLACE_UNTIL).
            full = self._full[plan.number]
            leading = True
            for position in range(full, len(classes)):
                cls, request_key = classes[position]
                if cls.outlasted_by(shape, self._now):
                    node = None
                else:
                    node = first_fit(cls, request_key, memory)
                if node is None:
                    if leading:
                        self._full[plan.number] = position + 1
                    continue
                leading = False
                if protection is None or protection.admits(node, request_key, memory):
                    return [node]
                # the best fit is kept for the reservation (a handful of nodes are): the
                # next best ones of the class, in the order the general search takes them
                for node in index.iter_fitting(cls, request_key, memory, False):
                    if protection.admits(node, request_key, memory):
                        return [node]
            return None
        if plan.search is not None and not particular:
            return self._choose(shape, plan, protection)
        chosen: list[IndexedNode] = []
        need = shape.nodes
        for node in self._fitting(shape, plan, protection):
            chosen.append(node)
            if len(chosen) == need:
                return chosen
        return None

    def _choose(
        self, shape: JobShape, plan: _Plan, protection: _Protection | None
    ) -> list[IndexedNode] | None:
        """:meth:`_find`'s nodes for a job of several nodes or an exclusive one, without CPU
        layout or host ports, on a plan without PLACE_UNTIL classes: the first that
        :meth:`_fitting` would yield, listed by one C call (the generators' step per node
        was most of the search's cost)."""
        assert plan.search is not None
        need = shape.nodes
        # the reservation may refuse some of its own nodes: listing as many more nodes as it
        # holds leaves enough after they are dropped (the others it admits)
        room = need if protection is None else need + len(protection.node_ids)
        nodes = self._index.choose(plan.search, shape.memory, shape.exclusive, room)
        if protection is not None:
            keys, memory = plan.keys, shape.memory
            nodes = [node for node in nodes if protection.admits(node, keys[node.cls], memory)]
        return nodes[:need] if len(nodes) >= need else None

    def _fitting(
        self, shape: JobShape, plan: _Plan, protection: _Protection | None
    ) -> Iterator[IndexedNode]:
        """Every node with room for ``shape`` that ``protection`` admits, best fit first."""
        index = self._index
        memory = shape.memory
        # only pinned and port-holding jobs need each node with room asked more
        particular = shape.cpu is not None or bool(shape.host_ports)
        for cls, request_key in plan.classes:
            if cls.outlasted_by(shape, self._now):
                continue
            for node in index.iter_fitting(cls, request_key, memory, shape.exclusive):
                if protection is not None and not protection.admits(node, request_key, memory):
                    continue
                if particular and node.refusal(shape) is not None:
                    continue
                yield node

    def _locate(
        self, shape: JobShape, plan: _Plan, protection: _Protection | None
    ) -> tuple[list[IndexedNode] | None, str]:
        """The nodes for ``shape`` (None: none now) and the note of its placement: one
        NVLink domain's for a job with a domain policy (:mod:`.domains`), else best fit."""
        if shape.domain is None:
            return self._find(shape, plan, protection), ""
        return domains.choose(shape, list(self._fitting(shape, plan, protection)))

    def _domain_wait(self, shape: JobShape, plan: _Plan) -> int:
        """Why a job that requires one NVLink domain waits: ``_NO_DOMAIN`` (with the words
        kept for its diagnosis) when enough nodes have room across domains, else
        ``_NO_ROOM``."""
        candidates = list(self._fitting(shape, plan, None))
        if len(candidates) < shape.nodes:
            return _NO_ROOM
        self._domain_shortfalls[shape] = domains.shortfall(shape, candidates)
        return _NO_DOMAIN

    def _place(
        self,
        job: JobRequest,
        nodes: list[IndexedNode],
        plan: _Plan,
        now: float,
        protection: _Protection | None,
    ) -> Mapping[str, tuple[int, ...]]:
        runtime = job.expected_runtime
        cpus = self._record(job, nodes, math.inf if runtime is None else now + runtime)
        if protection is not None:
            keys = plan.keys
            for node in nodes:
                protection.take(node, keys[node.cls], job.resources.memory)
        return cpus

    def _reserve(self, job: JobRequest, plan: _Plan) -> _Protection | None:
        """EASY backfill's reservation for ``job``: when and where it could start, and the
        room its nodes keep then; None when the nodes taking new work never could hold it."""
        shape = job.shape
        query = self._start_query(shape, plan)
        ends = self._ends.walk(query.request_keys)
        shadow = replay_ends(self._index, ends, self._allocations, [query])
        if not query.answered or query.start is None:
            return None
        spare: dict[str, tuple[list[int], int] | None] = {}
        for node_id in list(query.fitting)[: shape.nodes]:
            if shape.exclusive:
                spare[node_id] = None
                continue
            node = self._index.nodes[node_id]
            key, memory, _ = shadow.free_of(node)
            request_key = query.request_keys[node.cls]
            room = [have - need for have, need in zip(key, request_key, strict=True)]
            spare[node_id] = (room, memory - shape.memory)
        return _Protection(job.id, query.start, spare, self._index.slots_of(list(spare)))

    def _start_query(self, shape: JobShape, plan: _Plan, empty: bool = False) -> StartQuery:
        """A replay question for ``shape``, seeded with the nodes that have room now (none
        when ``empty``: the caller knows no node has room, and the walk would find none)."""
        query = StartQuery(shape, plan.keys)
        if empty:
            return query
        if plan.search is not None:
            # no class closes to the shape: the first nodes of the search, in one C call
            memory, exclusive = shape.memory, shape.exclusive
            for node in self._index.choose(plan.search, memory, exclusive, shape.nodes):
                query.fitting[node.id] = None
            return query
        for cls, request_key in plan.classes:
            if cls.outlasted_by(shape, self._now):
                continue  # its nodes must be free before this job would end
            for node in self._index.iter_fitting(cls, request_key, shape.memory, shape.exclusive):
                query.fitting[node.id] = None
                if query.answered:
                    return query
        return query

    # -- diagnoses ------------------------------------------------------------------------

    def _diagnose(
        self,
        waiting: _Waiting,
        no_room: set[JobShape],
        infeasible: dict[JobShape, tuple[str, Survey]],
        protection: _Protection | None,
        now: float,
        queue: Queue,
        skipped: _Skipped | None,
    ) -> _Diagnoses:
        """Every waiting job's verdict and estimated start; each distinct (shape, situation)
        is surveyed once, and worded once more per account for jobs passed over for fair
        share."""
        starts = self._estimated_starts(no_room)
        reserved_start = start_or_none(protection.start) if protection is not None else None
        # each group's answer is filled in where the pass's table of waiting jobs already
        # points: no step per waiting job here (a comprehension over the groups' jobs was
        # 5-6 % of the churn run)
        for (shape, situation, guarded), answer in waiting.buckets.items():
            answer.verdict = self._verdict(
                shape, situation, infeasible, protection if guarded else None
            )
            answer.start = (
                reserved_start if situation in _STARTS_WITH_RESERVATION else starts.get(shape)
            )
        per_job = waiting.per_job
        fair_answers: dict[tuple[_Answer, str], _Answer] = queue.passed_over
        for (answer, account), fair_answer in fair_answers.items():
            fair_answer.verdict = self._passed_over(answer.verdict, queue.standing(account))
            fair_answer.start = answer.start
        for job_id, account in queue.overtaken.items():
            answer = per_job.get(job_id)
            if answer is None:
                continue  # placed
            fair_answer = fair_answers.get((answer, account))
            if fair_answer is None:
                fair_answer = fair_answers[answer, account] = _Answer()
                fair_answer.verdict = self._passed_over(answer.verdict, queue.standing(account))
                fair_answer.start = answer.start
            per_job[job_id] = fair_answer
        return _Diagnoses(per_job, skipped)

    def _passed_over(self, verdict: _Verdict, standing: AccountUse | None) -> _Verdict:
        """``verdict`` for a job that work of other accounts submitted after it went before
        for fair share: FAIR_SHARE with its account's use, when the job waits for room."""
        if standing is None or verdict.reason not in _WAITS_FOR_ROOM:
            return verdict
        prefix = f"{self._fair.describe_wait(standing)}; "
        return _Verdict(
            ReasonCode.FAIR_SHARE,
            verdict.findings,
            lambda: prefix + verdict.message,
            verdict.reserved_for,
        )

    def _verdict(
        self,
        shape: JobShape,
        situation: int,
        infeasible: dict[JobShape, tuple[str, Survey]],
        protection: _Protection | None,
    ) -> _Verdict:
        """The reason, message and survey of a job of ``shape`` left waiting so."""
        if situation == _INFEASIBLE:
            message, findings = infeasible[shape]
            return _Verdict(ReasonCode.INFEASIBLE, findings, message)
        if situation == _NO_DOMAIN:
            findings = self._diagnostics.survey(shape)
            message = f"{findings.message(shape.nodes)}; {self._domain_shortfalls[shape]}"
            return _Verdict(ReasonCode.INSUFFICIENT_RESOURCES, findings, message)
        reserved_for = None
        if protection is not None:
            guard = protection

            def refused(node_id: str, request_key: tuple[int, ...]) -> bool:
                return guard.refuses(node_id, request_key, shape.memory)

            findings = self._diagnostics.survey(shape, refused, RESERVED, guard.spare)
            if RESERVED in findings.groups:
                reserved_for = guard.job_id
        else:
            findings = self._diagnostics.survey(shape)
        if findings.room_without_device_plugin:
            reason = ReasonCode.DEVICE_PLUGIN_FAILED
        elif findings.room_without_annotations:
            reason = ReasonCode.NODE_ANNOTATIONS_MISMATCH
        elif situation in (_NO_ROOM, _HOLDER):
            reason = ReasonCode.INSUFFICIENT_RESOURCES
        else:
            reason = ReasonCode.BACKFILL_NO_FIT
        # worded when first read: most passes nobody reads it (the engine asks the reason)
        return _Verdict(reason, findings, partial(findings.message, shape.nodes), reserved_for)

    def _estimated_starts(self, no_room: set[JobShape]) -> dict[JobShape, float | None]:
        """Earliest start of each shape with no room, as running work ends (a lower bound)."""
        if not self._estimate_starts or not no_room:
            return {}
        starts: dict[JobShape, float | None] = {}
        asks: list[StartAsk] = []
        plans = self._plans
        for shape in no_room:
            plan = plans.get(shape) or self._plan(shape)
            if _fits_nowhere(shape):
                asks.append((shape, plan.asks, ()))
                continue
            query = self._start_query(shape, plan)
            if query.answered:
                starts[shape] = None  # as the replay leaves a question its seeds answer
            else:
                asks.append((shape, plan.asks, query.fitting))
        if not asks:
            return starts
        # the starts alone in one C call over the book's entries; in Python when the book
        # lacks what that needs (see fi_replay)
        answered = replay_starts(self._index, self._ends, asks)
        if answered is None:
            queries = [
                self._start_query(shape, plans[shape], not seeds) for shape, _, seeds in asks
            ]
            classes = {cls for query in queries for cls in query.request_keys}
            replay_ends(self._index, self._ends.walk(classes), self._allocations, queries)
            answered = [query.start for query in queries]
        for (shape, _, _), start in zip(asks, answered, strict=True):
            starts[shape] = start_or_none(start)
        return starts


def _one_call(shape: JobShape) -> bool:
    """True when a job of ``shape`` can be placed by one C call (:meth:`NodeIndex.place`):
    one node, not exclusive, without a CPU layout, host ports or a domain policy (with
    devices or without)."""
    return (
        shape.nodes == 1
        and not shape.exclusive
        and shape.cpu is None
        and not shape.host_ports
        and shape.domain is None
    )


def _spread_call(shape: JobShape) -> bool:
    """Whether a job of ``shape`` may be placed and recorded by one C call over several
    nodes (``fi_place_nodes``): it runs on several, not exclusively, without devices, CPU
    layout, host ports or a domain policy (those :meth:`DefaultScheduler._record` and
    :mod:`.domains` handle in Python)."""
    return (
        shape.nodes > 1
        and not shape.exclusive
        and not shape.devices
        and shape.cpu is None
        and not shape.host_ports
        and shape.domain is None
    )


def _whole_call(shape: JobShape) -> bool:
    """Whether an exclusive job of ``shape`` may be placed and recorded by one C call on one
    idle node (``fi_place_whole``): it runs on one node, without CPU layout, host ports or a
    domain policy."""
    return (
        shape.nodes == 1
        and shape.exclusive
        and shape.cpu is None
        and not shape.host_ports
        and shape.domain is None
    )


class WholeList:
    """A plan's classes' capacities, for the placement of an exclusive job of one node by
    one C call (:meth:`DefaultScheduler._whole`): what the job holds on a node of each class
    (its whole capacity) as C arrays, and as the usage tuples its record keeps."""

    __slots__ = ("caps", "keys", "memories", "numbers", "usages")

    def __init__(self, search: ClassList, index: NodeIndex) -> None:
        owners = search.owners
        #: each class's usage (cores, memory, device items) of a node held whole
        self.usages: list[Usage] = [
            (
                cls.cap_cores,
                cls.cap_memory,
                tuple(zip(cls.device_kinds, cls.cap_devices, strict=True)),
            )
            for cls in owners
        ]
        #: the capacity keys' arrays, kept alive here (``caps`` only points at them)
        self.keys = [ffi.new("int64_t[]", cls.cap_key) for cls in owners]
        self.caps = ffi.new("int64_t *[]", self.keys)
        self.memories = ffi.new("int64_t[]", [cls.cap_memory for cls in owners])
        #: the usages' numbers in the node index's table (what the book's entries keep)
        self.numbers = ffi.new("int32_t[]", [index.usage_number(usage) for usage in self.usages])


def _fits_nowhere(shape: JobShape) -> bool:
    """True when a shape the pass left without room (``no_room``) has no node with room at
    all now. A single-node, non-exclusive shape without a CPU layout, host ports or a domain
    policy failed ``_find``'s best fit in every class it may use, and capacity only shrinks
    during a pass, so seeding its start question would walk its plan's classes for nothing.
    Other shapes may have some nodes with room (too few, or refused)."""
    return (
        shape.nodes == 1
        and not shape.exclusive
        and shape.cpu is None
        and not shape.host_ports
        and shape.domain is None
    )


def _insert(queue: Any, position: int, job: JobRequest) -> None:
    """``job`` at ``position`` of a queue copy's queue in C (see queue_run): its shape's id,
    expected runtime (NaN for none) and id's bytes (encoded once per job here, not at its
    placement)."""
    data = job.id.encode("utf-8", "surrogatepass")
    runtime = job.expected_runtime
    if lib.fi_queue_insert(
        queue, position, id(job.shape), math.nan if runtime is None else runtime, data, len(data)
    ):
        raise MemoryError("no memory for the queue copy")


def _without(items: _Items, positions: list[int]) -> _Items:
    """``items`` without those at ``positions`` (ascending): the runs between them."""
    kept = items[:0]
    start = 0
    for position in positions:
        kept += items[start:position]
        start = position + 1
    kept += items[start:]
    return kept


class _QueueCopy:
    """The scheduler's own copy of the engine's queue (see
    :meth:`DefaultScheduler.schedule_changes`): the waiting jobs by id, the same jobs in
    queue order (:attr:`JobRequest.order_key`, unique: it ends with the id), and how many
    wait per account (one account: the pass needs no fair-share order), and ``queue``: the
    same jobs in the same order as a queue in C (``fi_queue``: each job's shape's ``id``,
    expected runtime and id's bytes), which the pass's walk in C reads (see queue_run): it
    passes over the jobs of settled shapes and places those of shapes placed by one C call
    without reading the jobs (each job object read was a cache miss, about 0.24 µs, in the
    churn run)."""

    __slots__ = ("accounts", "jobs", "ordered", "queue")

    def __init__(self, jobs: Sequence[JobRequest]) -> None:
        self.jobs = {job.id: job for job in jobs}
        self.ordered = sorted(self.jobs.values(), key=_ORDER)
        self._fill()
        self.accounts = Counter(job.account for job in self.ordered)

    def _fill(self) -> None:
        """The copy's queue in C made again from ``ordered``."""
        queue = ffi.gc(lib.fi_queue_new(), lib.fi_queue_free)
        if queue == ffi.NULL:
            raise MemoryError("no memory for the queue copy")
        self.queue = queue
        ordered = self.ordered
        # in chunks: a million jobs' ids and arrays at once were 70 MiB more at the peak
        for start in range(0, len(ordered), _FILL_CHUNK):
            self._flush(ordered[start : start + _FILL_CHUNK])

    def add_all(self, arrivals: Iterable[JobRequest]) -> None:
        """Each of ``arrivals`` waits, as :meth:`add` of each in turn would have it; those
        that come behind the last job go to the queue in C together (a call per job was
        most of an arrival's cost), and those that come before it (a higher priority) are
        inserted after them, each where its key puts it.

        The order keys are unique, so the queue's order does not depend on the order the
        new jobs are inserted in: only a replacement (an id already waiting, or listed
        twice) puts everything before it in place first. Inserting a job ahead of the last
        as it came flushed the jobs behind so far each time (the flush's fixed cost, its
        arrays and buffers, for one or two jobs: 5 % of the churn run, py-spy)."""
        jobs = self.jobs
        #: the new jobs behind the last, in order; and those that come before it, by id, in
        #: the order they came
        behind: list[JobRequest] = []
        ahead: dict[str, JobRequest] = {}
        last = self.ordered[-1].order_key if self.ordered else None
        for job in arrivals:
            job_id = job.id
            if job_id in jobs or job_id in ahead:
                # a replacement: everything before it in place first, as add would have it
                self._append(behind)
                self._add_each(ahead)
                self.add(job)
                last = self.ordered[-1].order_key
                continue
            key = job.order_key
            if last is not None and last > key:
                ahead[job_id] = job
                continue
            jobs[job_id] = job
            behind.append(job)
            last = key
        self._append(behind)
        self._add_each(ahead)

    def _append(self, behind: list[JobRequest]) -> None:
        """The jobs of ``behind`` (in ``jobs`` already, in order, behind the last) go to the
        end of ``ordered`` and of the queue in C, and are counted by account, together."""
        if not behind:
            return
        self.ordered += behind
        self.accounts.update(map(_ACCOUNT_OF, behind))
        self._flush(behind)

    def _add_each(self, ahead: dict[str, JobRequest]) -> None:
        """:meth:`add` of each job of ``ahead`` (new jobs, none waiting), then none left."""
        for job in ahead.values():
            self.add(job)
        ahead.clear()

    def _flush(self, behind: list[JobRequest]) -> None:
        """The jobs of ``behind``, the last of ``ordered``, go to the queue in C."""
        if not behind:
            return
        ids = [job.id.encode("utf-8", "surrogatepass") for job in behind]
        shapes = array("Q", [id(job.shape) for job in behind])
        nan = math.nan
        runtimes = array(
            "d",
            [nan if job.expected_runtime is None else job.expected_runtime for job in behind],
        )
        lengths = array("i", map(len, ids))
        with (
            ffi.from_buffer("uint64_t[]", shapes) as shape_view,
            ffi.from_buffer("double[]", runtimes) as runtime_view,
            ffi.from_buffer("int32_t[]", lengths) as length_view,
        ):
            failed = lib.fi_queue_extend(
                self.queue, len(behind), shape_view, runtime_view, b"".join(ids), length_view
            )
        if failed:
            raise MemoryError("no memory for the queue copy")
        behind.clear()

    def add(self, job: JobRequest) -> None:
        """``job`` waits (replacing a job of the same id)."""
        self.remove(job.id)
        self.jobs[job.id] = job
        ordered = self.ordered
        # arrivals mostly come in queue order: behind the last job, no bisect through the
        # key function
        if not ordered or ordered[-1].order_key < job.order_key:
            _insert(self.queue, len(ordered), job)
            ordered.append(job)
        else:
            position = bisect_left(ordered, job.order_key, key=_ORDER)
            _insert(self.queue, position, job)
            ordered.insert(position, job)
        self.accounts[job.account] += 1

    def remove_placed(
        self, placements: Sequence[Placement], placed_at: list[int] | None = None
    ) -> None:
        """The jobs of ``placements`` no longer wait; ``placed_at``, when given, is their
        positions in ``ordered``, ascending (the pass met the jobs in this order)."""
        if len(placements) * _BISECTS_PER_FILTER < len(self.ordered):
            for placement in placements:
                self.remove(placement.job_id)
            return
        # many placed (in a FIFO queue mostly the first ones): one filtering pass costs
        # less than a bisect through the key function and a shift per job
        jobs = self.jobs
        accounts = self.accounts
        placed = list(map(jobs.pop, map(_JOB_ID, placements)))
        if len(accounts) == 1:
            # one account (the usual): its count taken down once
            (account,) = accounts
            accounts[account] -= len(placed)
            if not accounts[account]:
                del accounts[account]
        else:
            for job in placed:
                accounts[job.account] -= 1
                if not accounts[job.account]:
                    del accounts[job.account]
        if placed_at is None or len(self.ordered) - len(placed_at) != len(jobs):
            # a pass in fair-share order did not meet the jobs in this order: their
            # positions found by their (unique) keys; a filtering pass and the queue in C
            # made again were 15 % of a churn run over four accounts
            ordered = self.ordered
            placed_at = sorted(bisect_left(ordered, job.order_key, key=_ORDER) for job in placed)
        # the runs between the placed jobs, without a look at any other job (a filter was 3-4
        # % of the churn run)
        self.ordered = _without(self.ordered, placed_at)
        lib.fi_queue_drop(self.queue, placed_at, len(placed_at))

    def remove(self, job_id: str) -> None:
        """``job_id`` no longer waits (nothing when it did not)."""
        job = self.jobs.pop(job_id, None)
        if job is None:
            return
        position = bisect_left(self.ordered, job.order_key, key=_ORDER)
        del self.ordered[position]
        lib.fi_queue_delete(self.queue, position)
        accounts = self.accounts
        accounts[job.account] -= 1
        if not accounts[job.account]:
            del accounts[job.account]


class _Verdict:
    """A verdict shared by every job of one shape and situation: its reason, its survey, and
    its message, worded on first read. The words are a pure function of the survey (which
    nothing changes once made), so wording them late says what wording them at once would;
    a pass's 20-odd messages were 2 % of the churn run, and the engine reads one only when a
    job's reason changed."""

    __slots__ = ("_words", "findings", "reason", "reserved_for")

    def __init__(
        self,
        reason: ReasonCode,
        findings: Survey,
        words: str | Callable[[], str],
        reserved_for: str | None = None,
    ) -> None:
        self.reason = reason
        self.findings = findings
        self._words = words
        #: the job whose reservation kept nodes from these jobs (counted as RESERVED)
        self.reserved_for = reserved_for

    @property
    def message(self) -> str:
        """The verdict in people's words (worded once)."""
        words = self._words
        if not isinstance(words, str):
            words = self._words = words()
        return words


class _Answer:
    """What a waiting job is told: the verdict and estimated start of its group (shared by
    the group's jobs; set once the pass has placed what it could)."""

    __slots__ = ("start", "verdict")

    verdict: _Verdict
    start: float | None


class _Waiting:
    """The jobs a pass leaves waiting, grouped by what decides their diagnosis: the shape
    answered for them, their situation, and whether the reservation guards them. Each group
    has one :class:`_Answer`, and the table of waiting jobs points each job id at its
    group's."""

    __slots__ = ("buckets", "per_job")

    def __init__(self) -> None:
        self.buckets: dict[tuple[JobShape, int, bool], _Answer] = {}
        #: job id -> its group's answer, in queue order
        self.per_job: dict[str, _Answer] = {}

    def bucket(self, shape: JobShape, situation: int, guarded: bool) -> _Answer:
        """The answer of the jobs waiting so (the reservation guards only backfill)."""
        key = (shape, situation, guarded and situation in _BACKFILL)
        answer = self.buckets.get(key)
        if answer is None:
            answer = self.buckets[key] = _Answer()
        return answer

    def add(self, job_id: str, shape: JobShape, situation: int, guarded: bool) -> None:
        """The job ``job_id`` waits so."""
        self.per_job[job_id] = self.bucket(shape, situation, guarded)


class _Skipped:
    """The jobs a pass over a plain queue passed over because their shape was settled (see
    ``DefaultScheduler._pass``), told on demand what the step per job would have written:
    the answer ``settled`` held for their shape when the pass reached them.

    ``settled`` is only added to, but once: it is emptied when the reservation is made, so a
    job met before the reservation's holder takes the answer its shape had then (kept by
    :meth:`reserved_at`), a later one the answer of the end of the pass.
    """

    __slots__ = (
        "_before",
        "_holder_at",
        "_placed",
        "_positions",
        "jobs",
        "met",
        "placed_positions",
        "placements",
        "settled",
    )

    def __init__(
        self,
        jobs: list[JobRequest],
        placements: list[Placement],
        settled: dict[int, _Answer],
    ) -> None:
        #: the pass's queue, in the order it met it (the pass's own list)
        self.jobs = jobs
        #: the pass's placements (filled as it goes)
        self.placements = placements
        #: id(a job's shape) -> its answer (the pass's table, as it ends)
        self.settled = settled
        #: the positions of the jobs the pass looked at, in order
        self.met: list[int] = []
        #: the positions of the jobs it placed, in order (the pass notes each as it places
        #: it: finding them afterwards by their ids was a dict of every job looked at)
        self.placed_positions: list[int] = []
        self._before: dict[int, _Answer] = {}
        self._holder_at = -1
        self._positions: dict[str, int] | None = None
        self._placed: set[str] | None = None

    def reserved_at(self) -> None:
        """The reservation was made for the job the pass is at, and ``settled`` is emptied
        now."""
        self._before = dict(self.settled)
        self._holder_at = self.met[-1]

    def positions(self) -> dict[str, int]:
        """Job id -> its position in the queue (made on first use)."""
        if self._positions is None:
            self._positions = dict(zip(map(_ID, self.jobs), itertools.count(), strict=False))
        return self._positions

    def placed(self) -> set[str]:
        """The ids of the jobs placed (made on first use, once the pass has ended)."""
        if self._placed is None:
            self._placed = set(map(_JOB_ID, self.placements))
        return self._placed

    def reasons(self) -> dict[str, ReasonCode | None]:
        """Job id -> the reason of what :meth:`answer` tells it, for every job of the queue,
        in bulk: by its shape, from the table of the jobs before the reservation's holder or
        the pass's own (None for a shape neither holds: asked one by one, it raises)."""
        before = {shape: answer.verdict.reason for shape, answer in self._before.items()}
        after = {shape: answer.verdict.reason for shape, answer in self.settled.items()}
        shapes = list(map(id, map(_SHAPE, self.jobs)))
        holder = max(self._holder_at, 0)
        reasons = [*map(before.get, shapes[:holder]), *map(after.get, shapes[holder:])]
        return dict(zip(map(_ID, self.jobs), reasons, strict=True))

    def answer(self, position: int) -> _Answer:
        """The answer of the passed-over job at ``position``."""
        table = self._before if position < self._holder_at else self.settled
        return table[id(self.jobs[position].shape)]

    def placed_at(self) -> list[int]:
        """The placed jobs' positions in the queue, ascending (the pass met each of them)."""
        return self.placed_positions


class _Diagnoses(Mapping[str, Diagnosis]):
    """Job id -> :class:`Diagnosis`, built on first read from the pass's shared verdicts.

    A pass with a long queue leaves many jobs waiting for the same few reasons; the verdicts
    are computed during the pass, and only the per-job objects wait until someone asks.
    The jobs a pass over a plain queue passed over (``skipped``) are not in ``per_job``:
    their answers are read from the pass's table of settled shapes when asked for.
    """

    def __init__(self, per_job: dict[str, _Answer], skipped: _Skipped | None) -> None:
        #: job id -> the answer (verdict, estimated start) of the jobs left waiting that the
        #: pass looked at (every job left waiting, without ``skipped``)
        self.per_job = per_job
        self._skipped = skipped
        #: every waiting job's answer, in queue order (made when first iterated)
        self._all: dict[str, _Answer] | None = None if skipped is not None else per_job
        self._built: dict[str, Diagnosis] = {}

    def _answer(self, job_id: str) -> _Answer:
        answer = self.per_job.get(job_id)
        if answer is not None:
            return answer
        skipped = self._skipped
        if skipped is None:
            raise KeyError(job_id)
        position = skipped.positions()[job_id]
        if job_id in skipped.placed():
            raise KeyError(job_id)
        return skipped.answer(position)

    def _every(self) -> dict[str, _Answer]:
        """Every waiting job's answer, in queue order."""
        if self._all is None:
            skipped = self._skipped
            assert skipped is not None
            per_job = self.per_job
            placed = skipped.placed()
            every: dict[str, _Answer] = {}
            for position, job in enumerate(skipped.jobs):
                job_id = job.id
                answer = per_job.get(job_id)
                if answer is None:
                    if job_id in placed:
                        continue
                    answer = skipped.answer(position)
                every[job_id] = answer
            self._all = every
        return self._all

    def others(self, ids: set[str]) -> set[str]:
        """The ids of ``ids`` that are not of jobs left waiting, by set operations over the
        ids (iterating this mapping would look up every passed-over job's answer)."""
        skipped = self._skipped
        if skipped is None:
            return ids.difference(self.per_job)
        # the queue's ids but the placed jobs' are the waiting jobs'
        others = ids.difference(map(_ID, skipped.jobs))
        others.update(ids.intersection(skipped.placed()))
        return others

    def placed_at(self) -> list[int] | None:
        """The placed jobs' positions in the queue, ascending, when the pass met a plain
        queue (else None)."""
        return None if self._skipped is None else self._skipped.placed_at()

    def reason_of(self, job_id: str) -> ReasonCode:
        """The reason of ``job_id``'s diagnosis, without building the diagnosis (the engine
        asks it of every waiting stage in every pass, and reports only a new reason)."""
        return self._answer(job_id).verdict.reason

    def reasons_of(self, job_ids: Iterable[str]) -> list[ReasonCode | None]:
        """:meth:`reason_of` of each of ``job_ids``, in their order, None for a job not
        diagnosed. The engine asks it of every waiting run in every pass: one call per run
        (its lookups, its KeyError) was over half of that walk, so the passed-over jobs'
        reasons are read by shape, in bulk."""
        per_job = self.per_job
        skipped = self._skipped
        if skipped is None:
            return [None if a is None else a.verdict.reason for a in map(per_job.get, job_ids)]
        reasons = skipped.reasons()
        for job_id in skipped.placed():
            reasons[job_id] = None
        for job_id, answer in per_job.items():
            reasons[job_id] = answer.verdict.reason
        return list(map(reasons.get, job_ids))

    def __getitem__(self, job_id: str) -> Diagnosis:
        built = self._built.get(job_id)
        if built is None:
            answer = self._answer(job_id)
            verdict, start = answer.verdict, answer.start
            built = self._built[job_id] = _diagnosis(
                job_id,
                verdict.reason,
                verdict.message,
                verdict.findings,
                start,
                verdict.reserved_for,
            )
        return built

    def __iter__(self) -> Iterator[str]:
        return iter(self._every())

    def __len__(self) -> int:
        skipped = self._skipped
        if skipped is None:
            return len(self.per_job)
        # every job of the queue was placed or left waiting
        return len(skipped.jobs) - len(skipped.placements)

    def __contains__(self, job_id: object) -> bool:
        if job_id in self.per_job:
            return True
        skipped = self._skipped
        if skipped is None or not isinstance(job_id, str):
            return False
        return job_id in skipped.positions() and job_id not in skipped.placed()


def _diagnosis(
    job_id: str,
    reason: ReasonCode,
    message: str,
    findings: Survey,
    start: float | None,
    reserved_for: str | None = None,
) -> Diagnosis:
    return Diagnosis(
        job_id=job_id,
        reason=reason,
        message=message,
        nodes_considered=findings.nodes_considered,
        nodes_available=findings.nodes_available,
        groups=MappingProxyType(findings.groups),
        roomiest_node=findings.roomiest_node,
        shortfall=None if findings.shortfall is None else MappingProxyType(findings.shortfall),
        estimated_start=start,
        resource_field=findings.resource_field,
        reserved_for=reserved_for,
    )
