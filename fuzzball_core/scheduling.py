"""Scheduling data types and the :class:`Scheduler` driver contract.

One module although it is long: it is the whole contract a scheduler plugin implements (its
values, its diagnoses and the driver interface, most of it documentation), and a site writing
a driver should find all of it in one place.

A scheduler driver (entry-point group ``fuzzball.schedulers``, chosen by ``scheduler.driver``)
is the placement core of Orchestrate: it keeps an in-memory picture of every registered node
and of every running allocation, and turns the engine's ready jobs into placements. It does no
I/O: the engine owns the database and the node streams, tells the scheduler what changed
(:meth:`Scheduler.upsert_node`, :meth:`Scheduler.release`, ...), calls
:meth:`Scheduler.schedule` on every scheduling pass, and records what comes back (placements
become assignments; diagnoses become ``workflow why`` and ``scheduling_blocked`` events).

Units used throughout: ``cores`` are whole CPU cores, ``memory`` is bytes, ``devices`` maps a
device kind (``"nvidia.com/gpu"``) to a count, and every time is seconds since the epoch as a
float (``time.time()``), the same clock the engine passes as ``now``.

Two things are placed by identity rather than by count. A job that asks for a CPU layout
(:class:`CpuPinning`: ``resource.cpu.affinity``, ``sockets``, ``threads``) is given particular
cores of a node that reported its :class:`CpuCore` topology, and the placement names the
logical CPUs its cpuset gets (:attr:`Placement.cpus`); no two pinned jobs share a core. A job
or service that listens on host ports (:attr:`JobRequest.host_ports`, ``tcp/8080``) is never
placed on a node where a running job holds one of them.

A multinode job may ask to be kept inside one NVLink domain (:attr:`JobRequest.domain`, a
:class:`DomainPolicy`): nodes report their domain as the annotation :data:`NVLINK_DOMAIN`, and
a driver that honours it places the job inside one domain when one has enough free nodes,
else spreads it (``prefer``, saying why in :attr:`Placement.note`) or leaves it waiting
(``require``, its diagnosis saying why). A driver that ignores it must still accept it.

A pass, as every driver must behave:

1. ``schedule(pending, now)`` considers ``pending`` in the driver's queue order. Within one
   account (:attr:`JobRequest.account`) that is :attr:`JobRequest.order_key`: higher
   ``priority`` first, then earlier ``submitted_at``, then ``id``; across accounts a driver
   may order by fair share (the default driver does: the accounts using least of their share
   of the cluster go first), else it is ``order_key`` throughout (FIFO).
2. A job that fits is placed and its capacity is deducted at once (it is *reserved*); the
   engine either starts it or calls :meth:`Scheduler.release`.
3. A job that does not fit gets a :class:`Diagnosis` saying why, in the shape of the Kubernetes
   scheduling framework's filter reasons ("0/5000 nodes available: 3000 insufficient memory,
   1500 held (cordon by admin), ..."), or that it waits behind other accounts' work for its
   fair share (:attr:`ReasonCode.FAIR_SHARE`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, runtime_checkable

from fuzzball_core.errors import InvalidArgument

__all__ = [
    "NVLINK_DOMAIN",
    "CpuAffinity",
    "CpuCore",
    "CpuPinning",
    "Diagnosis",
    "DomainPolicy",
    "Hold",
    "HoldEffect",
    "HoldSource",
    "JobRequest",
    "JobShape",
    "NodeInfo",
    "NodeUsage",
    "Placement",
    "QueueChanges",
    "ReasonCode",
    "Reservation",
    "Resources",
    "ScheduleResult",
    "Scheduler",
    "format_bytes",
    "format_cpu_list",
    "parse_cpu_list",
]


_NO_DEVICES: Mapping[str, int] = MappingProxyType({})


def format_bytes(size: int) -> str:
    """``size`` bytes in the largest readable binary unit: ``512 GiB``, ``1.5 TiB``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            text = f"{value:.1f}".removesuffix(".0") if unit != "B" else str(int(value))
            return f"{text} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def format_cpu_list(cpus: Sequence[int]) -> str:
    """Logical CPU ids in the kernel's list format (``cpuset.cpus``): ``0-3,8,10-11``."""
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    at = 0
    while at < len(ordered):
        end = at
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        first, last = ordered[at], ordered[end]
        ranges.append(str(first) if first == last else f"{first}-{last}")
        at = end + 1
    return ",".join(ranges)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """The logical CPU ids of a kernel CPU list (``0-3,8``), sorted; InvalidArgument if
    malformed."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, dash, last = part.partition("-")
        try:
            low, high = int(first), int(last if dash else first)
        except ValueError:
            raise InvalidArgument(f"not a CPU list: {text!r}") from None
        if low < 0 or high < low:
            raise InvalidArgument(f"not a CPU list: {text!r}")
        cpus.update(range(low, high + 1))
    return tuple(sorted(cpus))


def _require_count(value: Any, path: str) -> int:
    """``value`` as a non-negative int, or InvalidArgument naming ``path``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{path} must be a non-negative integer, got {value!r}")
    return value


