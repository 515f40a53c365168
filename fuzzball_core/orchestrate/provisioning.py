"""The provisioning loop's decisions: which definition gets a node for waiting work, how a
provisioned node proves it is the instance it claims, and when an instance is deleted.

Everything the loop decides is here, over :class:`InstanceRecord` values and the drivers
(:class:`~fuzzball_core.drivers.Provisioner`); it calls no engine code, so the engine (or a
test) drives it: :meth:`Provisioning.scale_up` with the runs no current node can hold,
:meth:`Provisioning.register` when a node presents a registration token,
:meth:`Provisioning.sweep` with each provisioned node's idle time, and
:meth:`Provisioning.torn_down` once a deprovision hold emptied a node.

The release notes' failures are the rules kept:

- bursts never exceed ``max-nodes``: every CREATING and CREATED instance counts, and one call
  requests at most the room left;
- an instance's name is new (definition id and a random suffix), never an earlier one's;
- a registration token is the instance's own, stored hashed, good for its name only and only
  until the instance is deleted; the cluster's node token is never in user data;
- an instance is deleted exactly once: DELETING is recorded before the driver is called and
  no DELETING or DELETED instance is ever deleted again (so an address reused by a new
  instance is never torn down by an old record);
- an instance that never registered is deleted ``unregistered-grace`` after its deadline;
- a create call whose answer was lost (a timeout, a restart before the driver's id was
  written) is not taken for "nothing was created": the instance stays CREATING (counted
  against ``max-nodes``) until its driver lists it under its name (then it is recorded, and
  deleted like any other) or its deadline and grace passed; a record whose driver id is
  unknown is marked DELETED only once its driver lists no instance of its name;
- the definition's and the instance's annotations are merged into every registration, so a
  restarted Substrate keeps them.

The loop's lock guards the records only: no driver call is made holding it (a cloud call
may take minutes), so a node's registration, and :meth:`Provisioning.holder` (which the
node API calls on Orchestrate's event loop and which takes no lock at all), never wait for
one. A record whose driver call is in flight is *claimed* (``_busy``) by the thread making
it; no other thread calls the driver for it meanwhile, and a delete asked for it then is
finished by that thread.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from fuzzball_core.config import ProvisionerConfig, ProvisionerDefinitionConfig
from fuzzball_core.drivers import (
    CREATE_REFUSALS,
    InstanceSpec,
    Launch,
    NodeBootstrap,
    ProvisionedInstance,
    Provisioner,
)
from fuzzball_core.errors import (
    FailedPrecondition,
    FuzzballError,
    InvalidArgument,
    NotFound,
    Unauthenticated,
)
from fuzzball_core.scheduling import EXCLUSIVE_NODE, PLACE_UNTIL, JobRequest, format_bytes
from fuzzball_core.vocabulary import EventKind, InstanceState

log = logging.getLogger("fuzzball.provisioning")

#: (event kind, message, instance name) -> recorded as a node event by the engine
EventSink = Callable[[EventKind, str, str], None]
#: (node name, reason) -> place a deprovision hold on the node
HoldPlacer = Callable[[str, str], None]


class InstanceStore(Protocol):
    """Where instance records are kept (``provisioning_store.SqlInstanceStore``)."""

    def load(self) -> list[InstanceRecord]:
        """Every record kept."""

    def save(self, record: InstanceRecord) -> None:
        """Keep the record as it is now."""


_LIVE = frozenset({InstanceState.CREATING, InstanceState.CREATED})


def _unfinished(record: InstanceRecord) -> bool:
    """Whether the record may still hold a machine its driver must delete."""
    if record.state is InstanceState.ERROR:
        return bool(record.driver_id)
    return record.state is not InstanceState.DELETED


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _locked(method: _Method) -> _Method:
    """Run the method under the loop's lock: the engine's thread, the sweeper's and the node
    API's registrations all reach the same records."""

    @functools.wraps(method)
    def locked(self: Provisioning, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)

    return cast(_Method, locked)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass
