"""Why a job was not placed, counted from the node index rather than node by node.

Placement behaves like a Kubernetes filter chain; this module replays that chain over whole
groups at once. Each node is counted under the *first* filter it fails, in this order:

1. ready, then holds: counted per class as nodes leave the index (``not ready``,
   ``held (cordon by admin)``);
2. the class's static profile, once per class: ``annotations mismatch``,
   ``missing device <kind>``, ``device plugin failed``, ``too small (<resource>)``, and for
   a job asking for a CPU layout ``no CPU topology`` or ``too small (<layout>)``;
3. ``running an exclusive job``;
4. free capacity, once per free key of the index: ``not idle (exclusive)``,
   ``insufficient cores``, ``insufficient memory``, ``insufficient <device kind>``;
5. node by node among those with room, for the jobs that ask: ``host port tcp/P in use``,
   ``no free cores for <layout>``;
6. ``reserved for another job`` (:data:`RESERVED`): room that EASY backfill keeps for the
   reservation. The label names no job: one message serves every job of a shape, whatever
   its account, and whose the reservation is is its own account's business (the engine
   names it to a job of the same account: the diagnosis's ``reserved_for``).

The cost is one step per class plus one bisect per free key, whatever the number of nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping
from typing import NamedTuple

from fuzzball_core.scheduling import (
    RESERVED_FOR_ANOTHER_JOB,
    JobRequest,
    JobShape,
    format_bytes,
)
from fuzzball_plugins.schedulers.node_index import (
    EXCLUSIVE_BUSY,
    OUTLASTS_NODE,
    NodeClass,
    NodeIndex,
)

ANNOTATIONS_MISMATCH = "annotations mismatch"
DEVICE_PLUGIN_FAILED = "device plugin failed"
NOT_IDLE = "not idle (exclusive)"
INSUFFICIENT_CORES = "insufficient cores"
INSUFFICIENT_MEMORY = "insufficient memory"
#: the label of the nodes EASY backfill keeps for the reservation
RESERVED = RESERVED_FOR_ANOTHER_JOB
#: how many remembered walks over classes' free keys a Diagnostics keeps before starting over
_WALKS_BOUND = 4096


class Survey(NamedTuple):
    """The filter chain's verdict for one shape over every registered node.

    A named tuple, not a frozen dataclass: a frozen dataclass sets each field through
    ``object.__setattr__``, and a pass makes 20-odd surveys (their construction was 2-4 %
    of the churn run, py-spy)."""

    nodes_considered: int
    nodes_available: int
    groups: Mapping[str, int]
    roomiest_node: str | None
    shortfall: Mapping[str, int] | None
    #: some node has room for the job now and only its annotations turn the job away
    room_without_annotations: bool
    #: some node has room for the job now and only its failed device plugin turns it away
    room_without_device_plugin: bool
    #: for a job no node can ever hold, the one ``resource`` field to blame, if one is
    resource_field: str | None = None

    def message(self, nodes_needed: int) -> str:
        """``0/5000 nodes available: 3000 insufficient memory, ...; roomiest node n17 lacks
        3 cores`` (largest groups first)."""
        head = f"{self.nodes_available}/{self.nodes_considered} nodes available"
        if nodes_needed > 1:
            head += f" (job needs {nodes_needed})"
        ordered = sorted(self.groups.items(), key=lambda item: (-item[1], item[0]))
        text = head + (": " + ", ".join(f"{n} {label}" for label, n in ordered) if ordered else "")
        if self.roomiest_node is not None and self.shortfall:
            text += f"; roomiest node {self.roomiest_node} lacks {describe_amounts(self.shortfall)}"
        return text


def describe_amounts(amounts: Mapping[str, int]) -> str:
    """``3 cores, 2 GiB memory, 1 nvidia.com/gpu`` for a resource -> amount mapping."""
    parts = []
    for name, amount in amounts.items():
        if name == "cores":
            parts.append(f"{amount} core{'' if amount == 1 else 's'}")
        elif name == "memory":
            parts.append(f"{format_bytes(amount)} memory")
        else:
            parts.append(f"{amount} {name}")
    return ", ".join(parts)


def static_label(cls: NodeClass, shape: JobShape) -> tuple[str | None, tuple[int, ...] | None]:
    """The first static filter ``cls`` fails for ``shape`` (None if it passes all), and the
    request as a free key of the class (None when the class lacks a requested device kind)."""
    request_key = cls.request_key(shape)
    if not cls.matches_annotations(shape):
        return ANNOTATIONS_MISMATCH, request_key
    if request_key is None:
        kinds = set(cls.device_kinds)
        missing = next(kind for kind, _ in shape.devices if kind not in kinds)
        return f"missing device {missing}", None
    if shape.devices and cls.device_plugin_failed:
        return DEVICE_PLUGIN_FAILED, request_key
    if shape.cores > cls.cap_cores:
        return "too small (cores)", request_key
    if shape.memory > cls.cap_memory:
        return "too small (memory)", request_key
    for kind, need, have in zip(cls.device_kinds, request_key, cls.cap_devices, strict=False):
        if need > have:
            return f"too small ({kind})", request_key
    return cls.pinning_label(shape), request_key


class Diagnostics:
    """Surveys and feasibility verdicts over one :class:`NodeIndex`, with per-shape caches.

    A shape's static verdict for each class is cached until a class appears or disappears;
    a shape's feasibility until any node is registered, updated or removed.
    """

    def __init__(self, index: NodeIndex) -> None:
        self._index = index
        #: shape -> its survey's steps (see _SurveySteps), for the index's ``version`` below
        self._steps: dict[JobShape, _SurveySteps] = {}
        self._steps_version = -1
        self._feasibility: dict[JobShape, tuple[str, Survey] | None] = {}
        self._feasibility_version = -1
        #: (class, need key, need memory, counting) -> (the class's ``changes`` then, and
        #: what :func:`_scan_free` found: nodes with room, roomiest candidate, counted groups)
        self._walks: dict[tuple, tuple[int, list[str], tuple | None, dict[str, int] | None]] = {}
        #: (class, request key, memory, exclusive) -> the class's ``changes`` then, times two,
        #: plus one when a node had room (an int: no container for the collector to count)
        self._rooms: dict[tuple, int] = {}
        #: the scheduling pass's time, for nodes annotated PLACE_UNTIL
        self.now = 0.0
        #: (the index's ``version`` then, the nodes registered, and what every class's
        #: counter of nodes out of the index holds but ``running an exclusive job``)
        self._base: tuple[int, int, dict[str, int]] = (-1, 0, {})

    def steps(self, shape: JobShape) -> _SurveySteps:
        """What a survey of ``shape`` walks, kept while no node is registered, updated or
        removed (see :class:`_SurveySteps`)."""
        index = self._index
        if self._steps_version != index.version:
            self._steps.clear()
            self._steps_version = index.version
        steps = self._steps.get(shape)
        if steps is None:
            steps = self._steps[shape] = _SurveySteps(index, shape)
        return steps

    def infeasibility(self, job: JobRequest) -> tuple[str, Survey] | None:
        """:func:`infeasibility`, cached per shape while no node changes."""
        if self._feasibility_version != self._index.version:
            self._feasibility.clear()
            self._feasibility_version = self._index.version
        shape = job.shape
        if shape not in self._feasibility:
            self._feasibility[shape] = infeasibility(self._index, job)
        return self._feasibility[shape]

    def survey(
        self,
        shape: JobShape,
        refused_by_reservation: Callable[[str, tuple[int, ...]], bool] | None = None,
        reserved_label: str = "",
        reserved: Collection[str] | None = None,
    ) -> Survey:
        """Count every registered node under the first filter it fails for ``shape``.

        ``refused_by_reservation(node_id, request_key)`` tells whether a node with room is
        kept for the reservation; such nodes are counted as ``reserved_label``. Only nodes
        with room are asked, and only those of ``reserved`` when it is given (the nodes the
        reservation holds: no other can be refused).
        """
        # a plain dict, not a Counter: a Counter's += on a new label calls its Python-level
        # __missing__ (py-spy: the survey's costliest line). It starts as the counts of
        # nodes out of the index for readiness or holds, which only a registration changes
        considered, base = self._unavailable_base()
        groups = dict(base)
        available = 0
        plan = self.steps(shape)
        # the same has_room questions as a walk over every class would ask, in class order,
        # each kind until one class answers yes (the answers do not depend on the order)
        room_without_annotations = False
        for cls, request_key in plan.mismatched:
            if self._has_room(cls, shape, request_key):
                room_without_annotations = True
                break
        room_without_plugin = False
        for cls, request_key in plan.plugin_failed:
            if self._has_room(cls, shape, request_key):
                room_without_plugin = True
                break
        # best (score, node id, free key, free memory, need key, need memory, device kinds)
        roomiest: tuple | None = None
        for cls, label, count, request_key in plan.steps:
            if cls is None:
                # the first class of a static label: the label's nodes of every class at once
                groups[label] = groups.get(label, 0) + count
                continue
            busy = cls.unavailable.get(EXCLUSIVE_BUSY, 0)
            if cls.place_until is not None and cls.outlasted_by(shape, self.now):
                groups[OUTLASTS_NODE] = groups.get(OUTLASTS_NODE, 0) + count
                continue
            if busy:
                groups[EXCLUSIVE_BUSY] = groups.get(EXCLUSIVE_BUSY, 0) + busy
            if shape.exclusive:
                indexed = cls.indexed
                idle = self._index.idle_count(cls)
                if indexed - idle:
                    groups[NOT_IDLE] = groups.get(NOT_IDLE, 0) + indexed - idle
                # an exclusive job needs the whole node: measure against its capacity
                candidate = self._walk(cls, cls.cap_key, cls.cap_memory, False)[1]
                if refused_by_reservation is None or reserved is not None:
                    # counted, not listed: only the reserved nodes can be refused, so those
                    # of them idle here are asked, not each idle node of the class (thousands)
                    kept = 0
                    if refused_by_reservation is not None and reserved is not None:
                        kept = self._refused_idle(
                            cls, reserved, refused_by_reservation, request_key
                        )
                        if kept:
                            groups[reserved_label] = groups.get(reserved_label, 0) + kept
                    available += idle - kept
                    if candidate is not None and (roomiest is None or candidate[:2] < roomiest[:2]):
                        roomiest = candidate
                    continue
                with_room: list[str] = self._index.idle_ids(cls)
            else:
                with_room, candidate, counted = self._walk(cls, request_key, shape.memory, True)
                if counted:
                    # a loop: Counter.update is a Python loop too, with more steps
                    for lacking, number in counted.items():
                        groups[lacking] = groups.get(lacking, 0) + number
                if shape.cpu is not None or shape.host_ports:
                    with_room = self._admitted(with_room, shape, groups)
            if candidate is not None and (roomiest is None or candidate[:2] < roomiest[:2]):
                roomiest = candidate
            if refused_by_reservation is not None:
                for node_id in with_room:
                    if (reserved is None or node_id in reserved) and refused_by_reservation(
                        node_id, request_key
                    ):
                        groups[reserved_label] = groups.get(reserved_label, 0) + 1
                    else:
                        available += 1
            else:
                available += len(with_room)
        return Survey(
            nodes_considered=considered,
            nodes_available=available,
            groups=groups,
            roomiest_node=roomiest[1] if roomiest else None,
            shortfall=_lacks(*roomiest[2:]) if roomiest else None,
            room_without_annotations=room_without_annotations,
            room_without_device_plugin=room_without_plugin,
        )

    def _refused_idle(
        self,
        cls: NodeClass,
        reserved: Collection[str],
        refused_by_reservation: Callable[[str, tuple[int, ...]], bool],
        request_key: tuple[int, ...],
    ) -> int:
        """How many of ``reserved`` are idle nodes of ``cls`` (indexed, nothing running: an
        exclusive job's nodes with room) that the reservation refuses."""
        nodes = self._index.nodes
        kept = 0
        for node_id in reserved:
            node = nodes.get(node_id)
            if (
                node is not None
                and node.cls is cls
                and node.in_index
                and not node.job_count()
                and refused_by_reservation(node_id, request_key)
            ):
                kept += 1
        return kept

    def _unavailable_base(self) -> tuple[int, dict[str, int]]:
        """Every registered node's count, and every class's nodes out of the index for
        readiness or holds counted by label: a survey counts them whatever the shape, and
        they change only when a node is registered, updated or removed (a job changes only
        the ``running an exclusive job`` counter). Once per index version, not per class in
        each of a pass's 20-odd surveys."""
        version, considered, groups = self._base
        if version != self._index.version:
            considered = 0
            groups = {}
            for cls in self._index.classes.values():
                considered += len(cls.members)
                for reason, count in cls.unavailable.items():
                    if reason != EXCLUSIVE_BUSY:
                        groups[reason] = groups.get(reason, 0) + count
            self._base = (self._index.version, considered, groups)
        return considered, groups

    def _admitted(self, node_ids: list[str], shape: JobShape, groups: dict[str, int]) -> list[str]:
        """The nodes of ``node_ids`` (with room by count) that would take ``shape``; the others
        are counted under why not (a host port in use, no layout of free cores)."""
        nodes = self._index.nodes
        admitted = []
        for node_id in node_ids:
            refusal = nodes[node_id].refusal(shape)
            if refusal is None:
                admitted.append(node_id)
            else:
                groups[refusal] = groups.get(refusal, 0) + 1
        return admitted

    def _walk(
        self, cls: NodeClass, need_key: tuple[int, ...], need_memory: int, counting: bool
    ) -> tuple[list[str], tuple | None, dict[str, int] | None]:
        """:func:`_scan_free` of ``cls`` (counting the nodes without room in a mapping of
        their own when ``counting``), remembered while the class's index stays as it was.

        The surveys of one pass read an index nothing changes in between, and shapes that
        differ only by annotations ask the same walk of a class; a class no job was placed on
        or released from since the last pass answers that pass's walks again.
        """
        memo_key = (cls, need_key, need_memory, counting)
        memo = self._walks.get(memo_key)
        if memo is not None and memo[0] == cls.changes:
            return memo[1], memo[2], memo[3]
        counted: dict[str, int] | None = {} if counting else None
        with_room, candidate = _scan_free(cls, need_key, need_memory, counted, self._index)
        if len(self._walks) >= _WALKS_BOUND:
            self._walks.clear()
        self._walks[memo_key] = (cls.changes, with_room, candidate, counted)
        return with_room, candidate, counted

    def _has_room(self, cls: NodeClass, shape: JobShape, request_key: tuple[int, ...]) -> bool:
        """True when an indexed node of ``cls`` has room for ``shape`` now, filters aside
        (remembered while the class's index stays as it was, as :meth:`_walk`). An idle node
        of ``cls`` holds the request (the caller asks only of such classes: _SurveySteps)."""
        memo_key = (cls, request_key, shape.memory, shape.exclusive)
        memo = self._rooms.get(memo_key)
        if memo is not None and memo >> 1 == cls.changes:
            return bool(memo & 1)
        if shape.exclusive:
            room = self._index.idle_count(cls) > 0
        else:
            room = self._index.first_fit(cls, request_key, shape.memory) is not None
        if len(self._rooms) >= _WALKS_BOUND:
            self._rooms.clear()
        self._rooms[memo_key] = cls.changes * 2 + room
        return room


class _SurveySteps:
    """What a survey of one shape walks, worked out once per index ``version``.

    A class's nodes that are ready and unheld are either in its index or out of it running
    an exclusive job (``indexed + busy``): that sum changes only when a node is registered,
    updated or removed, and so does each class's static verdict for the shape
    (:func:`static_label`). A class the shape cannot use adds that sum under its static
    label, so the survey adds each such label's total at once, at the place of the label's
    first class (where a walk over every class would first have counted it: the survey's
    groups keep the labels in that order), and steps only through the classes it can use.
    The classes whose annotations or failed device plugin alone turn the shape away are
    listed for the questions ``room_without_annotations`` and ``room_without_device_plugin``.
    """

    __slots__ = ("mismatched", "plugin_failed", "steps")

    def __init__(self, index: NodeIndex, shape: JobShape) -> None:
        #: (class, "", its ready and unheld nodes, request key) for a class the shape may
        #: use; (None, label, that label's nodes in every class, ()) at a static label's
        #: first class
        self.steps: list[tuple[NodeClass | None, str, int, tuple[int, ...]]] = []
        #: the classes that only their annotations, or only their failed device plugin,
        #: keep from the shape, and that could hold it when idle (with its request key)
        self.mismatched: list[tuple[NodeClass, tuple[int, ...]]] = []
        self.plugin_failed: list[tuple[NodeClass, tuple[int, ...]]] = []
        #: the classes the shape may use and the static labels, in class order
        order: list[tuple[NodeClass, int, tuple[int, ...]] | str] = []
        totals: dict[str, int] = {}
        for cls in index.classes.values():
            count = cls.unavailable.get(EXCLUSIVE_BUSY, 0) + cls.indexed
            if not count:
                continue
            label, request_key = static_label(cls, shape)
            if label is None:
                assert request_key is not None
                order.append((cls, count, request_key))
                continue
            if label not in totals:
                totals[label] = 0
                order.append(label)
            totals[label] += count
            # only a class an idle node of which holds the request can have room for it
            # (what Diagnostics._has_room asks first): the others are left out here, once
            if request_key is None or not cls.holds_when_idle(request_key, shape.memory):
                continue
            if label == ANNOTATIONS_MISMATCH:
                self.mismatched.append((cls, request_key))
            elif label == DEVICE_PLUGIN_FAILED:
                self.plugin_failed.append((cls, request_key))
        for item in order:
            if isinstance(item, str):
                self.steps.append((None, item, totals[item], ()))
            else:
                cls, count, request_key = item
                self.steps.append((cls, "", count, request_key))


def _scan_free(
    cls: NodeClass,
    need_key: tuple[int, ...],
    need_memory: int,
    groups: dict[str, int] | None,
    index: NodeIndex,
) -> tuple[list[str], tuple | None]:
    """One walk over a class's free keys (in C: :meth:`NodeIndex.scan_free`): with
    ``groups``, the ids of nodes with room for the need, the other nodes counted under the
    free resource they lack first (cores, then each device kind; memory when that is all, or
    besides a device kind); and the node closest to having room without having it (the
    roomiest candidate)."""
    lacking, ranks, near = index.scan_free(cls, need_key, need_memory)
    kinds = cls.device_kinds
    by_rank = index.by_rank
    with_room: list[str] = []
    if groups is not None:
        with_room = [by_rank[rank].id for rank in ranks]
        for label, count in zip(_lacking_labels(kinds), lacking, strict=True):
            if count:
                groups[label] = groups.get(label, 0) + count
    if near is None:
        return with_room, None
    score, key, memory, rank = near
    return with_room, (score, by_rank[rank].id, key, memory, need_key, need_memory, kinds)


#: device kinds -> the labels of fi_scan's counts of nodes lacking each (see _lacking_labels)
_LACKING_LABELS: dict[tuple[str, ...], tuple[str, ...]] = {}


def _lacking_labels(kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The labels of a survey's counts of nodes without room in a class of device ``kinds``:
    one per kind, then the cores, then the memory (``fi_scan``'s order). Made once per
    tuple of kinds (worded at each walk they were a tenth of it)."""
    labels = _LACKING_LABELS.get(kinds)
    if labels is None:
        labels = _LACKING_LABELS[kinds] = (
            *(f"insufficient {kind}" for kind in kinds),
            INSUFFICIENT_CORES,
            INSUFFICIENT_MEMORY,
        )
    return labels


def _lacks(
    key: tuple[int, ...],
    memory: int,
    need_key: tuple[int, ...],
    need_memory: int,
    kinds: tuple[str, ...],
) -> dict[str, int]:
    """What a node with free ``key`` and ``memory`` lacks of a need: cores, memory, devices."""
    lacks: dict[str, int] = {}
    if key[-1] < need_key[-1]:
        lacks["cores"] = need_key[-1] - key[-1]
    if memory < need_memory:
        lacks["memory"] = need_memory - memory
    for i, kind in enumerate(kinds):
        if key[i] < need_key[i]:
            lacks[kind] = need_key[i] - key[i]
    return lacks


def infeasibility(index: NodeIndex, job: JobRequest) -> tuple[str, Survey] | None:
    """None when enough registered nodes could hold ``job`` when idle, else (message, survey).

    Every registered node counts, held, not-ready and busy ones included.
    """
    shape = job.shape
    groups: Counter[str] = Counter()
    considered = 0
    holding = 0
    #: nodes that would hold the job but for its CPU layout
    unlaid = 0
    matching: list[NodeClass] = []
    for cls in index.classes.values():
        members = len(cls.members)
        considered += members
        label, request_key = static_label(cls, shape)
        if label == DEVICE_PLUGIN_FAILED:
            # a failed plugin is a passing state of the node, not of what was built
            label = _size_label(cls, shape, request_key)
        if label is None:
            holding += members
            continue
        groups[label] += members
        if label != ANNOTATIONS_MISMATCH:
            matching.append(cls)
        if label == cls.pinning_label(shape):
            unlaid += members
    if holding >= shape.nodes:
        return None
    request = job.describe()
    if shape.cpu is not None and holding + unlaid >= shape.nodes:
        return _unlaid(index, job, groups, considered, holding)
    if not index.classes:
        text = f"job needs {request}; no nodes are registered"
        largest = None
    elif not matching:
        wanted = ", ".join(f"{key}={value}" for key, value in shape.annotations)
        text = f"job needs {request}; no node is annotated {wanted}"
        largest = None
    elif holding:
        text = (
            f"job needs {request}; only {holding} node{'' if holding == 1 else 's'} "
            "could hold that much"
        )
        largest = None
    else:
        largest = min(matching, key=lambda cls: _capacity_rank(cls, shape))
        text = f"job needs {request}; the largest node has {largest.describe_capacity()}"
    lacks = _capacity_shortfall(largest, shape) if largest else None
    survey_result = Survey(
        nodes_considered=considered,
        nodes_available=holding,
        groups=dict(groups),
        roomiest_node=next(iter(largest.members)) if largest else None,
        shortfall=lacks,
        room_without_annotations=False,
        room_without_device_plugin=False,
    )
    return text, survey_result


def _size_label(cls: NodeClass, shape: JobShape, request_key: tuple[int, ...] | None) -> str | None:
    if shape.cores > cls.cap_cores:
        return "too small (cores)"
    if shape.memory > cls.cap_memory:
        return "too small (memory)"
    assert request_key is not None
    for kind, need, have in zip(cls.device_kinds, request_key, cls.cap_devices, strict=False):
        if need > have:
            return f"too small ({kind})"
    return cls.pinning_label(shape)


def _unlaid(
    index: NodeIndex, job: JobRequest, groups: Counter[str], considered: int, holding: int
) -> tuple[str, Survey]:
    """The verdict for a job that enough nodes would hold but for its CPU layout: blamed on
    the ``resource.cpu`` field that asked for it."""
    shape = job.shape
    pinning = shape.cpu
    assert pinning is not None
    laid_out = [cls for cls in index.classes.values() if cls.topology]
    if not laid_out:
        why = "no node reports its CPU topology, so none can pin cores"
    else:
        largest = max(laid_out, key=lambda cls: (_socket_count(cls), len(cls.topology)))
        why = f"no node can lay its cores out so (the largest has {_describe_layout(largest)})"
    field = pinning.field
    most_sockets = max((_socket_count(cls) for cls in laid_out), default=0)
    if pinning.sockets is not None and pinning.sockets > most_sockets:
        field = "cpu.sockets"
    survey_result = Survey(
        nodes_considered=considered,
        nodes_available=holding,
        groups=dict(groups),
        roomiest_node=None,
        shortfall=None,
        room_without_annotations=False,
        room_without_device_plugin=False,
        resource_field=field,
    )
    return f"job needs {job.describe()}; {why}", survey_result


def _socket_count(cls: NodeClass) -> int:
    return len({core.socket for core in cls.topology})


def _describe_layout(cls: NodeClass) -> str:
    """``2 sockets, 4 NUMA nodes, 32 cores`` for a class's topology."""
    counts = (
        (_socket_count(cls), "socket"),
        (len({(core.socket, core.numa) for core in cls.topology}), "NUMA node"),
        (len(cls.topology), "core"),
    )
    return ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in counts)


def _capacity_shortfall(cls: NodeClass, shape: JobShape) -> dict[str, int]:
    have_devices = dict(zip(cls.device_kinds, cls.cap_devices, strict=True))
    lacks: dict[str, int] = {}
    if shape.cores > cls.cap_cores:
        lacks["cores"] = shape.cores - cls.cap_cores
    if shape.memory > cls.cap_memory:
        lacks["memory"] = shape.memory - cls.cap_memory
    for kind, need in shape.devices:
        if need > have_devices.get(kind, 0):
            lacks[kind] = need - have_devices.get(kind, 0)
    return lacks


def _capacity_rank(cls: NodeClass, shape: JobShape) -> tuple[int, float, int, int]:
    """Smaller is closer to holding ``shape``: fewer missing device kinds, then smaller
    missing fractions, then bigger nodes."""
    kinds = set(cls.device_kinds)
    missing_kinds = sum(kind not in kinds for kind, _ in shape.devices)
    wanted = {"cores": shape.cores, "memory": shape.memory, **dict(shape.devices)}
    missing = sum(
        amount / max(wanted[name], 1) for name, amount in _capacity_shortfall(cls, shape).items()
    )
    return missing_kinds, missing, -cls.cap_cores, -cls.cap_memory