def _frozen_str_mapping(value: Mapping[str, str] | None, path: str) -> Mapping[str, str]:
    """A read-only copy of a str -> str mapping, or InvalidArgument naming ``path``."""
    items = dict(value or {})
    if not items:
        # one shared empty mapping: most jobs and nodes carry no annotations
        return _NO_STRINGS
    for key, item in items.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise InvalidArgument(f"{path} must map strings to strings, got {key!r}: {item!r}")
    return MappingProxyType(dict(sorted(items.items())))


_NO_STRINGS: Mapping[str, str] = MappingProxyType({})


# ---------------------------------------------------------------------------------------------
# Resources, nodes and holds
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, slots=True)
class Resources:
    """An amount of node capacity: whole ``cores``, ``memory`` in bytes, and ``devices``.

    ``devices`` maps a device kind to a count (``{"nvidia.com/gpu": 2}``); kinds with a count
    of zero are dropped, so ``Resources(1, 0, {"gpu": 0}) == Resources(1, 0)``.
    """

    cores: int = 0
    memory: int = 0
    devices: Mapping[str, int] = field(default_factory=dict)
    #: ``devices`` as sorted ``(kind, count)`` pairs: hashable and cheap to compare.
    device_items: tuple[tuple[str, int], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _require_count(self.cores, "cores")
        _require_count(self.memory, "memory")
        items: list[tuple[str, int]] = []
        for kind, count in dict(self.devices or {}).items():
            if not isinstance(kind, str) or not kind:
                raise InvalidArgument(f"devices keys must be device kinds, got {kind!r}")
            if _require_count(count, f"devices[{kind!r}]"):
                items.append((kind, count))
        items.sort()
        object.__setattr__(self, "device_items", tuple(items))
        # one shared empty mapping for the many amounts without devices
        object.__setattr__(self, "devices", MappingProxyType(dict(items)) if items else _NO_DEVICES)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return (self.cores, self.memory, self.device_items) == (
            other.cores,
            other.memory,
            other.device_items,
        )

    def __hash__(self) -> int:
        return hash((self.cores, self.memory, self.device_items))

    def describe(self) -> str:
        """People's words for this amount: ``64 cores, 512 GiB memory, 2 nvidia.com/gpu``."""
        parts = [
            f"{self.cores} core{'' if self.cores == 1 else 's'}",
            f"{format_bytes(self.memory)} memory",
        ]
        parts.extend(f"{count} {kind}" for kind, count in self.device_items)
        return ", ".join(parts)


class CpuAffinity(StrEnum):
    """How a pinned job's cores relate to the node's layout (``resource.cpu.affinity``)."""

    #: any free cores
    CORE = "core"
    #: all the cores of each socket share from one socket
    SOCKET = "socket"
    #: all the cores of each socket share from one NUMA node of that socket
    NUMA = "numa"


@dataclass(frozen=True, order=True)
class CpuCore:
    """One physical core of a node, as its Substrate reports it.

    ``id`` numbers the node's cores from 0 (unique on the node, unlike the kernel's per-package
    ``core_id``); ``threads`` are its logical CPUs (hardware threads), the ids a cpuset names.
    Cores are ordered (by their fields) so that topologies can be sorted like the rest of a
    node's static profile.
    """

    id: int
    socket: int
    numa: int
    threads: tuple[int, ...]

    def __post_init__(self) -> None:
        for name in ("id", "socket", "numa"):
            _require_count(getattr(self, name), f"core {name}")
        threads = tuple(self.threads)
        if not threads:
            raise InvalidArgument(f"core {self.id} has no logical CPUs")
        for cpu in threads:
            _require_count(cpu, f"core {self.id} threads")
        object.__setattr__(self, "threads", threads)

    def to_dict(self) -> dict[str, Any]:
        """The core as plain JSON values (how Orchestrate stores a node's topology)."""
        return {"id": self.id, "socket": self.socket, "numa": self.numa, "threads": [*self.threads]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CpuCore:
        """The core :meth:`to_dict` wrote; InvalidArgument when a value is missing or wrong."""
        try:
            return cls(data["id"], data["socket"], data["numa"], tuple(data["threads"]))
        except (KeyError, TypeError):
            raise InvalidArgument(f"not a CPU core: {data!r}") from None


@dataclass(frozen=True)
class CpuPinning:
    """A job's request for particular cores (``resource.cpu``: ``affinity``, ``sockets``,
    ``threads``), on top of its count of cores.

    The job's cores come from exactly ``sockets`` sockets (shared out as evenly as the count
    allows), or from one socket when ``affinity`` is SOCKET or NUMA and ``sockets`` is unset,
    or from anywhere for CORE (the default, None: unset); with NUMA each socket's share comes
    from one NUMA node.
    ``threads`` puts every hardware thread of the cores in the job's cpuset, else only the
    first thread of each (the core is the job's all the same).
    """

    affinity: CpuAffinity | None = None
    sockets: int | None = None
    threads: bool = False

    def __post_init__(self) -> None:
        try:
            if self.affinity is not None:
                object.__setattr__(self, "affinity", CpuAffinity(str(self.affinity).lower()))
        except ValueError:
            choices = ", ".join(a.value for a in CpuAffinity)
            raise InvalidArgument(
                f"cpu affinity must be one of {choices}, got {self.affinity!r}"
            ) from None
        if self.sockets is not None and _require_count(self.sockets, "cpu sockets") < 1:
            raise InvalidArgument(f"cpu sockets must be at least 1, got {self.sockets}")
        if not isinstance(self.threads, bool):
            raise InvalidArgument("cpu threads must be a boolean")

    @property
    def socket_count(self) -> int | None:
        """How many sockets the cores must come from, or None for anywhere."""
        if self.sockets is not None:
            return self.sockets
        return 1 if self.affinity in (CpuAffinity.SOCKET, CpuAffinity.NUMA) else None

    @property
    def field(self) -> str:
        """The ``resource`` field that asked for the layout: ``cpu.affinity`` when set, else
        ``cpu.sockets``, else ``cpu.threads``."""
        if self.affinity is not None:
            return "cpu.affinity"
        return "cpu.sockets" if self.sockets is not None else "cpu.threads"

    def describe(self) -> str:
        """People's words: ``numa affinity, 2 sockets, hardware threads``."""
        parts = []
        if self.affinity is not None or not (self.sockets or self.threads):
            parts.append(f"{(self.affinity or CpuAffinity.CORE).value} affinity")
        if self.sockets is not None:
            parts.append(f"{self.sockets} socket{'' if self.sockets == 1 else 's'}")
        if self.threads:
            parts.append("hardware threads")
        return ", ".join(parts)


#: The node annotation naming a node's NVLink domain: the fabric cluster and clique its GPUs
#: share (``<cluster uuid>.<clique id>``), as the NVIDIA device plugin reports it. Nodes of one
#: domain reach each other's GPU memory over NVLink (and, with IMEX channels, share it).
NVLINK_DOMAIN = "nvidia.com/nvlink-domain"

#: The node annotation (value ``"true"``) of a node that runs one job at a time: whatever a
#: job placed there asks for, nothing else is placed on the node until it ends (a provisioner
#: definition's ``exclusive``).
EXCLUSIVE_NODE = "fuzzball.io/exclusive"

#: The node annotation (seconds since the epoch) of a node that must be free by then (a
#: provisioned node's ttl less its definition's ttl-buffer): a job is placed there only when
#: its ``expected_runtime`` ends by that time, never one whose end is unknown.
PLACE_UNTIL = "fuzzball.io/place-until"


class DomainPolicy(StrEnum):
    """How a multinode job is kept inside one NVLink domain (:data:`NVLINK_DOMAIN`):
    ``multinode.nvlink-domain``."""

    #: inside the domain that fits it most tightly when one has enough free nodes; otherwise
    #: across domains (fewest first), and the placement's :attr:`Placement.note` says why
    PREFER = "prefer"
    #: only inside one domain: the job waits until one has enough free nodes (its diagnosis
    #: says so), and is infeasible when no domain has that many nodes at all
    REQUIRE = "require"


class HoldEffect(StrEnum):
    """What a hold does to its node. Every effect stops new work from being placed there."""

    #: No new work; running work continues.
    CORDON = "cordon"
    #: No new work, and the engine takes running work off (requeue or fail with the reason).
    EVICT = "evict"
    #: No new work, and the provisioner tears the node down once it is empty.
    DEPROVISION = "deprovision"


class HoldSource(StrEnum):
    """Who placed a hold, from the caller's identity; ``uncordon`` releases ``admin`` only."""

    ADMIN = "admin"
    MONITORING = "monitoring"
    PROVISIONER = "provisioner"


@dataclass(frozen=True)
class Hold:
    """One reason a node takes no new work, kept alongside the node's status.

    ``effect`` and ``source`` accept their enum or its string value. ``placed_at`` is seconds
    since the epoch.
    """

    effect: HoldEffect
    source: HoldSource
    reason: str = ""
    placed_by: str = ""
    placed_at: float = 0.0

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "effect", HoldEffect(self.effect))
        except ValueError:
            choices = ", ".join(e.value for e in HoldEffect)
            raise InvalidArgument(f"effect must be one of {choices}, got {self.effect!r}") from None
        try:
            object.__setattr__(self, "source", HoldSource(self.source))
        except ValueError:
            choices = ", ".join(s.value for s in HoldSource)
            raise InvalidArgument(f"source must be one of {choices}, got {self.source!r}") from None

    @property
    def label(self) -> str:
        """``cordon by admin``: the words diagnostics group held nodes under."""
        return f"{self.effect.value} by {self.source.value}"


@dataclass(frozen=True)
class NodeInfo:
    """A registered compute node as the scheduler sees it.

    A node takes new work only when it is ``ready`` (its Substrate holds a live lease) and it
    carries no :class:`Hold`. ``device_plugin_failed`` marks a node whose device plugin failed:
    its devices cannot be handed out, though jobs that ask for no devices may still run there.
    ``annotations`` are matched against a job's required annotations by key=value equality.
    ``cpu_topology`` lists the node's cores when its Substrate can pin jobs to them (empty:
    unknown, so no job asking for a CPU layout goes there).
    """

    id: str
    capacity: Resources
    annotations: Mapping[str, str] = field(default_factory=dict)
    holds: tuple[Hold, ...] = ()
    ready: bool = True
    device_plugin_failed: bool = False
    cpu_topology: tuple[CpuCore, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InvalidArgument(f"node id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.capacity, Resources):
            raise InvalidArgument(f"node {self.id}: capacity must be Resources")
        annotations = _frozen_str_mapping(self.annotations, f"node {self.id}: annotations")
        object.__setattr__(self, "annotations", annotations)
        object.__setattr__(self, "holds", tuple(self.holds))
        topology = tuple(self.cpu_topology)
        if any(not isinstance(core, CpuCore) for core in topology):
            raise InvalidArgument(f"node {self.id}: cpu_topology must list CpuCore")
        if [core.id for core in topology] != list(range(len(topology))):
            raise InvalidArgument(f"node {self.id}: cpu_topology must number its cores from 0")
        object.__setattr__(self, "cpu_topology", topology)

    @property
    def takes_new_work(self) -> bool:
        """True when the node is ready and carries no hold."""
        return self.ready and not self.holds

    @property
    def unavailable_label(self) -> str | None:
        """Why the node takes no new work (``not ready``, ``held (cordon by admin)``), or None.

        A node with several holds lists each distinct ``effect by source`` once, sorted.
        """
        if not self.ready:
            return "not ready"
        if self.holds:
            return f"held ({', '.join(sorted({hold.label for hold in self.holds}))})"
        return None


# ---------------------------------------------------------------------------------------------
# Jobs
# ---------------------------------------------------------------------------------------------


class JobShape(NamedTuple):
    """The part of a :class:`JobRequest` that decides where it can run.

    Two jobs with equal shapes are interchangeable to placement, so a scheduler may answer
    (and diagnose) a shape once per pass.
    """

    cores: int
    memory: int
    devices: tuple[tuple[str, int], ...]
    nodes: int
    exclusive: bool
    annotations: tuple[tuple[str, str], ...]
    cpu: CpuPinning | None
    host_ports: tuple[str, ...]
    domain: DomainPolicy | None = None
    #: the job's expected runtime (None: unknown): nodes annotated PLACE_UNTIL weigh it
    runtime: float | None = None


#: One object per distinct shape, so that the jobs of an array share theirs: a scheduler can
#: then tell equal shapes by identity (cheaper than hashing the tuple for every job in every
#: pass), and a million queued jobs hold a few hundred shapes, not a million.
_SHAPES: dict[JobShape, JobShape] = {}
#: How many shapes are kept before starting over (equal shapes made after that are new objects:
#: still equal, just not identical).
_SHAPES_BOUND = 100_000


def _interned(shape: JobShape) -> JobShape:
    """The one object for ``shape`` (see ``_SHAPES``)."""
    if len(_SHAPES) >= _SHAPES_BOUND:
        _SHAPES.clear()
    return _SHAPES.setdefault(shape, shape)


#: the host ports of a job that holds none (see _host_ports)
_NO_PORTS: frozenset[str] = frozenset()


def _host_ports(value: Any, where: str) -> frozenset[str]:
    """``value`` as a set of ``tcp/PORT`` / ``udp/PORT`` strings, or InvalidArgument."""
    if not value:
        # one shared empty set: most jobs hold no host ports, and every set is an object the
        # cyclic collector tracks (``frozenset(())`` makes a new one each time), so a fresh
        # empty one per job was a third of the objects a full collection walked in the
        # scheduler benchmark's churn run
        return _NO_PORTS
    ports = frozenset(value)
    for port in ports:
        protocol, _, number = str(port).partition("/")
        if protocol not in ("tcp", "udp") or not number.isdigit() or not 0 < int(number) < 65536:
            raise InvalidArgument(f"{where}: host ports are tcp/PORT or udp/PORT, got {port!r}")
    return ports


@dataclass(frozen=True, slots=True)
class JobRequest:
    """A ready job (one stage's job, or one task of an array) asking to be placed.

    ``resources`` is needed on *each* of ``nodes`` nodes (a multinode job gets all its nodes at
    once or none). ``exclusive`` asks for whole nodes: each must be idle and nothing else is
    placed on it while the job runs. ``annotations`` must all be present on a node, key=value.
    ``expected_runtime`` (seconds, normally the job's timeout) lets the scheduler predict when
    the job's capacity comes back; None means unknown (never predicted to end). It also keeps
    the job off nodes annotated :data:`PLACE_UNTIL` that must be free before it would end.
    ``cpu`` asks for particular cores laid out as it says (None: any cores, unpinned);
    ``host_ports`` (``tcp/8080``) must be free on each of its nodes, and are held there
    while it runs.
    ``domain`` keeps a multinode job's nodes inside one NVLink domain (see
    :class:`DomainPolicy`; None: any nodes, wherever they are).
    ``account`` is the id of the account that submitted the job and ``organization`` the
    organization that account belongs to (empty until accounts have organizations: the
    identity issue); fair share orders accounts, and organizations above them, by use.
    Neither decides where the job can run, so neither is part of :attr:`shape`.
    """

    id: str
    resources: Resources
    nodes: int = 1
    exclusive: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    submitted_at: float = 0.0
    priority: int = 0
    expected_runtime: float | None = None
    cpu: CpuPinning | None = None
    host_ports: frozenset[str] = frozenset()
    account: str = ""
    organization: str = ""
    domain: DomainPolicy | None = None
    #: Placement-relevant fields as one hashable value.
    shape: JobShape = field(init=False, repr=False, compare=False)
    #: Queue order within an account: higher priority first, then earlier submission, then id.
    order_key: tuple[int, float, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InvalidArgument(f"job id must be a non-empty string, got {self.id!r}")
        where = f"job {self.id}"
        if not isinstance(self.resources, Resources):
            raise InvalidArgument(f"{where}: resources must be Resources")
        if _require_count(self.nodes, f"{where}: nodes") < 1:
            raise InvalidArgument(f"{where}: nodes must be at least 1, got {self.nodes}")
        if not isinstance(self.exclusive, bool):
            raise InvalidArgument(f"{where}: exclusive must be a boolean")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise InvalidArgument(f"{where}: priority must be an integer")
        runtime = self.expected_runtime
        if runtime is not None and (
            isinstance(runtime, bool)
            or not isinstance(runtime, int | float)
            or not runtime >= 0
            or math.isinf(runtime)
        ):
            raise InvalidArgument(
                f"{where}: expected_runtime must be a finite number of seconds or None"
            )
        annotations = _frozen_str_mapping(self.annotations, f"{where}: annotations")
        object.__setattr__(self, "annotations", annotations)
        if self.cpu is not None and not isinstance(self.cpu, CpuPinning):
            raise InvalidArgument(f"{where}: cpu must be CpuPinning or None")
        for name in ("account", "organization"):
            if not isinstance(getattr(self, name), str):
                raise InvalidArgument(f"{where}: {name} must be a string")
        host_ports = _host_ports(self.host_ports, where)
        object.__setattr__(self, "host_ports", host_ports)
        if self.domain is not None:
            try:
                object.__setattr__(self, "domain", DomainPolicy(self.domain))
            except ValueError:
                choices = ", ".join(p.value for p in DomainPolicy)
                raise InvalidArgument(
                    f"{where}: domain must be one of {choices} or None, got {self.domain!r}"
                ) from None
        resources = self.resources
        shape = JobShape(
            resources.cores,
            resources.memory,
            resources.device_items,
            self.nodes,
            self.exclusive,
            tuple(annotations.items()),
            self.cpu,
            tuple(sorted(host_ports)),
            self.domain if self.nodes > 1 else None,
            None if runtime is None else float(runtime),
        )
        object.__setattr__(self, "shape", _interned(shape))
        object.__setattr__(self, "order_key", (-self.priority, float(self.submitted_at), self.id))

    def describe(self) -> str:
        """People's words for the request: ``2 nodes with 64 cores, 512 GiB memory each``."""
        text = self.resources.describe()
        if self.nodes > 1:
            text = f"{self.nodes} nodes with {text} each"
        if self.exclusive:
            text += " (exclusive)" if self.nodes == 1 else " (exclusive nodes)"
        if self.cpu is not None:
            text += f" pinned ({self.cpu.describe()})"
        if self.annotations:
            text += ", on nodes annotated " + ", ".join(
                f"{k}={v}" for k, v in self.annotations.items()
            )
        if self.host_ports:
            text += ", host ports " + ", ".join(sorted(self.host_ports))
        if self.domain is DomainPolicy.REQUIRE and self.nodes > 1:
            text += ", in one NVLink domain"
        return text


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


#: the CPUs of a placement of a job that asked for no CPU layout (shared, read-only)
_NO_CPUS: Mapping[str, tuple[int, ...]] = MappingProxyType({})


class Placement(NamedTuple):
    """A job placed on nodes; its capacity is already deducted when the engine sees it.

    ``cpus`` maps each node of a pinned job to the logical CPUs its cpuset gets there
    (empty for a job that asked for no CPU layout). ``note`` says, in people's words, why
    the job was placed other than it asked when it still could be (a multinode job that
    prefers one NVLink domain spread over several), else it is empty; the engine records it
    with the placement, and ``workflow why`` shows it.

    A named tuple, immutable as a frozen dataclass was, but made in a quarter of the time:
    a frozen dataclass sets each field through ``object.__setattr__``, and a scheduler makes
    one per job it places (1.6 against 0.4 µs, a few per cent of the scheduler benchmark's
    churn run).
    """

    job_id: str
    node_ids: tuple[str, ...]
    cpus: Mapping[str, tuple[int, ...]] = _NO_CPUS
    note: str = ""


@dataclass(frozen=True)
class Reservation:
    """The earliest start the scheduler holds open for the first job that could not start.

    Backfilled jobs never delay it (EASY backfill). ``start`` is None when it depends on a
    running job with no expected end; the nodes are protected all the same.
    """

    job_id: str
    start: float | None
    node_ids: tuple[str, ...]


class ReasonCode(StrEnum):
    """Why a job was not placed; the ``reason`` of a :class:`Diagnosis`."""

    #: No job ahead of it holds a reservation, and too few nodes have room for it now.
    INSUFFICIENT_RESOURCES = "INSUFFICIENT_RESOURCES"
    #: A job ahead of it holds a reservation, and it could not start in the gaps without
    #: delaying that reservation (too few nodes have room, or the ones that do are reserved).
    BACKFILL_NO_FIT = "BACKFILL_NO_FIT"
    #: Nodes with room for it exist, but none carries the requested annotations.
    NODE_ANNOTATIONS_MISMATCH = "NODE_ANNOTATIONS_MISMATCH"
    #: Nodes that would hold it exist, but their device plugin failed.
    DEVICE_PLUGIN_FAILED = "DEVICE_PLUGIN_FAILED"
    #: It waits for its account's fair share: work of accounts that use less of their share
    #: of the cluster, submitted after it, goes first (and too few nodes have room for all).
    FAIR_SHARE = "FAIR_SHARE"
    #: No registered node could hold it even when idle and released from every hold; the
    #: answer of :meth:`Scheduler.check_feasible`, and of a pass for such a job.
    INFEASIBLE = "INFEASIBLE"


#: the label of the nodes a backfill reservation keeps (in a Diagnosis's ``groups`` and
#: message): it names no job, for the message is shown to every account's waiting jobs
RESERVED_FOR_ANOTHER_JOB = "reserved for another job"


@dataclass(frozen=True)
class Diagnosis:
    """Why a job was not placed, aggregated over every registered node.

    ``groups`` counts the nodes passed over by the first reason each failed, in the order
    ready, holds, annotations, device kinds, device plugin, static size, exclusive job
    running, idle (for exclusive jobs), free cores, free memory, free devices, reservation.
    Labels are words: ``not ready``, ``held (cordon by admin)``, ``annotations mismatch``,
    ``missing device nvidia.com/gpu``, ``device plugin failed``, ``too small (memory)``,
    ``running an exclusive job``, ``not idle (exclusive)``, ``insufficient cores``,
    ``insufficient memory``, ``insufficient nvidia.com/gpu``, ``reserved for another job``
    (never naming the job: ``reserved_for`` does, for the engine to name it to its account).
    ``nodes_available`` nodes passed every filter (fewer than the job
    needs), so ``nodes_available + sum(groups.values()) == nodes_considered``.

    ``roomiest_node`` is the node that takes new work and matches the job's annotations and
    device kinds that came closest to fitting; ``shortfall`` is what it lacks (resource name ->
    amount: ``cores``, ``memory`` in bytes, or a device kind). Both are None when no such node
    exists. ``estimated_start`` is the earliest time the job could start as running work ends
    (the reservation's start for the job holding it; a lower bound for the others), or None
    when it cannot be predicted.
    """

    job_id: str
    reason: ReasonCode
    message: str
    nodes_considered: int
    nodes_available: int = 0
    groups: Mapping[str, int] = field(default_factory=dict)
    roomiest_node: str | None = None
    shortfall: Mapping[str, int] | None = None
    estimated_start: float | None = None
    #: for an INFEASIBLE job, the part of its ``resource`` that no node can satisfy when that
    #: is one field of it (``cpu.affinity``, ``cpu.sockets``, ``cpu.threads``), else None
    resource_field: str | None = None
    #: the job holding the backfill reservation that kept nodes from it (the ``reserved for
    #: another job`` nodes), or None; kept out of ``message``, which any account may read
    reserved_for: str | None = None


@dataclass(frozen=True)
class ScheduleResult:
    """What one :meth:`Scheduler.schedule` pass decided.

    ``placements`` are in the order they were made; ``diagnoses`` has one entry per pending
    job that was not placed, keyed by job id (a driver may build each Diagnosis when it is
    first read, from verdicts fixed during the pass); ``reservation`` is the backfill
    reservation this pass protected, if any.
    """

    placements: tuple[Placement, ...] = ()
    diagnoses: Mapping[str, Diagnosis] = field(default_factory=dict)
    reservation: Reservation | None = None


@runtime_checkable
class ReasonsByJob(Protocol):
    """What a pass's ``diagnoses`` may also tell: a job's reason without its Diagnosis.

    Optional: a driver's :attr:`ScheduleResult.diagnoses` mapping that has these methods
    is asked them by the engine, which every pass wants the reason of every waiting job
    (to report a stage's new reason only) and builds a Diagnosis only for a reason not yet
    reported. A mapping without them is read one Diagnosis at a time. The answers must equal
    ``diagnoses[job_id].reason``.
    """

    def reason_of(self, job_id: str) -> ReasonCode:
        """The reason of ``job_id``'s diagnosis in this pass; KeyError for a job the pass
        did not diagnose (placed, or not in its queue)."""

    def reasons_of(self, job_ids: Iterable[str]) -> list[ReasonCode | None]:
        """:meth:`reason_of` of each of ``job_ids``, in their order, None for a job not
        diagnosed: one call for every waiting job of a pass."""


@dataclass(frozen=True)
class NodeUsage:
    """One node's capacity, what running jobs use of it, and whether it takes new work.

    ``free`` can show negative amounts when reconciled allocations over-commit a node (for
    example after it re-registered with less capacity); nothing new is placed there until
    enough is released.
    """

    node_id: str
    capacity: Resources
    used_cores: int
    used_memory: int
    used_devices: Mapping[str, int]
    free_cores: int
    free_memory: int
    free_devices: Mapping[str, int]
    job_ids: tuple[str, ...]
    exclusive_job: str | None
    takes_new_work: bool
    #: logical CPUs pinned jobs hold, by job id
    pinned_cpus: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: host ports running jobs hold (``tcp/8080``), by port
    host_ports: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of_fields(cls, fields: dict[str, Any]) -> NodeUsage:
        """A usage made of ``fields`` (every field, by name) at once: the frozen ``__init__``
        sets each of its 13 through ``object.__setattr__``, 3-4 times the cost, and a node
        list's copy makes one for every node (5,000 nodes: 50 ms of the engine loop's CPU)."""
        usage = object.__new__(cls)
        object.__setattr__(usage, "__dict__", fields)
        return usage


@dataclass(frozen=True)
class QueueChanges:
    """What changed in the engine's queue of waiting jobs since its last pass, for
    :meth:`Scheduler.schedule_changes`.

    ``generation`` counts the engine's passes (each call hands the next number), so a driver
    that missed one (it is new, or a pass in between came through :meth:`Scheduler.schedule`
    or raised) knows its own copy of the queue is stale. ``arrived`` are the jobs that joined
    the queue or were replaced in it (same id, new request); ``departed`` the ids that left
    it other than by being placed (the driver drops the jobs it placed itself); ``size`` is
    how many jobs wait after the changes, a check that the copies agree. ``reset`` says the
    engine lost track (its queue was rebuilt): the driver must read the whole queue.
    """

    generation: int
    arrived: Sequence[JobRequest] = ()
    departed: Collection[str] = ()
    size: int = 0
    reset: bool = False


# ---------------------------------------------------------------------------------------------
# The driver contract
# ---------------------------------------------------------------------------------------------


class Scheduler(ABC):
    """Places ready jobs on nodes. Implementations are ``fuzzball.schedulers`` drivers.

    The loader instantiates the class with the driver's configuration mapping (``{}`` when
    none is given). A driver keeps all state in memory: after a restart the engine replays
    every node with :meth:`upsert_node` and every running job with :meth:`allocate` before the
    first :meth:`schedule`. Calls come from one thread; a driver need not lock.

    Errors are ``fuzzball_core.errors`` types: ``NotFound`` for an unknown node or job id,
    ``AlreadyExists`` for a job allocated twice, ``FailedPrecondition`` for a call the current
    state forbids, ``InvalidArgument`` for a malformed request.
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config: Mapping[str, Any] = config or {}

    @abstractmethod
    def upsert_node(self, node: NodeInfo) -> None:
        """Register ``node`` or replace what is known about it (capacity, holds, readiness...).

        Running allocations on the node are kept; if the new capacity is smaller than what they
        use, the node is over-committed (see :class:`NodeUsage`) rather than anything dropped.
        """

    @abstractmethod
    def remove_node(self, node_id: str) -> None:
        """Forget a node. ``NotFound`` if unknown; ``FailedPrecondition`` (naming the jobs) if
        jobs are still allocated on it: release them first."""

    @abstractmethod
    def allocate(
        self,
        job: JobRequest,
        node_ids: Sequence[str],
        *,
        started_at: float | None = None,
        cpus: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        """Record that ``job`` runs on ``node_ids`` (one per ``job.nodes``), as it is.

        For reconciling running jobs after a restart: holds, readiness and free capacity are
        not checked (reality wins, possibly over-committing a node). ``started_at`` (default:
        unknown, so the job is never predicted to end) with ``job.expected_runtime`` gives the
        expected end used for reservations. ``cpus`` are the logical CPUs a pinned job was
        given on each node (its :attr:`Placement.cpus`); a pinned job without them is given
        cores now. ``NotFound`` for an unknown node,
        ``AlreadyExists`` if the job is already allocated, ``InvalidArgument`` if the number
        of distinct nodes differs from ``job.nodes``.
        """

    @abstractmethod
    def release(self, job_id: str) -> None:
        """Give back everything ``job_id`` holds (it ended, failed, or its placement was not
        used). ``NotFound`` if the job holds nothing."""

    @abstractmethod
    def schedule(self, pending: Sequence[JobRequest], now: float) -> ScheduleResult:
        """Run one scheduling pass over ``pending`` (any order; see the module docstring).

        Each placement's capacity is deducted before the call returns. Every pending job not
        placed has a :class:`Diagnosis`. ``InvalidArgument`` if a pending job is already
        allocated or listed twice. The engine calls it at every pass, with nothing pending
        too, so a driver that keeps a history of what runs (fair share) sees time pass.
        """

    def schedule_changes(
        self,
        changes: QueueChanges,
        pending: Callable[[], Sequence[JobRequest]],
        now: float,
    ) -> ScheduleResult:
        """One scheduling pass, told only what changed in the queue since the last one.

        Optional: the engine calls this instead of :meth:`schedule`, and a driver that keeps
        its own copy of the queue (keyed by job id) patches it with ``changes`` instead of
        reading the whole queue again. ``pending()`` gives the whole queue (any order), for a
        driver without a copy or whose copy is stale (see :class:`QueueChanges`). A pass
        decides exactly what :meth:`schedule` over ``pending()`` would; the jobs it places
        leave the queue. The default reads the whole queue and calls :meth:`schedule`.
        """
        return self.schedule(pending(), now)

    @abstractmethod
    def check_feasible(self, job: JobRequest) -> Diagnosis | None:
        """None when some registered nodes could hold ``job`` if they were idle, else why not.

        Every registered node counts as capacity, held or not ready ones included, so a job is
        rejected at submission only when the cluster as built can never run it. The
        diagnosis (reason ``INFEASIBLE``) names the request and the largest node, e.g. ``job
        needs 64 cores, 512 GiB memory; the largest node has 16 cores, 64 GiB memory``.
        """

    @abstractmethod
    def node_usage(self, node_id: str) -> NodeUsage:
        """What is allocated on ``node_id`` and what is free. ``NotFound`` if unknown."""

    @property
    def usage_version(self) -> int | None:
        """A number that changes whenever what :meth:`node_usage` says of any node may have
        changed (a node upserted or removed, a job allocated, placed or released), for a
        caller that copies every node's usage (Orchestrate's node lists): usages read at the
        same number are still what :meth:`node_usage` would say. Optional: None (the
        default) for a driver that does not count its changes, whose every node is asked
        each time."""
        return None
