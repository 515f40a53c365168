"""The default scheduler's picture of the nodes: classes of interchangeable nodes, each with an
index of its nodes by free capacity, so a placement decision never scans every node.

Nodes are grouped into :class:`NodeClass` es by everything placement treats as static:
annotations, capacity, CPU topology and device-plugin health. Inside a class, the nodes that
take new work and are not running an exclusive job are indexed by free capacity, in C
(``csrc/free_index.c``, the cffi module ``_free_index``; each class owns one ``fi_class``):

* per *free key*, ``(free count of each device kind..., free cores)``, a sorted array of the
  nodes' entries, ``(free memory, rank)``, the rank being the node's place in the order of
  node ids (ties of memory, as every idle node of a class has, go by node id);
* the present free keys, sorted.

A *book* (one ``fi_book`` per :class:`NodeIndex`) remembers where each node (by its slot, a
small int) is indexed and how many jobs run on it, so a placement or a release moves a node
with one call that names its slot and the change (``fi_shift``), not its old and new keys; each
class's *idle* nodes (indexed, nothing running), in the order they became idle, are a list the
C index keeps through the same calls. A single-node job of a settled plan is found and placed
by one call over the plan's classes (``fi_place``, :meth:`NodeIndex.place`).

The book also keeps an *entry* per running job and node: the node's slot, the job's cores,
memory and device counts there (by the class's device kinds), its id (copied) and its usage
as a number of the index's table of usages (:meth:`NodeIndex.usage_number`), listed per node
oldest first, a job of several nodes' entries chained from its first. The placing call makes
a one-node job's entry and the releasing call forgets it (``fi_release_entry``), so neither
writes a Python object; the node's jobs (:attr:`IndexedNode.jobs`) are read from the
entries. A node out of the index is told to the book with its state (``fi_note_node``) when
it leaves or changes, so that the estimated starts' replay runs in C over the entries alone
(``fi_replay``, :func:`.timeline.replay_starts`).

Finding a node for ``c`` cores, ``m`` bytes and ``d`` devices bisects ``keys`` to the first key
whose leading component is large enough, walks keys upward until one dominates the request,
and bisects that key's list for the least memory that is at least ``m``: best fit on devices,
then cores, then memory. The walk is bounded by the number of distinct free keys in the class
(at most a few hundred for real node shapes), not by the number of nodes. Nodes that take no
new work (held, not ready) or run an exclusive job are kept out of the index and only counted,
per class, by the label diagnostics report them under.

What the index cannot bisect is checked node by node, on the nodes that already have room by
count, and only for the jobs that ask for it: the cores a pinned job would get (each node keeps
the set of its cores no pinned job holds; see :mod:`.cpu_layout`) and the host ports running
jobs hold there.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import Any

from fuzzball_core.errors import NotFound
from fuzzball_core.scheduling import (
    EXCLUSIVE_NODE,
    PLACE_UNTIL,
    CpuPinning,
    JobShape,
    NodeInfo,
    Resources,
)
from fuzzball_plugins.schedulers._free_index import ffi, lib
from fuzzball_plugins.schedulers.cpu_layout import choose_cores

#: What a job uses on one node: (cores, memory, ((device kind, count), ...)).
Usage = tuple[int, int, tuple[tuple[str, int], ...]]

#: Ranks are below ``1 << RANK_BITS``.
RANK_BITS = 40
#: The largest rank.
RANK_MASK = (1 << RANK_BITS) - 1
#: The space new ranks leave between neighbours, so a node registered between two others
#: mostly finds a free rank there without renumbering every node
_RANK_GAP = 1 << 16

#: How many ranks :meth:`NodeIndex.iter_fitting` asks the C index for at once.
_BATCH = 256
#: How many request keys' C arrays are kept before the table starts over.
_NEEDS_BOUND = 4096

#: The label of nodes skipped because an exclusive job runs on them.
EXCLUSIVE_BUSY = "running an exclusive job"
#: The label of nodes a job is kept off because it would outlast them (PLACE_UNTIL).
OUTLASTS_NODE = "job's timeout runs past the node's ttl less its buffer"
#: The label of nodes that reported no CPU topology, for jobs asking for a CPU layout.
NO_CPU_TOPOLOGY = "no CPU topology"


#: A node's id.
_ID = attrgetter("id")

#: Numbers for node classes (see NodeClass.number).
_CLASS_NUMBERS = itertools.count()


class NodeClass:
    """Nodes placement cannot tell apart: same annotations, capacity, CPU topology and plugin
    health."""

    __slots__ = (
        "all_cores",
        "annotations",
        "cap_cores",
        "cap_devices",
        "cap_key",
        "cap_memory",
        "changes_at",
        "device_kinds",
        "device_plugin_failed",
        "free",
        "indexed",
        "members",
        "number",
        "number_tuple",
        "one_job_at_a_time",
        "pinning_fits",
        "place_until",
        "profile",
        "topology",
        "unavailable",
    )

    def __init__(self, profile: tuple, info: NodeInfo) -> None:
        self.profile = profile
        #: the class's number, never another class's (the scheduler lists running jobs'
        #: ends by class number: a record of ints and strings is not tracked by the cyclic
        #: collector, one holding the class would be)
        self.number = next(_CLASS_NUMBERS)
        #: ``(number,)``: the class numbers of every job placed on one node of the class, one
        #: tuple for all of them (a tuple per running job was one more object to collect)
        self.number_tuple: tuple[int] = (self.number,)
        self.annotations: dict[str, str] = dict(info.annotations)
        capacity = info.capacity
        self.cap_cores = capacity.cores
        self.cap_memory = capacity.memory
        self.device_kinds: tuple[str, ...] = tuple(kind for kind, _ in capacity.device_items)
        self.cap_devices: tuple[int, ...] = tuple(count for _, count in capacity.device_items)
        self.cap_key: tuple[int, ...] = (*self.cap_devices, self.cap_cores)
        self.device_plugin_failed = info.device_plugin_failed
        #: nodes annotated EXCLUSIVE_NODE: any job placed there holds the node alone
        self.one_job_at_a_time = self.annotations.get(EXCLUSIVE_NODE) == "true"
        #: nodes annotated PLACE_UNTIL take only jobs that end by then (None: any job)
        self.place_until = _seconds(self.annotations.get(PLACE_UNTIL))
        self.topology = info.cpu_topology
        self.all_cores = frozenset(core.id for core in self.topology)
        #: (layout, cores) -> whether an idle node of the class can lay that many cores out so
        self.pinning_fits: dict[tuple[CpuPinning, int], bool] = {}
        #: every registered node of the class, by id
        self.members: dict[str, IndexedNode] = {}
        #: the C index of the indexed members (their free keys and entries)
        self.free = ffi.gc(lib.fi_class_new(len(self.cap_key)), lib.fi_class_free)
        if self.free == ffi.NULL:
            raise MemoryError("no memory for a node class's index")
        #: how many members are in the index (those of them with nothing running, in the
        #: order they became idle, are kept by the C index: NodeIndex.idle_nodes)
        self.indexed = 0
        #: label -> number of members kept out of the index for that reason
        self.unavailable: Counter[str] = Counter()
        #: where the C index counts the class's changes (see :attr:`changes`), read without
        #: a call (the diagnoses read it twice per walk they remember)
        self.changes_at = lib.fi_class_changes_at(self.free)

    @property
    def changes(self) -> int:
        """Bumped whenever a node enters, leaves or moves in the index (``free`` and the
        idle nodes change only then): what was computed from them at an equal count holds.
        The C index counts it (a move counts two) in the calls that move nodes."""
        return self.changes_at[0]  # type: ignore[no-any-return]

    def request_key(self, shape: JobShape) -> tuple[int, ...] | None:
        """``shape``'s request as a free key of this class, or None if the class lacks one of
        the requested device kinds."""
        wanted = dict(shape.devices)
        counts = [wanted.pop(kind, 0) for kind in self.device_kinds]
        if wanted:
            return None
        return (*counts, shape.cores)

    def matches_annotations(self, shape: JobShape) -> bool:
        """True when every annotation the job requires is on these nodes with that value."""
        annotations = self.annotations
        return all(annotations.get(key) == value for key, value in shape.annotations)

    def outlasted_by(self, shape: JobShape, now: float) -> bool:
        """True when ``shape``, started ``now``, could run past the time these nodes must be
        free by (its runtime unknown, or too long)."""
        until = self.place_until
        if until is None:
            return False
        return shape.runtime is None or now + shape.runtime > until

    def holds_when_idle(self, request_key: tuple[int, ...], memory: int) -> bool:
        """True when one idle node of the class has room for the request."""
        return memory <= self.cap_memory and all(
            need <= have for need, have in zip(request_key, self.cap_key, strict=True)
        )

    def holds_pinning(self, shape: JobShape) -> bool:
        """True when an idle node of the class can give ``shape`` the cores it asks for laid
        out as it asks (always, for a job that asks for no layout)."""
        pinning = shape.cpu
        if pinning is None:
            return True
        key = (pinning, shape.cores)
        fits = self.pinning_fits.get(key)
        if fits is None:
            found = choose_cores(self.topology, self.all_cores, shape.cores, pinning)
            fits = self.pinning_fits[key] = found is not None
        return fits

    def pinning_label(self, shape: JobShape) -> str | None:
        """Why an idle node of the class cannot lay out ``shape``'s cores, or None if it can."""
        if shape.cpu is None:
            return None
        if not self.topology:
            return NO_CPU_TOPOLOGY
        if not self.holds_pinning(shape):
            return f"too small ({shape.cpu.describe()})"
        return None

    def describe_capacity(self) -> str:
        """People's words for one node of this class: ``16 cores, 64 GiB memory``."""
        return Resources(
            self.cap_cores,
            self.cap_memory,
            dict(zip(self.device_kinds, self.cap_devices, strict=True)),
        ).describe()


