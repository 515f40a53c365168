"""Fair share: whose waiting work goes first, from how much of the cluster each account uses.

Strict FIFO lets one account's 5,000-task array hold the whole queue while another account's
small workflows wait behind it. The default scheduler instead orders waiting work the way
Slurm's multifactor priority and Kueue's fair sharing do:

* **Use.** An account's *running share* is the dominant share (as in DRF and Kueue: the
  largest fraction of the cluster's cores, memory or any device kind) of everything it runs
  now; its *recent share* is that running share averaged over the past with exponentially
  decaying weight (``half_life``: use that long ago counts half), sampled at each scheduling
  pass. Its use is the sum of the two, so a burst counts at once and keeps counting for a
  while after it ends.
* **Shares.** Each account has ``shares`` (default 1) within its organization, and each
  organization ``organization_shares`` (default 1). Among the accounts with work running or
  waiting, an account's normalized share is its organization's part of all active
  organizations' shares times its part of its organization's active accounts' shares (Slurm's
  normalized shares), so organizations are balanced first and accounts within them.
* **Order.** The fair-share factor is ``2 ** (-use / normalized share)`` (Slurm's classic
  formula: 1 for an account that uses nothing, 0.5 for one using exactly its share). A
  waiting job's score is ``weights.fair_share * factor + weights.age * age factor`` (age factor:
  time waited over ``max_age``, at most 1). The queue takes, again and again, the best job of
  the account whose best job scores highest: a job's own ``priority`` first, then the score,
  then earlier submission, then id. An account's factor is computed again after each of its
  jobs is placed, so within one pass the accounts take turns as their use grows.

Placement itself is unchanged: the first job in this order that does not fit holds the EASY
backfill reservation, and later ones backfill around it. A job left waiting while work of
another account submitted after it went first in this order is diagnosed ``FAIR_SHARE``, with
its account's use and share in the message.

What is kept in memory only: the recent shares start over when Orchestrate restarts (the
running shares come back with the running jobs). Organizations are empty until accounts have
them (the identity issue): until then every account is in the one organization ``""``.
"""

from __future__ import annotations

import heapq
import reprlib
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.scheduling import JobRequest
from fuzzball_core.spec.units import MAX_DURATION_SECONDS, parse_duration
from fuzzball_plugins.schedulers.node_index import NodeIndex

#: Where the options live in the configuration file, for error messages.
OPTIONS_PATH = "scheduler.options.fair_share"
#: Slurm's default PriorityDecayHalfLife and PriorityMaxAge: seven days.
DEFAULT_HALF_LIFE = 7 * 24 * 3600.0
DEFAULT_MAX_AGE = 7 * 24 * 3600.0
#: The most shares or weight one option may give (far beyond any sensible ratio).
MOST = 1e6
#: A recent share this small with nothing running is forgotten (it would never matter again).
_NEGLIGIBLE = 1e-9

_QUEUE_ORDER = attrgetter("order_key")

#: What a job holds in all: (cores, memory in bytes, ((device kind, count), ...)).
Charge = tuple[int, int, tuple[tuple[str, int], ...]]