class InstanceRecord:
    """One instance the loop asked for, from request to deletion."""

    id: str
    name: str
    definition_id: str
    requested_at: float
    token_digest: str
    annotations: dict[str, str] = field(default_factory=dict)
    ttl: float | None = None
    state: InstanceState = InstanceState.CREATING
    #: the driver's own id ("" until the driver answered)
    driver_id: str = ""
    detail: str = ""
    registered_at: float | None = None
    deprovision_requested_at: float | None = None
    deleted_at: float | None = None
    #: the runs it was requested for (``workflow why`` names the definition and the time)
    requested_for: list[str] = field(default_factory=list)
    #: (time, event kind, message): the instance's whole history
    history: list[tuple[float, str, str]] = field(default_factory=list)


def spec_of(definition: ProvisionerDefinitionConfig) -> InstanceSpec:
    """The driver's view of a definition."""
    return InstanceSpec(
        definition=definition.id,
        cores=definition.cores,
        memory=definition.memory,
        devices=dict(definition.devices),
        annotations=dict(definition.annotations),
        cost_per_hour=definition.cost_per_hour_estimate,
        driver_config=dict(definition.config),
    )


def rejection(definition: ProvisionerDefinitionConfig, job: JobRequest) -> str | None:
    """Why a node of ``definition`` could never hold ``job`` even when idle; None if it could."""
    need = job.resources
    if need.cores > definition.cores:
        return f"{need.cores} cores asked, its nodes have {definition.cores}"
    if need.memory > definition.memory:
        return (
            f"{format_bytes(need.memory)} memory asked, its nodes have"
            f" {format_bytes(definition.memory)}"
        )
    for kind, count in need.devices.items():
        have = definition.devices.get(kind, 0)
        if count > have:
            return f"{count} {kind} asked, its nodes have {have}"
    for key, value in job.annotations.items():
        if definition.annotations.get(key) != value:
            return f"annotation {key}={value} asked, its nodes do not carry it"
    window = placement_window(definition)
    if window is not None:
        # its nodes carry fuzzball.io/place-until: even a fresh one takes only jobs that end
        # within the ttl less the buffer
        runtime = job.expected_runtime
        if runtime is None:
            return (
                f"no timeout asked, its nodes take only jobs that end within their ttl less"
                f" ttl-buffer ({window:.0f}s)"
            )
        if runtime > window:
            return (
                f"{runtime:.0f}s timeout asked, its nodes take only jobs that end within their"
                f" ttl less ttl-buffer ({window:.0f}s)"
            )
    return None


def placement_window(definition: ProvisionerDefinitionConfig) -> float | None:
    """How long after its request a node of ``definition`` takes work that must have ended
    (its ttl less its ttl-buffer); None when its nodes carry no such bound."""
    if definition.ttl is None or definition.ttl_buffer is None:
        return None
    return definition.ttl - definition.ttl_buffer