class ClassList:
    """A plan's classes and their request keys as the C arrays :meth:`NodeIndex.place`
    walks (built once per plan). It holds the classes, so their C indexes outlive it."""

    __slots__ = ("classes", "count", "keys", "needs", "numbers", "owners", "request_keys")

    def __init__(self, classes: Sequence[tuple[NodeClass, tuple[int, ...]]]) -> None:
        self.owners = [cls for cls, _ in classes]
        #: the request keys as tuples, by position (a placement with devices takes its
        #: class's off the node's free devices)
        self.request_keys = [request_key for _, request_key in classes]
        self.count = len(classes)
        self.classes = ffi.new("fi_class *[]", [cls.free for cls in self.owners])
        #: the classes' numbers, under which a placement lists its job's end
        self.numbers = ffi.new("int32_t[]", [cls.number for cls in self.owners])
        #: the request keys' arrays, kept alive here (``needs`` only points at them)
        self.keys = [ffi.new("int64_t[]", request_key) for _, request_key in classes]
        self.needs = ffi.new("int64_t *[]", self.keys)


class SlotSet:
    """Node slots as a C array, for :meth:`NodeIndex.place` to keep off (a reservation's
    nodes)."""

    __slots__ = ("array", "count")

    def __init__(self, slots: Sequence[int]) -> None:
        self.count = len(slots)
        self.array = ffi.new("int32_t[]", list(slots))


#: No slots kept off.
NO_SLOTS = SlotSet(())


class IndexedNode:
    """One registered node: what it is, what runs on it and what it has free."""

    __slots__ = (
        "_cores",
        "_memory",
        "cls",
        "exclusive_job",
        "free_core_ids",
        "free_devices",
        "id",
        "id_tuple",
        "in_index",
        "index",
        "info",
        "pinned",
        "ports",
        "rank",
        "slot",
        "unavailable_label",
    )

    def __init__(
        self, info: NodeInfo, cls: NodeClass, rank: int, slot: int, index: NodeIndex
    ) -> None:
        self.id = info.id
        #: the index whose book holds the node's running jobs (their entries) and, while the
        #: node is indexed, its free cores and memory
        self.index = index
        #: ``(id,)``: the node ids of every job placed on this node alone, one tuple for all
        self.id_tuple: tuple[str] = (info.id,)
        #: the node's place in the order of node ids (ties of free memory in the index)
        self.rank = rank
        #: the node's record in the index's book (see the module docstring)
        self.slot = slot
        self.info = info
        self.cls = cls
        self.exclusive_job: str | None = None
        #: the free cores and memory while the node is out of the index (the C index keeps
        #: them while it is in: see free_cores)
        self._cores = cls.cap_cores
        self._memory = cls.cap_memory
        self.free_devices: list[int] = list(cls.cap_devices)
        #: whether the node is in its class's free index
        self.in_index = False
        #: why the node takes no new work (diagnostics label), or None
        self.unavailable_label: str | None = info.unavailable_label
        #: ids of the cores no pinned job holds
        self.free_core_ids: set[int] = set(cls.all_cores)
        #: job id -> the ids of the cores it is pinned to
        self.pinned: dict[str, tuple[int, ...]] = {}
        #: host port (``tcp/8080``) -> the job holding it
        self.ports: dict[str, str] = {}

    @property
    def free_cores(self) -> int:
        """The node's free cores (the C index's, while the node is indexed)."""
        if self.in_index:
            return int(lib.fi_free_cores(self.index._book, self.slot))
        return self._cores

    @free_cores.setter
    def free_cores(self, cores: int) -> None:
        # an indexed node is moved by the C index's calls alone
        if self.in_index:
            raise RuntimeError(f"node {self.id} is indexed: its free cores are the index's")
        self._cores = cores

    @property
    def free_memory(self) -> int:
        """The node's free memory (the C index's, while the node is indexed)."""
        if self.in_index:
            return int(lib.fi_free_memory(self.index._book, self.slot))
        return self._memory

    @free_memory.setter
    def free_memory(self, memory: int) -> None:
        if self.in_index:
            raise RuntimeError(f"node {self.id} is indexed: its free memory is the index's")
        self._memory = memory

    @property
    def jobs(self) -> dict[str, Usage]:
        """Job id -> usage of the jobs running here, oldest first (a copy made from the
        book's entries: see :meth:`NodeIndex.jobs_of`)."""
        return self.index.jobs_of(self)

    def job_count(self) -> int:
        """How many jobs run here."""
        return int(lib.fi_entry_count(self.index._book, self.slot))

    def free_key(self) -> tuple[int, ...]:
        """The node's current free key: ``(free devices..., free cores)``."""
        return (*self.free_devices, self.free_cores)

    def fits(self, request_key: tuple[int, ...], memory: int) -> bool:
        """True when the node's free capacity covers the request (ignores exclusivity)."""
        return self.free_memory >= memory and all(
            have >= need for have, need in zip(self.free_key(), request_key, strict=True)
        )

    def usable(self) -> bool:
        """True when the node takes new work (ready, no holds)."""
        return self.unavailable_label is None

    def port_in_use(self, ports: Sequence[str]) -> str | None:
        """The first of ``ports`` a job running here holds, or None."""
        held = self.ports
        if held:
            for port in ports:
                if port in held:
                    return port
        return None

    def cores_for(self, shape: JobShape) -> list[int] | None:
        """The cores a pinned ``shape`` would get here now (every core for an exclusive
        one), or None when the free cores allow no such layout."""
        pinning = shape.cpu
        assert pinning is not None
        cls = self.cls
        if shape.exclusive:
            return sorted(cls.all_cores) if cls.holds_pinning(shape) else None
        return choose_cores(cls.topology, self.free_core_ids, shape.cores, pinning)

    def refusal(self, shape: JobShape) -> str | None:
        """Why this node, with room for ``shape`` by count, still cannot take it (a host
        port in use, no such layout of free cores), or None when it can."""
        port = self.port_in_use(shape.host_ports)
        if port is not None:
            return f"host port {port} in use"
        if shape.cpu is not None and self.cores_for(shape) is None:
            return f"no free cores for {shape.cpu.describe()}"
        return None