@dataclass(frozen=True)
class FairShareConfig:
    """The ``fair_share`` options of the default scheduler (see the module docstring)."""

    enabled: bool = True
    half_life: float = DEFAULT_HALF_LIFE
    shares: Mapping[str, float] = field(default_factory=dict)
    organization_shares: Mapping[str, float] = field(default_factory=dict)
    fair_share_weight: float = 1.0
    age_weight: float = 0.0
    max_age: float = DEFAULT_MAX_AGE

    @classmethod
    def from_options(cls, value: Any) -> FairShareConfig:
        """Read the ``fair_share`` mapping; InvalidArgument naming the key that is wrong."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise InvalidArgument(f"{OPTIONS_PATH} must be a mapping, got {value!r}")
        known = {
            "enabled",
            "half_life",
            "shares",
            "organization_shares",
            "weights",
            "max_age",
        }
        _refuse_unknown(value, known, OPTIONS_PATH)
        enabled = value.get("enabled", True)
        if not isinstance(enabled, bool):
            raise InvalidArgument(f"{OPTIONS_PATH}.enabled must be true or false, got {enabled!r}")
        weights = value.get("weights")
        if weights is None:
            weights = {}
        if not isinstance(weights, Mapping):
            raise InvalidArgument(f"{OPTIONS_PATH}.weights must be a mapping, got {weights!r}")
        _refuse_unknown(weights, {"fair_share", "age"}, f"{OPTIONS_PATH}.weights")
        fair_share_weight = _number(
            weights.get("fair_share", 1.0), f"{OPTIONS_PATH}.weights.fair_share"
        )
        age_weight = _number(weights.get("age", 0.0), f"{OPTIONS_PATH}.weights.age")
        return cls(
            enabled=enabled,
            half_life=_duration(value.get("half_life", DEFAULT_HALF_LIFE), "half_life"),
            shares=_shares(value.get("shares"), "shares"),
            organization_shares=_shares(value.get("organization_shares"), "organization_shares"),
            fair_share_weight=fair_share_weight,
            age_weight=age_weight,
            max_age=_duration(value.get("max_age", DEFAULT_MAX_AGE), "max_age"),
        )


def _refuse_unknown(value: Mapping[Any, Any], known: set[str], path: str) -> None:
    unknown = sorted(str(key) for key in value if key not in known)
    if unknown:
        raise InvalidArgument(
            f"{path}: unknown option {unknown[0]!r} (accepted: {', '.join(sorted(known))})"
        )


def _number(value: Any, path: str, most: float = MOST) -> float:
    """A number from 0 to ``most``, or InvalidArgument naming ``path``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{path} must be a number, got {reprlib.repr(value)}")
    # bounded, so that no sum of shares or weights overflows into inf and nan
    if not 0 <= value <= most:
        raise InvalidArgument(f"{path} must be from 0 to {most:,.0f}, got {reprlib.repr(value)}")
    return float(value)


def _duration(value: Any, key: str) -> float:
    """Seconds from a number or a Go-style duration (``168h``), more than 0."""
    path = f"{OPTIONS_PATH}.{key}"
    if isinstance(value, str):
        try:
            value = parse_duration(value)
        except ValueError as exc:
            raise InvalidArgument(f"{path}: {value!r} {exc}") from None
    seconds = _number(value, path, MAX_DURATION_SECONDS)
    if seconds <= 0:
        raise InvalidArgument(f"{path} must be more than 0 seconds, got {value!r}")
    return seconds


def _shares(value: Any, key: str) -> Mapping[str, float]:
    """A name -> shares mapping with every value more than 0."""
    path = f"{OPTIONS_PATH}.{key}"
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{path} must map names to shares, got {value!r}")
    shares: dict[str, float] = {}
    for name, amount in value.items():
        if not isinstance(name, str):
            raise InvalidArgument(f"{path}: keys must be names, got {name!r}")
        shares[name] = _number(amount, f"{path}.{name}")
        if shares[name] <= 0:
            raise InvalidArgument(f"{path}.{name} must be more than 0, got {amount!r}")
    return MappingProxyType(shares)


class Held:
    """What one account's running work holds, summed over its jobs and their nodes."""

    __slots__ = ("cores", "devices", "jobs", "memory")

    def __init__(self) -> None:
        self.cores = 0
        self.memory = 0
        self.jobs = 0
        self.devices: dict[str, int] = {}