class Provisioning:
    """The loop's state and decisions over the configured definitions and their drivers."""

    def __init__(
        self,
        config: ProvisionerConfig,
        drivers: Mapping[str, Provisioner],
        *,
        node_address: str,
        ca_pem: str = "",
        plaintext: bool = False,
        clock: Callable[[], float] = time.time,
        on_event: EventSink | None = None,
        place_hold: HoldPlacer | None = None,
        store: InstanceStore | None = None,
    ) -> None:
        missing = sorted({d.driver for d in config.definitions} - set(drivers))
        if missing:
            raise InvalidArgument(
                f"provisioner.definitions: no provisioner driver named {', '.join(missing)}"
            )
        self.config = config
        self.definitions = {d.id: d for d in config.definitions}
        #: the ids of the definitions the central configuration added (the rest: the file's)
        self.central_ids: frozenset[str] = frozenset()
        self.drivers = dict(drivers)
        for definition in config.definitions:
            self.drivers[definition.driver].check_definition(spec_of(definition))
        self.node_address = node_address
        self.ca_pem = ca_pem
        self.plaintext = plaintext
        self.clock = clock
        self.on_event = on_event
        self.place_hold = place_hold
        self.store = store
        self.lock = threading.RLock()
        #: the records whose driver call (a create or a delete) a thread is making now
        self._busy: set[str] = set()
        self.instances: dict[str, InstanceRecord] = {}
        self._by_name: dict[str, InstanceRecord] = {}
        self._by_digest: dict[str, InstanceRecord] = {}
        for record in store.load() if store is not None else ():
            self._remember(record)

    def _remember(self, record: InstanceRecord) -> None:
        self.instances[record.id] = record
        self._by_name[record.name] = record
        self._by_digest[record.token_digest] = record

    # -- what could hold a job -------------------------------------------------------------

    def rejections(self, job: JobRequest) -> dict[str, str]:
        """Why each definition could never hold ``job``, by definition id (only those that
        could not)."""
        reasons = {}
        for definition in self.definitions.values():
            reason = rejection(definition, job)
            if reason is not None:
                reasons[definition.id] = reason
        return reasons

    def refusal(self, job: JobRequest) -> str | None:
        """The submission's refusal when no definition could hold ``job``: each definition
        and why; None when one could (or there are none: nothing to explain)."""
        if not self.definitions:
            return None
        reasons = self.rejections(job)
        if len(reasons) < len(self.definitions):
            return None
        listed = "; ".join(f"{name}: {why}" for name, why in sorted(reasons.items()))
        return f"no provisioner definition could hold {job.describe()} ({listed})"

    def live(self, definition_id: str) -> int:
        """The definition's instances that exist or are being created."""
        return sum(
            1
            for record in self.instances.values()
            if record.definition_id == definition_id and record.state in _LIVE
        )

    # -- scale up --------------------------------------------------------------------------

    def scale_up(self, waiting: Sequence[JobRequest]) -> list[InstanceRecord]:
        """Request nodes for runs no current node can hold: oldest first, each on the
        cheapest definition that could hold it and has room under its ``max-nodes``. A run
        already waiting for an instance that may still take it asks for no other; one whose
        instance registered with too little of its ttl left for the run's timeout asks
        another definition. Return the new instances."""
        with self.lock:
            planned = self._plan(waiting)
        created = []
        for definition_id, jobs in planned.items():
            # create() checks the room again, under the lock: an admin's create in between
            # is refused here rather than passing max-nodes
            try:
                created.extend(self.create(definition_id, len(jobs), requested_for=jobs))
            except FuzzballError as exc:  # its records say why; the other definitions go on
                log.warning("scaling %s up failed: %s", definition_id, exc.message)
        return created

    def _plan(self, waiting: Sequence[JobRequest]) -> dict[str, list[list[str]]]:
        """Which definitions get how many instances, for which runs (see :meth:`scale_up`)."""
        now = self.clock()
        # runs an instance may still take whatever their timeout (most: one set lookup each),
        # and the registered ttl-bound instances, which take a run only if it ends in time
        covered: set[str] = set()
        bounded: dict[str, list[tuple[InstanceRecord, float]]] = {}
        for record in self.instances.values():
            if record.state not in _LIVE:
                continue
            until = self.place_until(record)
            if record.state is InstanceState.CREATING or until is None:
                covered.update(record.requested_for)
            else:
                for run in set(record.requested_for):
                    bounded.setdefault(run, []).append((record, until))
        planned: dict[str, list[list[str]]] = {}
        for job in sorted(waiting, key=lambda job: (job.submitted_at, job.id)):
            if job.id in covered:
                continue
            spent = self._too_late(job, bounded.get(job.id, ()), now)
            if spent is None:
                continue
            for definition in sorted(
                self.definitions.values(), key=lambda d: (d.cost_per_hour_estimate, d.id)
            ):
                if definition.id in spent or rejection(definition, job) is not None:
                    continue
                batch = planned.setdefault(definition.id, [])
                if len(batch) + job.nodes + self.live(definition.id) > definition.max_nodes:
                    continue
                batch.extend([job.id] for _ in range(job.nodes))  # a node per rank
                break
        return {definition_id: jobs for definition_id, jobs in planned.items() if jobs}

    @staticmethod
    def _too_late(
        job: JobRequest, bounded: Iterable[tuple[InstanceRecord, float]], now: float
    ) -> set[str] | None:
        """For ``job``'s registered ttl-bound instances (each with its place-until time):
        None when one of them may still take it before that time; otherwise the definitions
        of those that came up too late for its timeout. Their nodes are not asked again for
        this job, since each fresh one would come up just as late."""
        spent: set[str] = set()
        runtime = job.expected_runtime
        for record, until in bounded:
            if runtime is not None and now + runtime <= until:
                return None
            spent.add(record.definition_id)
        return spent

    def place_until(self, record: InstanceRecord) -> float | None:
        """When the instance's node stops taking jobs that would still run then (its
        ``fuzzball.io/place-until``); None when it has no such bound."""
        definition = self.definitions.get(record.definition_id)
        if record.ttl is None or definition is None or definition.ttl_buffer is None:
            return None
        return record.requested_at + record.ttl - definition.ttl_buffer

    def create(
        self,
        definition_id: str,
        count: int,
        *,
        annotations: Mapping[str, str] | None = None,
        ttl: float | None = None,
        directives: Mapping[str, str] | None = None,
        requested_for: Sequence[Sequence[str]] = (),
    ) -> list[InstanceRecord]:
        """Ask the definition's driver for ``count`` instances (the admin API's create, and
        scale up's), never past ``max-nodes``. The records are made (and counted) under the
        lock; the driver is called without it."""
        definition = self.definitions.get(definition_id)
        if definition is None:
            raise NotFound(f"provisioner definition {definition_id} does not exist")
        if count < 1:
            raise InvalidArgument(f"count: must be at least 1, got {count}")
        driver = self.drivers[definition.driver]
        # a request the driver refuses whatever its infrastructure says is refused naming
        # the field, and nothing is recorded
        driver.check_request(
            spec_of(definition),
            annotations=dict(annotations or {}),
            directives=dict(directives or {}),
        )
        with self.lock:
            records, launches = self._request(definition, count, annotations, ttl, requested_for)
        claimed = {record.id for record in records}
        error: FuzzballError | None = None
        answers: Sequence[ProvisionedInstance] = ()
        try:
            answers = driver.create(
                spec_of(definition),
                launches,
                annotations=dict(annotations or {}),
                ttl=records[0].ttl,
                directives=dict(directives or {}),
            )
        except FuzzballError as exc:
            error = exc
        except BaseException:
            # no answer at all: the records stay CREATING with no driver id, found by name
            with self.lock:
                self._busy -= claimed
            raise
        with self.lock:
            self._busy -= claimed
            self._answered(records, answers, error)
            # deleted while the driver was creating them: the delete is finished here
            doomed = self._claim([r for r in records if r.state is InstanceState.DELETING])
        self._finish_deletes(doomed)
        if isinstance(error, InvalidArgument):
            raise error  # the request's fault (the cloud refused a parameter): the caller's 400
        return records

    def _request(
        self,
        definition: ProvisionerDefinitionConfig,
        count: int,
        annotations: Mapping[str, str] | None,
        ttl: float | None,
        requested_for: Sequence[Sequence[str]],
    ) -> tuple[list[InstanceRecord], list[Launch]]:
        """Under the lock: ``count`` new records (CREATING, claimed for the create call) and
        their launches, refused when they would pass ``max-nodes``."""
        definition_id = definition.id
        room = definition.max_nodes - self.live(definition_id)
        if count > room:
            raise InvalidArgument(
                f"count: {count} would exceed max-nodes {definition.max_nodes} of"
                f" {definition_id} ({room} more may be created now)"
            )
        now = self.clock()
        records: list[InstanceRecord] = []
        launches: list[Launch] = []
        for index in range(count):
            token = secrets.token_urlsafe(32)
            record = InstanceRecord(
                id=str(uuid.uuid4()),
                name=f"{definition_id}-{uuid.uuid4().hex[:12]}",
                definition_id=definition_id,
                requested_at=now,
                token_digest=_digest(token),
                annotations=dict(annotations or {}),
                ttl=ttl if ttl is not None else definition.ttl,
                requested_for=list(requested_for[index]) if index < len(requested_for) else [],
            )
            bootstrap = NodeBootstrap(
                orchestrate_address=self.node_address,
                node_name=record.name,
                registration_token=token,
                ca_pem=self.ca_pem,
                plaintext=self.plaintext,
            )
            launches.append(Launch(record.name, bootstrap.render()))
            records.append(record)
            self._remember(record)
            self._busy.add(record.id)
            self._event(
                record,
                EventKind.INSTANCE_REQUESTED,
                f"requested from {definition_id}"
                f" (estimated {definition.cost_per_hour_estimate:g} per hour)",
            )
        return records, launches

    def _answered(
        self,
        records: Sequence[InstanceRecord],
        answers: Sequence[ProvisionedInstance],
        error: FuzzballError | None,
    ) -> None:
        """Under the lock: the records as the driver's create answered (or failed)."""
        by_name = {answer.name: answer for answer in answers}
        for record in records:
            answer = by_name.get(record.name)
            if record.state is InstanceState.DELETING:
                # deleted meanwhile: only its id matters (none: looked up by name)
                if answer is not None and answer.instance_id:
                    record.driver_id = answer.instance_id
                    self._save(record)
            elif error is not None:
                if isinstance(error, CREATE_REFUSALS):
                    self._fail(record, error.message)
                else:  # a timeout is not "nothing was created"
                    self._unanswered(record, error.message)
            elif answer is None:
                self._unanswered(record, "the driver gave no answer for it")
            elif answer.state is InstanceState.ERROR:
                record.driver_id = answer.instance_id
                self._fail(record, answer.detail or "the driver failed to create it")
            elif not answer.instance_id:
                self._unanswered(record, answer.detail or "the driver gave no instance id")
            else:
                record.driver_id = answer.instance_id
                self._save(record)

    def _fail(self, record: InstanceRecord, why: str) -> None:
        record.state = InstanceState.ERROR
        record.detail = why
        self._event(record, EventKind.INSTANCE_CREATE_FAILED, f"not created: {why}")

    def _unanswered(self, record: InstanceRecord, why: str) -> None:
        # the instance may exist: it stays CREATING (its room taken, its token good) until its
        # driver lists it by name (reconcile) or it is deleted after its deadline
        record.detail = why
        self._event(
            record,
            EventKind.INSTANCE_CREATE_FAILED,
            f"no answer from the driver ({why}); it may exist: looked for by its name, and"
            " deleted if it never registers",
        )

    # -- registration ----------------------------------------------------------------------

    @_locked
    def authenticate(self, name: str, token: str) -> InstanceRecord:
        """The instance a node registering as ``name`` with ``token`` is; ``Unauthenticated``
        for any other token, another instance's name, or a deleted instance."""
        record = self._by_name.get(name)
        if (
            record is None
            or record.state not in _LIVE
            or not hmac.compare_digest(record.token_digest, _digest(token))
        ):
            raise Unauthenticated("the registration token is not valid for this node")
        return record

    def holder(self, token: str) -> InstanceRecord | None:
        """The live instance whose registration token ``token`` is; None for any other.

        It takes no lock: the node API calls it on Orchestrate's event loop, which must never
        wait for the loop's worker thread. One dictionary read and one state read, each
        atomic, see a record as it was or as it is."""
        record = self._by_digest.get(_digest(token))
        return record if record is not None and record.state in _LIVE else None

    @_locked
    def register(self, name: str, token: str, annotations: Mapping[str, str]) -> dict[str, str]:
        """A node registers (first time, or again after a restart): return the annotations it
        carries: its own, then the definition's, then the instance's."""
        record = self.authenticate(name, token)
        definition = self._definition_of(record)
        if record.state is InstanceState.CREATING:
            record.state = InstanceState.CREATED
            record.registered_at = self.clock()
            waited = record.registered_at - record.requested_at
            self._event(record, EventKind.INSTANCE_REGISTERED, f"registered after {waited:.0f}s")
        merged = {
            **dict(annotations),
            **dict(definition.annotations),
            **record.annotations,
            "fuzzball.provisioner/definition": record.definition_id,
            "fuzzball.provisioner/instance": record.id,
        }
        if definition.exclusive:
            # the default scheduler places one job at a time on such a node
            merged[EXCLUSIVE_NODE] = "true"
        until = self.place_until(record)
        if until is not None:
            # jobs that would still run when the ttl less the buffer comes go elsewhere
            merged[PLACE_UNTIL] = f"{until:.0f}"
        return merged

    @_locked
    def set_central_definitions(
        self,
        definitions: Sequence[ProvisionerDefinitionConfig],
        drivers: Mapping[str, Provisioner],
    ) -> None:
        """Put the central configuration's ``definitions`` in force beside the file's,
        replacing what it held before; their ``drivers`` (by name) are loaded by the caller.

        ``InvalidArgument`` naming a definition whose id the file (or the document twice)
        has, or whose driver refuses it; ``FailedPrecondition`` naming one dropped while it
        still has instances. Nothing changes unless all of them are accepted."""
        seen: set[str] = set()
        for definition in definitions:
            if definition.id in seen:
                raise InvalidArgument(f"provisioner definition {definition.id}: defined twice")
            if definition.id in self.definitions and definition.id not in self.central_ids:
                raise InvalidArgument(
                    f"provisioner definition {definition.id}: already defined in the"
                    " configuration file"
                )
            seen.add(definition.id)
            driver = drivers.get(definition.driver) or self.drivers.get(definition.driver)
            if driver is None:
                raise InvalidArgument(
                    f"provisioner definition {definition.id}: no provisioner driver named"
                    f" {definition.driver}"
                )
            driver.check_definition(spec_of(definition))
        for dropped in sorted(self.central_ids - seen):
            if self._unfinished_of(dropped):
                raise FailedPrecondition(
                    f"provisioner definition {dropped}: still has instances; delete them"
                    " before removing it"
                )
        for name, driver in drivers.items():
            self.drivers.setdefault(name, driver)
        for dropped in self.central_ids - seen:
            del self.definitions[dropped]
        self.definitions.update({d.id: d for d in definitions})
        self.central_ids = frozenset(seen)

    def _unfinished_of(self, definition_id: str) -> list[InstanceRecord]:
        return [r for r in self.records() if r.definition_id == definition_id and _unfinished(r)]

    def check_instances_defined(self) -> None:
        """Refuse to run (``FailedPrecondition``) while an instance not yet deleted belongs
        to a definition neither the file nor the central configuration has any more (its
        driver, and so its deletion, would be unknown), naming each such definition and its
        instances. Orchestrate calls it at start-up, once both are read."""
        orphans = sorted(
            {r.definition_id for r in self.records() if r.definition_id not in self.definitions}
        )
        reasons = []
        for definition_id in orphans:
            left = self._unfinished_of(definition_id)
            if left:
                named = ", ".join(f"{r.name} ({r.state.value})" for r in left)
                reasons.append(
                    f"provisioner definition {definition_id}: removed from the configuration"
                    f" while it still has instances {named}; put it back until they are"
                    " deleted (fuzzball admin provisioner instance delete ID)"
                )
        if reasons:
            raise FailedPrecondition("; ".join(reasons))

    def _definition_of(self, record: InstanceRecord) -> ProvisionerDefinitionConfig:
        definition = self.definitions.get(record.definition_id)
        if definition is None:  # refused at start-up; never a KeyError that ends a round
            raise FailedPrecondition(
                f"provisioner instance {record.name}: its definition {record.definition_id}"
                " is no longer configured"
            )
        return definition

    # -- scale down ------------------------------------------------------------------------

    def sweep(self, idle_since: Mapping[str, float | None], holding: Collection[str] = ()) -> None:
        """Delete what should go: instances that never registered, past their deadline and
        grace; registered ones idle past the definition's timeout or past their ttl (through
        a deprovision hold when a hold placer is set). ``idle_since`` maps each provisioned
        node's name to when it became empty (None: busy). ``holding`` names the nodes
        holding the only copy of node-local persistent volumes: kept past their ttl too
        (they go once their volumes are deleted). Decided under the lock; the driver's
        deletes are made without it."""
        now = self.clock()
        deadline = self.config.registration_deadline + self.config.unregistered_grace
        doomed: list[InstanceRecord] = []
        with self.lock:
            for record in list(self.instances.values()):
                if record.definition_id not in self.definitions or record.id in self._busy:
                    continue  # refused at start-up, or a driver call in flight: not now
                if record.state is InstanceState.DELETING:
                    # a delete that failed (or was cut short by a restart): the same instance
                    # again, which the driver's idempotent delete allows
                    doomed.append(record)
                elif (
                    record.state is InstanceState.CREATING and now - record.requested_at > deadline
                ):
                    self._event(
                        record,
                        EventKind.INSTANCE_NEVER_REGISTERED,
                        f"never registered; deleted {self.config.unregistered_grace:.0f}s after"
                        " its registration deadline",
                    )
                    doomed.append(record)
                elif (
                    record.state is InstanceState.CREATED
                    and record.deprovision_requested_at is None
                ):
                    if record.name in holding:
                        continue  # its volumes' data would go with it
                    why = self._why_down(record, idle_since.get(record.name), now)
                    if why is not None and self._deprovision(record, why):
                        doomed.append(record)
                elif record.state is InstanceState.ERROR and record.driver_id:
                    # the driver made something that failed: it never registers (an ERROR
                    # instance's token is refused), so whatever it is goes now
                    doomed.append(record)
            claimed = self._claim(doomed)
        self._finish_deletes(claimed)

    def _why_down(self, record: InstanceRecord, idle: float | None, now: float) -> str | None:
        definition = self._definition_of(record)
        if record.ttl is not None and now - record.requested_at >= record.ttl:
            return f"its ttl of {record.ttl:.0f}s passed"
        if idle is not None and now - idle >= definition.idle_timeout:
            return f"idle for {now - idle:.0f}s (idle timeout {definition.idle_timeout:.0f}s)"
        return None

    def _deprovision(self, record: InstanceRecord, why: str) -> bool:
        """Under the lock: start taking the node down; whether to delete it now (no hold
        placer: nothing drains it first)."""
        record.deprovision_requested_at = self.clock()
        self._event(record, EventKind.INSTANCE_IDLE, f"deprovisioning: {why}")
        if self.place_hold is None:
            return True
        self.place_hold(record.name, f"provisioner: {why}")
        return False

    def reconcile(self) -> None:
        """Mark DELETED the live instances their drivers no longer have (deleted outside
        Fuzzball, or by ``local down``), so they free their room under ``max-nodes`` and are
        never deleted again; record the driver's id of those whose create call's answer was
        lost, found by their names in the driver's list. A driver that cannot answer now
        leaves them as they are."""
        with self.lock:
            live = [
                r
                for r in self.instances.values()
                if r.state in _LIVE
                and r.definition_id in self.definitions
                and r.id not in self._busy
            ]
        self._look_for([r for r in live if not r.driver_id])
        for record in live:
            if not record.driver_id:
                continue
            driver = self.drivers[self._definition_of(record).driver]
            try:
                seen = driver.describe(record.driver_id)
            except FuzzballError:
                continue
            if seen is None or seen.state is InstanceState.DELETED:
                with self.lock:
                    if record.state in _LIVE and record.id not in self._busy:
                        record.state = InstanceState.DELETED
                        record.deleted_at = self.clock()
                        self._event(
                            record,
                            EventKind.INSTANCE_DELETED,
                            "gone (its driver has no such instance)",
                        )

    def torn_down(self, name: str) -> None:
        """A deprovision hold emptied the node ``name``: delete its instance (once)."""
        with self.lock:
            record = self._by_name.get(name)
            if (
                record is None
                or record.state not in _LIVE
                or record.definition_id not in self.definitions
            ):
                return
            claimed = self._claim([record])
        self._finish_deletes(claimed)

    def delete(self, instance_id: str) -> InstanceRecord:
        """The admin API's delete: the instance goes now (once; a deleted one stays so). One
        whose create call is still in flight is marked DELETING and deleted by that call's
        thread once the driver answered."""
        with self.lock:
            record = self.instances.get(instance_id)
            if record is None:
                raise NotFound(f"provisioner instance {instance_id} does not exist")
            if record.state not in _LIVE and record.state is not InstanceState.ERROR:
                return record
            self._definition_of(record)  # FailedPrecondition naming it, before anything
            claimed = self._claim([record])
        self._finish_deletes(claimed)
        return record

    def _claim(self, records: Sequence[InstanceRecord]) -> list[tuple[InstanceRecord, Provisioner]]:
        """Under the lock: mark each record DELETING (written before any driver call: no
        sweep, and no restart, picks it for anything else) and claim it for this thread's
        delete, with its driver. One whose driver call is in flight in another thread is
        only marked: that thread finishes the delete."""
        claimed = []
        for record in records:
            driver = self.drivers[self._definition_of(record).driver]
            if record.state is not InstanceState.DELETING:
                record.state = InstanceState.DELETING
                self._event(record, EventKind.INSTANCE_DELETING, "deleting")
            if record.id not in self._busy:
                self._busy.add(record.id)
                claimed.append((record, driver))
        return claimed

    def _finish_deletes(self, claimed: Sequence[tuple[InstanceRecord, Provisioner]]) -> None:
        """Without the lock: each claimed record's driver delete (its instance looked up by
        name first when its id is unknown); DELETED once done, left DELETING (the next
        sweep tries again) when the driver failed."""
        for record, driver in claimed:
            try:
                self._finish_delete(record, driver)
            finally:
                with self.lock:
                    self._busy.discard(record.id)

    def _finish_delete(self, record: InstanceRecord, driver: Provisioner) -> None:
        try:
            if not record.driver_id:  # its create call's answer was lost: ask the driver
                found = self._listed(driver).get(record.name)
                with self.lock:
                    self._found(record, found)
            if record.driver_id:
                driver.delete(record.driver_id)
        except FuzzballError as exc:
            with self.lock:
                record.detail = exc.message
                self._event(record, EventKind.INSTANCE_DELETING, f"delete failed: {exc.message}")
            return
        with self.lock:
            record.state = InstanceState.DELETED
            record.deleted_at = self.clock()
            self._event(
                record,
                EventKind.INSTANCE_DELETED,
                "deleted"
                if record.driver_id
                else "deleted: its driver has no instance of its name",
            )

    # -- instances whose create call's answer was lost ----------------------------------------

    @staticmethod
    def _listed(driver: Provisioner) -> dict[str, ProvisionedInstance]:
        """The driver's instances that exist, by the name each was launched under."""
        return {
            found.name: found
            for found in driver.list_instances()
            if found.name and found.instance_id and found.state is not InstanceState.DELETED
        }

    def _look_for(self, records: Sequence[InstanceRecord]) -> None:
        """Record the driver's id of each of ``records`` (its driver's id unknown) that its
        driver lists under its name: one list per driver; one that cannot answer now is
        asked again next round."""
        by_driver: dict[str, list[InstanceRecord]] = {}
        for record in records:
            definition = self.definitions.get(record.definition_id)
            if definition is not None:
                by_driver.setdefault(definition.driver, []).append(record)
        for name, waiting in by_driver.items():
            try:
                listed = self._listed(self.drivers[name])
            except FuzzballError:
                continue
            with self.lock:
                for record in waiting:
                    if (
                        not record.driver_id
                        and record.state in _LIVE
                        and record.id not in self._busy
                    ):
                        self._found(record, listed.get(record.name))

    def _found(self, record: InstanceRecord, instance: ProvisionedInstance | None) -> None:
        if instance is None:
            return
        record.driver_id = instance.instance_id
        self._event(
            record,
            EventKind.INSTANCE_FOUND,
            f"found as {instance.instance_id} by its name (its create call's answer was lost)",
        )

    # -- explaining ------------------------------------------------------------------------

    def waiting_reason(self, run_key: str) -> str | None:
        """``workflow why``'s line for a run waiting on a requested instance; None if none."""
        for record in list(self.instances.values()):  # read on the event loop: a snapshot
            if record.state is InstanceState.CREATING and run_key in record.requested_for:
                at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.requested_at))
                return (
                    f"waiting for a node from definition {record.definition_id}, requested at {at}"
                )
        return None

    def records(self, states: Iterable[InstanceState] | None = None) -> list[InstanceRecord]:
        """The instances, oldest first, optionally only those in ``states``."""
        wanted = set(states) if states is not None else None
        return sorted(
            (r for r in list(self.instances.values()) if wanted is None or r.state in wanted),
            key=lambda r: (r.requested_at, r.name),
        )

    def _save(self, record: InstanceRecord) -> None:
        if self.store is not None:
            self.store.save(record)

    def _event(self, record: InstanceRecord, kind: EventKind, message: str) -> None:
        record.history.append((self.clock(), kind.value, message))
        self._save(record)
        if self.on_event is not None:
            self.on_event(kind, f"instance {record.name}: {message}", record.name)