class NodeIndex:
    """Every registered node, grouped into classes, with free-capacity indexes."""

    def __init__(self) -> None:
        self.nodes: dict[str, IndexedNode] = {}
        self.classes: dict[tuple, NodeClass] = {}
        #: bumped whenever a class appears or disappears, invalidating cached class lists
        self.epoch = 0
        #: bumped whenever a node is registered, updated or removed
        self.version = 0
        #: every registered node's capacity summed (held ones too), kept as nodes come and go:
        #: summing it at a node's change was a walk over every class, and a node's own
        #: annotation makes each node one (4.5 ms at 5,000 nodes, a third of the loop while
        #: thousands of nodes registered again after their streams were dropped)
        self.total_cores = 0
        self.total_memory = 0
        self.total_devices: dict[str, int] = {}
        #: bumped whenever what a node's usage shows may have changed: a node registered,
        #: updated or removed, a job added to, placed on or removed from a node
        self._usage_changes = 0
        #: how many classes are annotated PLACE_UNTIL: while none is, a job's expected
        #: runtime has no say in where it can go, and shapes that differ only by it are one
        self.timed_classes = 0
        #: node rank -> node (the C index answers with ranks)
        self.by_rank: dict[int, IndexedNode] = {}
        #: node slot -> node (None: a free slot); the idle walks and fi_place answer slots
        self.by_slot: list[IndexedNode | None] = []
        #: where each node is indexed, by slot (see the module docstring)
        self._book = ffi.gc(lib.fi_book_new(), lib.fi_book_free)
        if self._book == ffi.NULL:
            raise MemoryError("no memory for the node index's book")
        #: usage number -> a usage, and back: the book's entries keep a job's usage on its
        #: node as a number in this table (a job's id the entry copies itself), so that a
        #: placement writes no Python object (distinct usages are few: one per shape, and
        #: an exclusive job's node capacity per class)
        self._usages: list[Usage] = []
        self._usage_numbers: dict[Usage, int] = {}
        self._id_length = ffi.new("int32_t[1]")
        self._entry_room = ffi.new("int32_t[]", 64)
        #: :meth:`state_of`'s free cores and memory
        self._state = ffi.new("int64_t[2]")
        #: slots of removed nodes, taken again before new ones
        self._free_slots: list[int] = []
        self._slots = 0
        #: request keys as C arrays, for the searches (a few hundred distinct ones)
        self._needs: dict[tuple[int, ...], Any] = {}
        #: :meth:`iter_fitting`'s cursor and batch of ranks
        self._cursor = ffi.new("int32_t[2]")
        self._batch = ffi.new("int64_t[]", _BATCH)
        #: :meth:`idle_nodes`'s batch of slots, and :meth:`idle_ids`'s (as long as the
        #: largest class's idle nodes)
        self._slot_batch = ffi.new("int32_t[]", _BATCH)
        self._idle_room = ffi.new("int32_t[]", _BATCH)
        #: :meth:`choose`'s slots (as long as the most it was asked for)
        self._choose_room = ffi.new("int32_t[]", 16)
        #: :meth:`_shift_devices`'s change of a free key (as long as the widest class's key)
        self._delta = ffi.new("int64_t[]", 8)
        #: what fi_place found (see :meth:`place`)
        self.where = ffi.new("int32_t[4]")
        #: :meth:`scan_free`'s ranks with room (as long as the largest class's index)
        self._scan_room = ffi.new("int64_t[]", _BATCH)
        self._scan_lacking = ffi.new("int64_t[]", 8)
        self._scan_closest = ffi.new("int64_t[]", 9)
        self._scan_score = ffi.new("double[1]")
        #: every registered node id, sorted (ranks follow this order)
        self._ids: list[str] = []
        self._ranks: dict[str, int] = {}

    @property
    def book(self) -> Any:
        """The ``fi_book``: the scheduler releases a placed job by one call on it."""
        return self._book

    @property
    def usage_changes(self) -> int:
        """Bumped whenever what a node's usage shows may have changed: a node registered,
        updated or removed, a job added to, placed on or removed from a node (the book
        counts the placements and releases made in C)."""
        return self._usage_changes + int(lib.fi_book_changes(self._book))

    # -- running jobs' entries --------------------------------------------------------------

    def _entries(self, node: IndexedNode) -> list[int]:
        """The numbers of ``node``'s entries, oldest first."""
        book = self._book
        count = lib.fi_entry_count(book, node.slot)
        if len(self._entry_room) < count:
            self._entry_room = ffi.new("int32_t[]", max(count, 2 * len(self._entry_room)))
        written = lib.fi_entries(book, node.slot, self._entry_room, count)
        return ffi.unpack(self._entry_room, written)  # type: ignore[no-any-return]

    def state_of(self, node: IndexedNode) -> tuple[list[int], int, int]:
        """``node``'s free key (as a list), free memory and running jobs, in one C call
        (a replay's first look at a node)."""
        state = self._state
        jobs = lib.fi_node_state(self._book, node.slot, state)
        if node.in_index:
            return [*node.free_devices, state[0]], state[1], jobs
        return [*node.free_devices, node._cores], node._memory, jobs

    def usage_number(self, usage: Usage) -> int:
        """``usage``'s number in the table the book's entries name usages by (a new one for
        a usage not seen before; numbers are never taken back)."""
        number = self._usage_numbers.get(usage)
        if number is None:
            number = self._usage_numbers[usage] = len(self._usages)
            self._usages.append(usage)
        return number

    def _entry_id(self, e: int) -> str:
        """The id of the job whose live entry is ``e`` (the book's copy, decoded)."""
        length = self._id_length
        data = lib.fi_entry_id(self._book, e, length)
        return ffi.unpack(data, length[0]).decode("utf-8", "surrogatepass")  # type: ignore[no-any-return]

    def jobs_of(self, node: IndexedNode) -> dict[str, Usage]:
        """Job id -> usage of the jobs running on ``node``, oldest first."""
        usages, book = self._usages, self._book
        return {self._entry_id(e): usages[lib.fi_entry_usage(book, e)] for e in self._entries(node)}

    def job_ids(self, node: IndexedNode) -> list[str]:
        """The ids of the jobs running on ``node``, oldest first."""
        return [self._entry_id(e) for e in self._entries(node)]

    def _entry_of(self, node: IndexedNode, job_id: str) -> int:
        """The number of ``job_id``'s entry on ``node``, or -1."""
        data = job_id.encode("utf-8", "surrogatepass")
        return int(lib.fi_entry_find(self._book, node.slot, data, len(data)))

    def usage_of(self, node: IndexedNode, job_id: str) -> Usage:
        """``job_id``'s usage on ``node`` (KeyError when it does not run there)."""
        e = self._entry_of(node, job_id)
        if e < 0:
            raise KeyError(job_id)
        return self.usage_at(e)

    def usage_at(self, entry: int) -> Usage:
        """The usage of the job whose live entry is ``entry``."""
        return self._usages[lib.fi_entry_usage(self._book, entry)]

    def _new_entry(self, node: IndexedNode, job_id: str, usage: Usage, plain: bool) -> int:
        """A new entry for ``job_id`` of ``usage`` on ``node``, last in its list."""
        data = job_id.encode("utf-8", "surrogatepass")
        e = lib.fi_entry_add(
            self._book,
            node.slot,
            usage[0],
            usage[1],
            plain,
            self.usage_number(usage),
            data,
            len(data),
        )
        if e < 0:
            raise MemoryError(f"no memory to record job {job_id} on node {node.id}")
        if node.cls.device_kinds:
            self._note_devices(int(e), node.cls, usage)
        return int(e)

    def _note_devices(self, e: int, cls: NodeClass, usage: Usage) -> None:
        """Tell the book entry ``e``'s device counts by ``cls``'s device kinds (what the
        estimated starts' replay gives back; a kind the class lacks is not counted, as
        the replay in Python does not)."""
        kinds = cls.device_kinds
        counts = [0] * len(kinds)
        for kind, count in usage[2]:
            if kind in kinds:
                counts[kinds.index(kind)] += count
        lib.fi_entry_devices(self._book, e, counts, len(counts))

    def chain(self, entries: Sequence[int]) -> None:
        """Chain a job's ``entries`` (one per node, in its nodes' order) in the book, so
        that the estimated starts' replay finds every one from the first."""
        book = self._book
        for e, following in itertools.pairwise(entries):
            lib.fi_entry_chain(book, e, following)

    def request_array(self, request_key: tuple[int, ...]) -> Any:
        """``request_key`` as a C array (the searches' own, kept)."""
        return self._need(request_key)

    def _pop_entry(self, node: IndexedNode, job_id: str, entry: int = -1) -> Usage | None:
        """Forget ``job_id``'s entry on ``node`` (``entry`` when the caller knows it, else
        found on the node's list); its usage, or None when it has none."""
        e = entry if entry >= 0 else self._entry_of(node, job_id)
        if e < 0:
            return None
        usage = self.usage_at(e)
        lib.fi_entry_remove(self._book, e)
        return usage

    # -- registration ---------------------------------------------------------------------

    @staticmethod
    def profile_of(info: NodeInfo) -> tuple:
        """The static profile that decides a node's class."""
        return (
            tuple(info.annotations.items()),
            info.capacity.cores,
            info.capacity.memory,
            info.capacity.device_items,
            info.device_plugin_failed,
            info.cpu_topology,
        )

    def upsert(self, info: NodeInfo) -> IndexedNode:
        """Register or update a node, keeping what runs on it. A node told again as it is
        (a reconnecting agent's Register: the same capacity, annotations, holds and
        readiness) changes nothing, and counts no change: the versions that the caches of
        fair share's totals, the diagnoses and the node lists' usage copies are kept by
        stay as they were (a 5,000-node flap re-registered every node, and each Register
        made the next node list ask all 5,000 nodes' usage again)."""
        old = self.nodes.get(info.id)
        if old is not None and old.info == info:
            return old
        self.version += 1
        self._usage_changes += 1
        jobs: dict[str, Usage] = {}
        exclusive_job: str | None = None
        if old is not None:
            # the running jobs' entries stay the slot's, which the node keeps
            jobs, exclusive_job = old.jobs, old.exclusive_job
            self._detach(old)
            rank, slot = old.rank, old.slot
        else:
            rank = self._new_rank(info.id)
            slot = self._free_slots.pop() if self._free_slots else self._new_slot()
        cls = self._class_for(info)
        node = IndexedNode(info, cls, rank, slot, self)
        self.by_rank[rank] = node
        self.by_slot[slot] = node
        node.exclusive_job = exclusive_job
        for usage in jobs.values():
            self._subtract(node, usage)
        if old is not None and cls.device_kinds != old.cls.device_kinds:
            # the entries count devices by the class's kinds: by the new class's now
            for e in self._entries(node):
                self._note_devices(e, cls, self.usage_at(e))
        if old is not None:
            # what running jobs hold stays theirs; cores the new topology lacks are dropped
            node.pinned = old.pinned
            node.ports = old.ports
            for core_ids in old.pinned.values():
                node.free_core_ids.difference_update(core_ids)
        self.nodes[info.id] = node
        cls.members[node.id] = node
        self._count_capacity(cls, 1)
        self._attach(node)
        return node

    def remove(self, node_id: str) -> IndexedNode:
        """Forget a node (the caller checked that nothing runs on it)."""
        node = self.get(node_id)
        self.version += 1
        self._usage_changes += 1
        self._detach(node)
        del self.nodes[node_id]
        del self.by_rank[node.rank]
        del self._ranks[node_id]
        del self._ids[bisect_left(self._ids, node_id)]
        self._free_slots.append(node.slot)
        self.by_slot[node.slot] = None
        return node

    def _new_slot(self) -> int:
        slot = self._slots
        self._slots += 1
        self.by_slot.append(None)
        return slot

    def _new_rank(self, node_id: str) -> int:
        """A rank for a newly registered ``node_id`` between its neighbours' in id order;
        every node is renumbered (and every entry rewritten) when they leave no room."""
        ids = self._ids
        ranks = self._ranks
        at = bisect_left(ids, node_id)
        ids.insert(at, node_id)
        low = ranks[ids[at - 1]] if at else 0
        high = ranks[ids[at + 1]] if at + 1 < len(ids) else low + 2 * _RANK_GAP
        if high - low >= 2 and high <= RANK_MASK:
            rank = ranks[node_id] = (low + high) // 2
            return rank
        self._renumber()
        return self._ranks[node_id]

    def _renumber(self) -> None:
        """Spread the ranks evenly again over the ids' order, rewriting every entry (the
        order of the entries of each list is unchanged: ranks keep the ids' order)."""
        gap = max(1, min(_RANK_GAP, RANK_MASK // (len(self._ids) + 1)))
        new_ranks = {node_id: (at + 1) * gap for at, node_id in enumerate(self._ids)}
        self._ranks = new_ranks
        self.by_rank = {}
        book = self._book
        for node in self.nodes.values():
            node.rank = new_ranks[node.id]
            self.by_rank[node.rank] = node
            lib.fi_rank_set(book, node.slot, node.rank)
        for cls in self.classes.values():
            lib.fi_class_rerank(cls.free, book)

    def get(self, node_id: str) -> IndexedNode:
        """The node with ``node_id``, or NotFound."""
        try:
            return self.nodes[node_id]
        except KeyError:
            raise NotFound(f"node {node_id} is not registered") from None

    def _class_for(self, info: NodeInfo) -> NodeClass:
        profile = self.profile_of(info)
        cls = self.classes.get(profile)
        if cls is None:
            cls = self.classes[profile] = NodeClass(profile, info)
            self.epoch += 1
            if cls.place_until is not None:
                self.timed_classes += 1
        return cls

    def _detach(self, node: IndexedNode) -> None:
        """Take ``node`` out of its class entirely (index, counters, members)."""
        cls = node.cls
        self._unindex(node)
        label = self._out_of_index_label(node)
        if label is not None:
            cls.unavailable[label] -= 1
            if not cls.unavailable[label]:
                del cls.unavailable[label]
        del cls.members[node.id]
        self._count_capacity(cls, -1)
        if not cls.members:
            del self.classes[cls.profile]
            self.epoch += 1
            if cls.place_until is not None:
                self.timed_classes -= 1

    def _count_capacity(self, cls: NodeClass, sign: int) -> None:
        """Add (``sign`` 1) or take off (-1) one member of ``cls``'s capacity to the totals."""
        self.total_cores += sign * cls.cap_cores
        self.total_memory += sign * cls.cap_memory
        devices = self.total_devices
        for kind, count in zip(cls.device_kinds, cls.cap_devices, strict=True):
            devices[kind] = devices.get(kind, 0) + sign * count

    def _attach(self, node: IndexedNode) -> None:
        """Put a member of its class into the index or the matching counter (the book told
        the node's class, and for a node out of the index its state now: see
        ``fi_note_node``)."""
        label = self._out_of_index_label(node)
        if label is None:
            self._index(node)
            lib.fi_note_node(self._book, node.slot, node.cls.number, 1, ffi.NULL, 0, 0)
        else:
            node.cls.unavailable[label] += 1
            self._note_outside(node)

    def _note_outside(self, node: IndexedNode) -> None:
        """Tell the book a node out of the index: its class, whether it takes new work,
        its free key and memory as they are now (the replay in C reads them there)."""
        key = [*node.free_devices, node._cores]
        usable = node.unavailable_label is None
        lib.fi_note_node(
            self._book, node.slot, node.cls.number, usable, key, len(key), node._memory
        )

    @staticmethod
    def _out_of_index_label(node: IndexedNode) -> str | None:
        if node.unavailable_label is not None:
            return node.unavailable_label
        if node.exclusive_job is not None:
            return EXCLUSIVE_BUSY
        return None

    # -- the free-capacity index ------------------------------------------------------------

    def _index(self, node: IndexedNode) -> None:
        cls = node.cls
        key = ffi.new("int64_t[]", (*node.free_devices, node._cores))
        jobs = lib.fi_entry_count(self._book, node.slot)
        if lib.fi_put(self._book, node.slot, cls.free, key, node._memory, node.rank, jobs):
            raise MemoryError(f"no memory to index node {node.id}")
        cls.indexed += 1
        node.in_index = True

    def _unindex(self, node: IndexedNode) -> None:
        if not node.in_index:
            return
        # the free cores and memory are the node's own again
        node._cores = node.free_cores
        node._memory = node.free_memory
        lib.fi_drop(self._book, node.slot)
        cls = node.cls
        cls.indexed -= 1
        node.in_index = False

    # -- allocations ----------------------------------------------------------------------

    def add_job(
        self,
        node: IndexedNode,
        job_id: str,
        usage: Usage,
        exclusive: bool,
        core_ids: Sequence[int] = (),
        ports: Sequence[str] = (),
    ) -> int:
        """Deduct ``usage`` from ``node`` for ``job_id`` and re-index the node; the job also
        holds the cores ``core_ids`` (pinned) and the host ``ports`` there. The job's entry
        on the node (which :meth:`release` takes)."""
        self._usage_changes += 1
        cores, memory, devices = usage
        attached = bool(exclusive or core_ids or ports or node.cls.one_job_at_a_time)
        if node.in_index and not attached:
            # most placements: an indexed node stays indexed, under another free key
            entry = self._new_entry(node, job_id, usage, not devices)
            if devices:
                self._shift_devices(node, usage, 1)
                return entry
            # the usual job, without devices: only the free cores (the key's last
            # component) and memory change, and the C index moves the node by that, counting
            # the job (a node running one is not idle) in the same call
            if lib.fi_shift(self._book, node.slot, -memory, -cores, 1):
                self._lost(node)
            return entry
        if node.in_index:
            self._unindex(node)
        else:
            self._detach_counter(node)
        entry = self._new_entry(node, job_id, usage, not (devices or attached))
        self._subtract(node, usage)
        if exclusive or node.cls.one_job_at_a_time:
            # on a one-job-at-a-time node every job keeps the node to itself, as an
            # exclusive one would (its usage stays what it asked for)
            node.exclusive_job = job_id
        if core_ids:
            node.pinned[job_id] = tuple(core_ids)
            node.free_core_ids.difference_update(core_ids)
        for port in ports:
            node.ports[port] = job_id
        self._attach(node)
        return entry

    def release(self, node_id: str, job_id: str, entry: int = -1) -> None:
        """Give ``job_id``'s usage back to the node ``node_id`` and re-index the node;
        nothing when the node is not registered or does not run the job. ``entry``: the
        job's entry there when the caller knows it (else it is found on the node's list)."""
        node = self.nodes.get(node_id)
        if node is None:
            return
        if node.in_index and not node.pinned and not node.ports:
            # most releases: an indexed node runs no exclusive job (it would be out of the
            # index), and without pinned cores or ports only its free key changes
            usage = self._pop_entry(node, job_id, entry)
            if usage is None:
                return
            self._usage_changes += 1
            cores, memory, devices = usage
            if devices:
                self._shift_devices(node, usage, -1)
                return
            # the C index counts the job off: a node left with none joins the idle ones last
            if lib.fi_shift(self._book, node.slot, memory, cores, -1):
                self._lost(node)
        elif entry >= 0 or self._entry_of(node, job_id) >= 0:
            self._usage_changes += 1
            self._remove_attached(node, job_id, entry)

    def release_entry(
        self, entry: int, node_id: str, job_id: str, ends: Any, number: int, end: float, data: bytes
    ) -> None:
        """:meth:`release_listed` of the one-node job whose entry is ``entry`` (as
        :meth:`place` gave it, :attr:`where` ``[3]``): a plain entry (no devices, pinned
        cores, ports or exclusivity) on an indexed node in one C call (``fi_release_entry``:
        the entry forgotten, the end unlisted and the node moved), the others as
        :meth:`release_listed` does. KeyError as there."""
        failed = lib.fi_release_entry(self._book, entry, ends, number, end)
        if failed:
            self.entry_released(failed, entry, node_id, job_id, ends, number, end, data)

    def entry_released(
        self,
        failed: int,
        entry: int,
        node_id: str,
        job_id: str,
        ends: Any,
        number: int,
        end: float,
        data: bytes,
    ) -> None:
        """What :meth:`release_entry` does after ``fi_release_entry`` answered ``failed``
        (not 0): the release by :meth:`release_listed` (1: not a plain entry on an indexed
        node), or the error."""
        if failed == 1:
            self.release_listed(node_id, job_id, ends, number, end, data, entry)
            return
        if -failed & 1:
            self._lost(self.nodes[node_id])
        raise KeyError(job_id)

    def release_listed(
        self,
        node_id: str,
        job_id: str,
        ends: Any,
        number: int,
        end: float,
        data: bytes,
        entry: int = -1,
    ) -> None:
        """:meth:`release` of a job listed in ``ends`` (an ``fi_ends``) under class
        ``number`` with ``end`` (``data``: its id as UTF-8), unlisting it there too: for the
        usual job (no devices, on an indexed node without pinned cores or ports) in one C
        call (``fi_release``). KeyError when the job was not listed so (the node released
        all the same). ``entry`` as :meth:`release`'s."""
        node = self.nodes.get(node_id)
        if node is not None and node.in_index and not node.pinned and not node.ports:
            usage = self._pop_entry(node, job_id, entry)
            if usage is not None and not usage[2]:
                self._usage_changes += 1
                cores, memory, _ = usage
                failed = lib.fi_release(
                    self._book, node.slot, memory, cores, ends, number, end, data, len(data)
                )
                if failed:
                    if -failed & 1:
                        self._lost(node)
                    raise KeyError(job_id)
                return
            if lib.fi_end_remove(ends, number, end, data, len(data)):
                raise KeyError(job_id)
            if usage is not None:
                self._usage_changes += 1
                self._shift_devices(node, usage, -1)
            return
        if lib.fi_end_remove(ends, number, end, data, len(data)):
            raise KeyError(job_id)
        self.release(node_id, job_id, entry)

    def remove_job(self, node: IndexedNode, job_id: str) -> None:
        """Give ``job_id``'s usage back to ``node`` (KeyError when it does not run there) and
        re-index the node."""
        if self._entry_of(node, job_id) < 0:
            raise KeyError(job_id)
        self.release(node.id, job_id)

    def _remove_attached(self, node: IndexedNode, job_id: str, entry: int = -1) -> None:
        """:meth:`release` of a job from a node out of the index, or one whose pinned cores
        or host ports change too: the node leaves wherever it is and comes back."""
        if node.in_index:
            self._unindex(node)
        else:
            self._detach_counter(node)
        usage = self._pop_entry(node, job_id, entry)
        assert usage is not None
        self._subtract(node, usage, sign=-1)
        if node.exclusive_job == job_id:
            node.exclusive_job = None
        core_ids = node.pinned.pop(job_id, None)
        if core_ids:
            node.free_core_ids.update(core_ids)
            node.free_core_ids.intersection_update(node.cls.all_cores)
        if node.ports:
            for port in [port for port, holder in node.ports.items() if holder == job_id]:
                del node.ports[port]
        self._attach(node)

    def _shift_devices(self, node: IndexedNode, usage: Usage, sign: int) -> None:
        """Move an indexed node that stays indexed to the free key it has once ``usage``,
        which holds devices, is deducted (``sign`` 1: a job placed) or given back (-1: one
        released), counting the job on or off, in one C call (``fi_shift_key``). Taking the
        node out of the index and putting it back was two calls, a key array made for the
        second and the Python around them: a release of a GPU job cost twice one without."""
        cores, memory, devices = usage
        kinds = node.cls.device_kinds
        width = len(kinds)
        delta = self._delta
        free_devices = node.free_devices
        if width == 1 and len(devices) == 1 and devices[0][0] == kinds[0]:
            # most such jobs: a GPU node's one kind, without the general case's list
            count = sign * devices[0][1]
            free_devices[0] -= count
            delta[0] = -count
            delta[1] = -sign * cores
        else:
            change = [0] * (width + 1)
            change[width] = -sign * cores
            for kind, count in devices:
                # a kind the node does not have (a reconciled oddity) cannot be accounted
                if kind in kinds:
                    at = kinds.index(kind)
                    free_devices[at] -= sign * count
                    change[at] -= sign * count
            if len(delta) <= width:
                delta = self._delta = ffi.new("int64_t[]", width + 1)
            delta[0 : width + 1] = change
        # the C index moves the free cores and memory with the key
        if lib.fi_shift_key(self._book, node.slot, -sign * memory, delta, sign):
            self._lost(node)

    def taken_whole(
        self, node: IndexedNode, job_id: str, usage: Usage, cores: int, memory: int
    ) -> None:
        """What :meth:`add_job` does in Python for an exclusive job of ``usage`` (the node's
        whole capacity) that ``fi_place_whole`` placed on ``node`` (out of the index now,
        with ``cores`` and ``memory`` free): its free devices, the class's counts, the job
        that holds it."""
        node._cores = cores
        node._memory = memory
        kinds = node.cls.device_kinds
        free_devices = node.free_devices
        for kind, count in usage[2]:
            if kind in kinds:
                free_devices[kinds.index(kind)] -= count
        cls = node.cls
        cls.indexed -= 1
        node.in_index = False
        node.exclusive_job = job_id
        cls.unavailable[EXCLUSIVE_BUSY] += 1

    def given_back_whole(self, node: IndexedNode, usage: Usage, failed: int, job_id: str) -> None:
        """What :meth:`release` does in Python for the job holding ``node`` alone (of
        ``usage`` there) that ``fi_release_whole`` released (answering ``failed``: 0, or
        negative): the class's counts, the node's free devices, back in the index. MemoryError
        when the node could not be put back, KeyError when the job's end was not listed."""
        cls = node.cls
        counter = cls.unavailable
        counter[EXCLUSIVE_BUSY] -= 1
        if not counter[EXCLUSIVE_BUSY]:
            del counter[EXCLUSIVE_BUSY]
        node.exclusive_job = None
        kinds = cls.device_kinds
        free_devices = node.free_devices
        for kind, count in usage[2]:
            if kind in kinds:
                free_devices[kinds.index(kind)] += count
        if -failed & 1:
            # out of the index still, with what it has free now (as _attach would leave it)
            node._cores += usage[0]
            node._memory += usage[1]
            raise MemoryError(f"no memory to index node {node.id}")
        cls.indexed += 1
        node.in_index = True
        if failed:
            raise KeyError(job_id)

    def given_back_devices(self, node: IndexedNode, usage: Usage, failed: int, job_id: str) -> None:
        """What :meth:`release_listed` does in Python for a job of ``usage`` (devices
        among it) on indexed ``node`` that ``fi_release_devices`` released (answering
        ``failed``: 0, or negative): the node's free devices given back. MemoryError when
        the node could not be moved (out of the index now), KeyError when the job's end was
        not listed."""
        kinds = node.cls.device_kinds
        free_devices = node.free_devices
        for kind, count in usage[2]:
            # a kind the node does not have (a reconciled oddity) cannot be accounted
            if kind in kinds:
                free_devices[kinds.index(kind)] += count
        if -failed & 1:
            self._lost(node)
        if failed:
            raise KeyError(job_id)

    def lost(self, slot: int) -> None:
        """The node at ``slot`` could not be moved by a C call for want of memory (it is out
        of the index now): its record brought in line, then MemoryError."""
        self._lost(self.by_slot[slot])  # type: ignore[arg-type]

    def released_nodes(self, failed: int, node_ids: Sequence[str], job_id: str) -> None:
        """What a release by ``fi_release_nodes`` answered ``failed`` (negative) means: a
        node it could not move (out of the index now, its record brought in line) raises
        MemoryError, a job not listed under one of its classes KeyError."""
        if -failed & 1:
            book = self._book
            for node_id in node_ids:
                node = self.nodes.get(node_id)
                if node is not None and node.in_index and not lib.fi_indexed(book, node.slot):
                    self._lost(node)
        raise KeyError(job_id)

    def _lost(self, node: IndexedNode) -> None:
        """A node the C index had no memory to move (it is out of the index now, its free
        cores and memory as the move left them in its record)."""
        book, slot = self._book, node.slot
        node._cores = int(lib.fi_key_at(book, slot, len(node.cls.cap_key) - 1))
        node._memory = int(lib.fi_free_memory(book, slot))
        node.in_index = False
        node.cls.indexed -= 1
        self._note_outside(node)
        raise MemoryError(f"no memory to index node {node.id}")

    def _detach_counter(self, node: IndexedNode) -> None:
        label = self._out_of_index_label(node)
        if label is not None:
            counter = node.cls.unavailable
            counter[label] -= 1
            if not counter[label]:
                del counter[label]

    @staticmethod
    def _subtract(node: IndexedNode, usage: Usage, sign: int = 1) -> None:
        """Deduct (``sign`` 1) or give back (-1) ``usage`` on ``node``, out of the index."""
        cores, memory, devices = usage
        node.free_cores -= sign * cores
        node.free_memory -= sign * memory
        if devices:
            kinds = node.cls.device_kinds
            for kind, count in devices:
                # a kind the node does not have (a reconciled oddity) cannot be accounted
                if kind in kinds:
                    node.free_devices[kinds.index(kind)] -= sign * count

    # -- queries --------------------------------------------------------------------------

    def place(
        self,
        plan: ClassList,
        start: int,
        job_id: str,
        usage: Usage,
        avoid: SlotSet = NO_SLOTS,
        ends: Any = ffi.NULL,
        end: float = 0.0,
        data: bytes | None = None,
        usage_number: int = -1,
    ) -> IndexedNode | None:
        """Place ``job_id``, a one-node job of ``usage``, on the best fit of ``plan``'s
        classes from position ``start`` (the first class with room gives :meth:`first_fit`'s
        node), in one C call that finds and moves the node (its free devices too, for a job
        with devices), counts the job and makes its entry; the node, or None when no class
        has room or the best fit is one of ``avoid``'s nodes (then nothing changed).
        Afterwards ``where[0]`` is the position of the first class from ``start`` with room
        (the plan's length when none) and ``where[3]`` the job's entry (for
        :meth:`release_entry`), which keeps the job's id (``data``: as UTF-8, as
        :meth:`EndsByClass.add <.timeline.EndsByClass.add>` gives it; made from ``job_id``
        when not given) and ``usage`` by its number (``usage_number``, :meth:`usage_number`'s,
        looked up when not given): the placement writes no Python object. With ``ends`` (an
        ``fi_ends``), the same call lists the job there as running until ``end`` on its
        node's class. The caller makes
        sure no class of ``plan`` is annotated PLACE_UNTIL or takes one job at a time (their
        placements take :meth:`add_job`)."""
        cores, memory, _ = usage
        where = self.where
        if data is None:
            data = job_id.encode("utf-8", "surrogatepass")
        if usage_number < 0:
            usage_number = self.usage_number(usage)
        slot = lib.fi_place(
            self._book,
            plan.classes,
            plan.needs,
            plan.count,
            start,
            cores,
            memory,
            avoid.array,
            avoid.count,
            where,
            ends,
            plan.numbers,
            end,
            data,
            len(data),
            usage_number,
        )
        return self.placed(slot, plan, job_id, usage)

    def placed(self, slot: int, plan: ClassList, job_id: str, usage: Usage) -> IndexedNode | None:
        """What :meth:`place` does after its C call (``fi_place``) answered ``slot`` for
        ``job_id`` of ``usage`` over ``plan``: the node, or None (nothing placed); a job
        with devices has them taken off the node's free devices; MemoryError as there. The
        scheduler makes the C call itself and calls this only for a job with devices or
        when the call did not place the job as usual."""
        where = self.where
        devices = usage[2]
        unlisted = slot == -4
        if unlisted:
            slot = where[2]  # placed all the same: the node's bookkeeping below, then raised
        if slot < 0:
            if slot == -3:
                self._usage_changes += 1
                lost = self.by_slot[where[2]]
                assert lost is not None
                # as add_job leaves a node the C index had no memory to move
                self._new_entry(lost, job_id, usage, not devices)
                if devices:
                    self.take_devices(lost, plan.request_keys[where[1]])
                self._lost(lost)
            return None
        node = self.by_slot[slot]
        assert node is not None
        if where[3] < 0:
            # the node moved, but no memory for its entry
            self._new_entry(node, job_id, usage, not devices)
        if devices:
            self.take_devices(node, plan.request_keys[where[1]])
        if unlisted:
            raise MemoryError(f"no memory to list job {job_id}'s end")
        return node

    @staticmethod
    def take_devices(node: IndexedNode, request_key: tuple[int, ...]) -> None:
        """Take a request's device counts (its key's leading components, by the class's
        device kinds) off ``node``'s free devices, as :meth:`place`'s C call took them off
        its free key."""
        free_devices = node.free_devices
        for at in range(len(free_devices)):
            free_devices[at] -= request_key[at]

    def choose(self, plan: ClassList, memory: int, exclusive: bool, room: int) -> list[IndexedNode]:
        """The first ``room`` indexed nodes with room for a request of ``memory`` and
        ``plan``'s request keys, class by class in the plan's order and within a class in
        :meth:`iter_fitting`'s (for an ``exclusive`` one, the class's idle nodes), in one C
        call (``fi_choose``); fewer when there are no more. The caller makes sure no class
        of ``plan`` is annotated PLACE_UNTIL."""
        if len(self._choose_room) < room:
            self._choose_room = ffi.new("int32_t[]", max(room, 2 * len(self._choose_room)))
        out = self._choose_room
        written = lib.fi_choose(
            self._book, plan.classes, plan.needs, plan.count, memory, exclusive, out, room
        )
        by_slot = self.by_slot
        return [by_slot[slot] for slot in ffi.unpack(out, written)]  # type: ignore[misc]

    def slots_of(self, node_ids: Sequence[str]) -> SlotSet:
        """The slots of the registered nodes among ``node_ids``."""
        nodes = self.nodes
        return SlotSet([nodes[node_id].slot for node_id in node_ids if node_id in nodes])

    def _need(self, request_key: tuple[int, ...]) -> Any:
        """``request_key`` as a C array (kept: shapes ask the same few keys again)."""
        need = self._needs.get(request_key)
        if need is None:
            if len(self._needs) >= _NEEDS_BOUND:
                self._needs.clear()
            need = self._needs[request_key] = ffi.new("int64_t[]", request_key)
        return need

    def iter_fitting(
        self, cls: NodeClass, request_key: tuple[int, ...], memory: int, exclusive: bool
    ) -> Iterator[IndexedNode]:
        """The class's indexed nodes with room for the request, best fit first (the order
        of :meth:`first_fit`: free keys in order, least memory first within one).

        For an exclusive request only idle nodes qualify (the class's capacity was checked by
        the caller), and all of them fit equally well. The index must not change while the
        caller walks it.
        """
        if exclusive:
            # no copy of the idle nodes (thousands in a class): the index stays as it is
            yield from self.idle_nodes(cls)
            return
        by_rank = self.by_rank
        need = self._need(request_key)
        # one cursor and buffer for every walk: each batch is copied out before it is
        # yielded, and the cursor is kept here between batches
        cursor, out = self._cursor, self._batch
        cursor[0] = cursor[1] = -1
        # most callers stop at the first node or few: a small batch first, then larger ones
        room = 8
        while True:
            written = lib.fi_fitting(cls.free, need, memory, cursor, out, room)
            ranks = ffi.unpack(out, written)
            resume = (cursor[0], cursor[1])
            for rank in ranks:
                yield by_rank[rank]
            if written < room:
                return
            cursor[0], cursor[1] = resume
            room = _BATCH

    def idle_count(self, cls: NodeClass) -> int:
        """How many of ``cls``'s indexed nodes run nothing."""
        return int(lib.fi_idle_count(cls.free))

    def idle_nodes(self, cls: NodeClass) -> Iterator[IndexedNode]:
        """``cls``'s indexed nodes that run nothing, in the order they became idle. The
        index must not change while the caller walks it."""
        by_slot = self.by_slot
        cursor = ffi.new("int32_t *", -1)
        out = self._slot_batch
        room = 8
        while True:
            written = lib.fi_idle(self._book, cls.free, cursor, out, room)
            # copied out before it is yielded: another walk may reuse the buffer meanwhile
            slots = ffi.unpack(out, written)
            for slot in slots:
                node = by_slot[slot]
                assert node is not None
                yield node
            if written < room:
                return
            room = _BATCH

    def idle_ids(self, cls: NodeClass) -> list[str]:
        """The ids of :meth:`idle_nodes`, in that order, in one C call (a survey of an
        exclusive shape lists a class's idle nodes, thousands of them)."""
        count = lib.fi_idle_count(cls.free)
        if len(self._idle_room) < count:
            self._idle_room = ffi.new("int32_t[]", max(count, 2 * len(self._idle_room)))
        cursor = ffi.new("int32_t *", -1)
        written = lib.fi_idle(self._book, cls.free, cursor, self._idle_room, count)
        slots = ffi.unpack(self._idle_room, written)
        return list(map(_ID, map(self.by_slot.__getitem__, slots)))

    def scan_free(
        self, cls: NodeClass, need_key: tuple[int, ...], memory: int
    ) -> tuple[list[int], list[int], tuple[float, tuple[int, ...], int, int] | None]:
        """One walk over ``cls``'s free keys for a need of ``need_key`` and ``memory`` (a
        survey's): the indexed nodes without room counted under what they lack first (a
        list of counts: one per device kind, then the cores, then the memory), the ranks of
        those with room, and the node closest to having room without it, as ``(score, free
        key, free memory, rank)`` (least score, then least node id; the score sums each
        component's shortfall as a fraction of the need), or None when every node has
        room. See ``fi_scan`` in ``csrc/free_index.h``."""
        width = len(need_key)
        # scratch buffers kept between walks (surveys walk thousands of classes a pass, and
        # three allocations per walk cost more than a small class's walk itself)
        count = lib.fi_class_count(cls.free)
        if len(self._scan_room) < count:
            self._scan_room = ffi.new("int64_t[]", max(count, 2 * len(self._scan_room)))
        if len(self._scan_lacking) < width + 1:
            self._scan_lacking = ffi.new("int64_t[]", width + 1)
            self._scan_closest = ffi.new("int64_t[]", width + 2)
        room, lacking, closest = self._scan_room, self._scan_lacking, self._scan_closest
        score = self._scan_score
        written = lib.fi_scan(cls.free, self._need(need_key), memory, lacking, room, closest, score)
        near = None
        if closest[width + 1] >= 0:
            near = (score[0], tuple(ffi.unpack(closest, width)), closest[width], closest[width + 1])
        return ffi.unpack(lacking, width + 1), ffi.unpack(room, written), near

    def first_fit(
        self, cls: NodeClass, request_key: tuple[int, ...], memory: int
    ) -> IndexedNode | None:
        """The best-fitting indexed node of ``cls`` for a non-exclusive request, or None:
        the first free key in order that covers the request, then the least free memory
        that does there (ties: the least node id). The hot path of placement: one C call."""
        need = self._needs.get(request_key)
        if need is None:
            need = self._need(request_key)
        rank = lib.fi_first_fit(cls.free, need, memory)
        return None if rank < 0 else self.by_rank[rank]


def _seconds(value: str | None) -> float | None:
    """A PLACE_UNTIL annotation's time, or None when absent or not a number (no bound)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) else None