class Totals:
    """The cluster's capacity in all (every registered node, held ones too)."""

    __slots__ = ("cores", "devices", "memory")

    def __init__(self, index: NodeIndex) -> None:
        self.cores = index.total_cores
        self.memory = index.total_memory
        # a kind every node of which left counts 0, as one no node had (dominant_share)
        self.devices = dict(index.total_devices)

    def dominant_share(self, held: Held) -> float:
        """The largest fraction of the cluster's cores, memory or a device kind ``held`` is."""
        share = held.cores / self.cores if self.cores else 0.0
        if self.memory and held.memory / self.memory > share:
            share = held.memory / self.memory
        for kind, count in held.devices.items():
            total = self.devices.get(kind)
            if total and count / total > share:
                share = count / total
        return share


@dataclass(frozen=True)
class AccountUse:
    """An account's standing at the end of a pass, for messages."""

    account: str
    running: float
    recent: float
    share: float

    def describe(self, half_life: float) -> str:
        """``account A runs 95% of the cluster and ran 12% of it recently (half-life 168h),
        against a fair share of 50%``."""
        who = f"account {self.account}" if self.account else "work without an account"
        return (
            f"{who} runs {_percent(self.running)} of the cluster and ran "
            f"{_percent(self.recent)} of it recently (half-life {_hours(half_life)}), against "
            f"a fair share of {_percent(self.share)}"
        )


def _percent(fraction: float) -> str:
    # small uses keep a decimal, and "0%" never stands for something that counts
    if fraction == 0 or fraction >= 0.1:
        return f"{fraction:.0%}"
    return f"{fraction:.1%}" if fraction >= 0.001 else "under 0.1%"


def _hours(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:g}h" if hours >= 1 else f"{seconds:g}s"


class FairShare:
    """Each account's use, and the fair-share order of a pass's waiting jobs.

    The scheduler tells it what each running job holds (:meth:`charge`, :meth:`refund`) and
    calls :meth:`queue` at the start of each pass and :meth:`finish` at its end.
    """

    def __init__(self, config: FairShareConfig) -> None:
        self.config = config
        #: account -> what its running work holds
        self.running: dict[str, Held] = {}
        #: account -> its organization, as its latest job said
        self.organization: dict[str, str] = {}
        #: account -> recent share (decayed average of its running share)
        self.recent: dict[str, float] = {}
        #: account -> running share when the last pass ended, and when that was
        self._sampled: dict[str, float] = {}
        self._sampled_at: float | None = None
        #: the cluster's totals, the index they were summed from and its version then
        self._totals: tuple[NodeIndex, int, Totals] | None = None

    # -- what runs ------------------------------------------------------------------------

    def charge(self, job: JobRequest, charge: Charge) -> None:
        """``job`` now runs, holding ``charge`` in all."""
        held = self.running.get(job.account)
        if held is None:
            held = self.running[job.account] = Held()
            self.organization[job.account] = job.organization
        cores, memory, devices = charge
        held.cores += cores
        held.memory += memory
        held.jobs += 1
        for kind, count in devices:
            held.devices[kind] = held.devices.get(kind, 0) + count

    def charge_many(self, job: JobRequest, charge: Charge, count: int) -> None:
        """``count`` jobs of ``job``'s account and organization now run, each holding
        ``charge``: :meth:`charge` of each, in one call (the walk in C places runs of them)."""
        held = self.running.get(job.account)
        if held is None:
            held = self.running[job.account] = Held()
            self.organization[job.account] = job.organization
        cores, memory, devices = charge
        held.cores += cores * count
        held.memory += memory * count
        held.jobs += count
        for kind, number in devices:
            held.devices[kind] = held.devices.get(kind, 0) + number * count

    def refund(self, account: str, charge: Charge) -> None:
        """A job of ``account`` that held ``charge`` ended."""
        held = self.running[account]
        if held.jobs == 1:
            del self.running[account]
            return
        cores, memory, devices = charge
        held.cores -= cores
        held.memory -= memory
        held.jobs -= 1
        for kind, count in devices:
            held.devices[kind] -= count

    def describe_wait(self, standing: AccountUse) -> str:
        """The ``FAIR_SHARE`` message: whose use put the job behind whom."""
        return (
            f"waiting for its fair share: {standing.describe(self.config.half_life)}; work of "
            "accounts using less of their share, submitted later, goes first"
        )

    # -- a pass ---------------------------------------------------------------------------

    def queue(
        self,
        pending: Sequence[JobRequest],
        now: float,
        index: NodeIndex,
        *,
        ordered: bool = False,
        accounts: int | None = None,
    ) -> Queue:
        """The pass's waiting jobs in fair-share order (plain queue order when every one is of
        one account, or fair share is off); brings the recent shares up to ``now`` first.

        ``ordered``: ``pending`` is in queue order already (a caller keeping the queue
        sorted between passes); ``accounts``: how many accounts it holds, when known.
        """
        if not self.config.enabled:
            return Queue(_in_order(pending, ordered))
        totals = self.totals(index)
        self._advance(now, totals)
        if not pending:
            return Queue([])
        if accounts is None:
            # a set comprehension: half the cost of all() over a generator for one account
            accounts = len({job.account for job in pending})
        if accounts == 1:
            # one account: nothing to share out, and the pass stays as cheap as FIFO
            return Queue(_in_order(pending, ordered))
        return FairQueue(self, pending, now, totals, ordered)

    def finish(self, now: float, index: NodeIndex) -> None:
        """The pass ended: sample each account's running share for the next pass's average."""
        if not self.config.enabled:
            return
        totals = self.totals(index)
        self._sampled = {
            account: totals.dominant_share(held) for account, held in self.running.items()
        }
        self._sampled_at = now

    def totals(self, index: NodeIndex) -> Totals:
        """The cluster's totals, read again from the index's running sums
        (:attr:`NodeIndex.total_cores` ...) only after a node was registered, updated or
        removed: every pass asks twice (:meth:`queue`, :meth:`finish`)."""
        kept = self._totals
        if kept is not None and kept[0] is index and kept[1] == index.version:
            return kept[2]
        totals = Totals(index)
        self._totals = (index, index.version, totals)
        return totals

    def _advance(self, now: float, totals: Totals) -> None:
        """Fold the time since the last pass into each account's recent share.

        Between passes running work only ends (placements happen in passes), so the running
        share over that time is taken as the mean of the last pass's sample and now's.
        """
        last = self._sampled_at
        if last is None or now <= last:
            return
        kept = 0.5 ** ((now - last) / self.config.half_life)
        sampled = self._sampled
        running = self.running
        recent = self.recent
        for account in set(recent) | set(sampled):
            held = running.get(account)
            current = totals.dominant_share(held) if held is not None else 0.0
            mean = (sampled.get(account, 0.0) + current) / 2
            value = recent.get(account, 0.0) * kept + mean * (1 - kept)
            if value < _NEGLIGIBLE and held is None:
                recent.pop(account, None)
            else:
                recent[account] = value
        self._sampled = {}
        self._sampled_at = now


def _in_order(pending: Sequence[JobRequest], ordered: bool) -> list[JobRequest]:
    """``pending`` in queue order, as a list of the pass's own."""
    return list(pending) if ordered else sorted(pending, key=_QUEUE_ORDER)


class Queue:
    """Waiting jobs in the order a pass considers them; nobody is passed over for fair share.

    :class:`FairQueue` is the fair-share order; this plain one is the single-account and
    fair-share-off case.
    """

    #: whether the pass meets the jobs in another order than the one they were given in
    reorders = False

    def __init__(self, jobs: list[JobRequest]) -> None:
        self._jobs = jobs
        #: the ids of the jobs considered after work of other accounts submitted after them,
        #: each with its account (what their diagnoses read of them), but for those passed
        #: over (:meth:`pass_over`)
        self.overtaken: dict[str, str] = {}
        #: (a settled shape's answer, an account) -> the answer of the account's jobs of that
        #: shape passed over after work of other accounts submitted after them: made empty
        #: when first needed, filled in by the pass's diagnoses
        self.passed_over: dict[tuple[Any, str], Any] = {}

    def __iter__(self) -> Iterator[JobRequest]:
        return iter(self._jobs)

    @property
    def in_order(self) -> list[JobRequest] | None:
        """The jobs in the order the pass meets them, as the pass's own list (nothing changes
        it), or None when that order is made as the pass goes (:class:`FairQueue`)."""
        return None if self.reorders else self._jobs

    def standing(self, account: str) -> AccountUse | None:
        """An overtaken job's account's use and share (None: no job was overtaken)."""
        return None

    def pass_over(
        self,
        settled: Mapping[int, Any],
        answers: dict[str, Any],
        new_answer: Callable[[], Any],
    ) -> None:
        """Jobs of the shapes in ``settled`` (``id(shape)`` -> the answer every later job of
        the shape takes, read as each job is met) are answered in ``answers`` by job id, and
        not yielded; those overtaken by ``passed_over``'s answers (each made by
        ``new_answer``). A plain queue yields every job (its pass over the queue copy leaves
        them to the walk in C)."""


class FairQueue(Queue):
    """The fair-share order of one pass (see the module docstring).

    Iterating yields one job at a time; the scheduler places it (or not) before asking for
    the next, so the account's factor is computed again with what it now runs.
    """

    reorders = True

    def __init__(
        self,
        fair: FairShare,
        pending: Sequence[JobRequest],
        now: float,
        totals: Totals,
        ordered: bool = False,
    ) -> None:
        super().__init__([])
        self._fair = fair
        self._now = now
        self._totals = totals
        by_account: dict[str, list[JobRequest]] = {}
        for job in pending:
            jobs = by_account.get(job.account)
            if jobs is None:
                jobs = by_account[job.account] = []
                fair.organization[job.account] = job.organization
            jobs.append(job)
        if not ordered:
            # (each account's jobs of a queue in order are in order: sorting them again was
            # 6 % of a churn run over four accounts)
            for jobs in by_account.values():
                jobs.sort(key=_QUEUE_ORDER)
        self._by_account = by_account
        # sorted: float sums in one order, so equal inputs give equal shares to the last bit
        active = sorted(set(by_account) | set(fair.running))
        self._shares = _normalized_shares(fair.config, active, fair.organization)
        self._settled: Mapping[int, Any] = {}
        self._answers: dict[str, Any] = {}
        self._new_answer: Callable[[], Any] = object

    def pass_over(
        self,
        settled: Mapping[int, Any],
        answers: dict[str, Any],
        new_answer: Callable[[], Any],
    ) -> None:
        self._settled, self._answers, self._new_answer = settled, answers, new_answer

    def use_of(self, account: str) -> tuple[float, float]:
        """``account``'s running share now and its recent share."""
        held = self._fair.running.get(account)
        running = self._totals.dominant_share(held) if held is not None else 0.0
        return running, self._fair.recent.get(account, 0.0)

    def standing(self, account: str) -> AccountUse:
        """``account``'s use and share as they stand now."""
        running, recent = self.use_of(account)
        return AccountUse(account, running, recent, self._shares[account])

    def factor(self, account: str) -> float:
        """``account``'s fair-share factor as it stands now: ``2 ** (-use / share)``."""
        running, recent = self.use_of(account)
        return 2.0 ** (-(running + recent) / self._shares[account])

    def _key(self, job: JobRequest, factor: float) -> tuple[int, float, float, str]:
        """Where ``job``, the best waiting job of an account with fair-share ``factor``,
        stands: smaller goes first."""
        config = self._fair.config
        score = config.fair_share_weight * factor
        if config.age_weight:
            waited = max(self._now - job.submitted_at, 0.0)
            score += config.age_weight * min(waited / config.max_age, 1.0)
        priority, submitted_at, job_id = job.order_key
        return (priority, -score, submitted_at, job_id)

    def _run_key(self, factor: float) -> Callable[[JobRequest], tuple[int, float, float, str]]:
        """:meth:`_key` of a job of an account whose factor is ``factor``, as a key function
        (an account's jobs, in queue order, have ascending keys: an earlier submission has
        waited longer)."""
        if self._fair.config.age_weight:
            return lambda job: self._key(job, factor)
        neg_score = -self._fair.config.fair_share_weight * factor

        def key(job: JobRequest) -> tuple[int, float, float, str]:
            priority, submitted_at, job_id = job.order_key
            return (priority, neg_score, submitted_at, job_id)

        return key

    def __iter__(self) -> Iterator[JobRequest]:
        by_account = self._by_account
        running = self._fair.running
        settled, answers, new_answer = self._settled, self._answers, self._new_answer
        passed_over = self.passed_over
        factors = {account: self.factor(account) for account in by_account}
        heap = [(self._key(jobs[0], factors[a]), a) for a, jobs in by_account.items()]
        heapq.heapify(heap)
        overtaken = self.overtaken
        #: the largest plain queue order key met so far
        latest: tuple[int, float, str] | None = None
        position = dict.fromkeys(by_account, 0)
        while heap:
            _, account = heapq.heappop(heap)
            jobs = by_account[account]
            at = position[account]
            count = len(jobs)
            # The account keeps the turn while its next job goes before the best job of the
            # others: its factor changes only when one of its jobs is placed, so the run of
            # its jobs up to ``stop`` is met without the heap, and those of shapes settled
            # earlier in the pass (most of a pass's jobs) are answered here, not yielded
            # (their step in the pass, the heap's and the overtaken table's were most of a
            # churn run over four accounts).
            run_key = self._run_key(factors[account])
            stop = bisect_right(jobs, heap[0][0], at, count, key=run_key) if heap else count
            # an account's own jobs come in queue order, so only another account's later
            # work can have been met first: the jobs before ``cut``
            cut = at if latest is None else bisect_left(jobs, latest, at, stop, key=_QUEUE_ORDER)
            # the last settled answer passed over, and the account's answer for it
            last_same = last_passed = None
            placed = False
            while at < stop:
                job = jobs[at]
                same = settled.get(id(job.shape))
                if same is None:
                    if at < cut:
                        overtaken[job.id] = account
                    held = running.get(account)
                    holding = held.jobs if held is not None else 0
                    yield job
                    at += 1
                    held = running.get(account)
                    if (held.jobs if held is not None else 0) != holding:
                        placed = True
                        break
                    continue
                # answered as the pass answers a settled shape's job, without its step
                if at < cut:
                    if same is not last_same:
                        last_same = same
                        last_passed = passed_over.get((same, account))
                        if last_passed is None:
                            last_passed = passed_over[same, account] = new_answer()
                    answers[job.id] = last_passed
                else:
                    answers[job.id] = same
                at += 1
            if at > cut:
                latest = jobs[at - 1].order_key
            position[account] = at
            if at < count:
                if placed:
                    # the account's use grew, and its factor with it: the heap decides again
                    factors[account] = self.factor(account)
                heapq.heappush(heap, (self._key(jobs[at], factors[account]), account))


def _normalized_shares(
    config: FairShareConfig, accounts: Iterable[str], organization: Mapping[str, str]
) -> dict[str, float]:
    """Each active account's part of the cluster: its organization's part of the active
    organizations' shares times its part of its organization's active accounts' shares."""
    members: dict[str, list[str]] = {}
    for account in accounts:
        members.setdefault(organization.get(account, ""), []).append(account)
    org_shares = config.organization_shares
    shares = config.shares
    org_total = sum(org_shares.get(org, 1.0) for org in members)
    normalized: dict[str, float] = {}
    for org, accounts_of_org in members.items():
        org_part = org_shares.get(org, 1.0) / org_total
        total = sum(shares.get(account, 1.0) for account in accounts_of_org)
        for account in accounts_of_org:
            normalized[account] = org_part * shares.get(account, 1.0) / total
    return normalized
