"""Failover: work waiting on a member that stops answering goes to another member.

Each turn (:meth:`Failover.turn`, every poll of Federate's loop) asks each member holding
open federated workflows for them, as Federate's own account there, and records the
member's answer on each row: its status and whether a job or service had started. A member
that does not answer is remembered from the first turn it failed. Once it has not answered
for ``federate.failover-grace`` seconds, each of its workflows that

- had not ended at its last answer,
- had no job or service started there at its last answer (work seen started is never moved),
- was never re-routed (at most once per workflow),
- was not asked to stop (a stop asked while its member does not answer is recorded and
  delivered to that member when it answers again, never lost to a re-route), and
- keeps its file (rows from before revision f0003 do not)

is submitted again, unchanged and for its owner, to the best other member the router
chooses. The row keeps Federate's id, so the user's id never changes; it records where the
workflow left, when and why, and the ``workflow_rerouted`` event is told to the
``fuzzball_event`` hooks and listed first among the workflow's events. The id the old member
gave it is kept until that member answers again and is told to stop it there.

Work that had started on a member that does not answer is not re-routed: the workflow view
shows it UNKNOWN with the reason (``service.unknown_view``) until the member answers again.

This is at-most-once only for a member that is down. Federate cannot tell a member that is
down from one that is alive but cannot be reached (a partition, its API down while its
scheduler runs): such a member may start the workflow after its last answer, and the
re-route then runs it twice. Once that member answers again, its copy is stopped, and a copy
found to have started work is said in the re-route's reason ("it ran on both clusters").
Never-twice needs the member to fence itself (start no federated work without Federate's
fresh grant), which members do not do yet: docs/federate-routing.md, Failover.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from fuzzball_core.api.proto_messages import status_of
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import FailedPrecondition, FuzzballError, NotFound, Unavailable
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import TERMINAL_STATUSES, AccountKind, EventKind
from fuzzball_federation.forwarding import acting_for
from fuzzball_federation.members import Member
from fuzzball_federation.models import FederateAccount, FederatedWorkflow

if TYPE_CHECKING:
    from fuzzball_federation.service import FederateService

log = logging.getLogger("fuzzball.federate.failover")

#: Stage kinds whose start means the workflow may have done work on its member.
STARTED_WORK_KINDS = frozenset({pb.STAGE_KIND_JOB, pb.STAGE_KIND_SERVICE})


@dataclass(frozen=True)
class Reroute:
    """One workflow moved: Federate's id, the member it left and the one it went to."""

    workflow_id: str
    from_cluster: str
    to_cluster: str
    reason: str


def work_started(workflow: pb.Workflow) -> bool:
    """Whether any job or service of ``workflow`` has started on its member."""
    return any(
        stage.kind in STARTED_WORK_KINDS
        and (stage.HasField("start_time") or stage.status != pb.STAGE_STATUS_UNSPECIFIED)
        for stage in workflow.jobs
    )


class Failover:
    """Watches the members holding open federated workflows and re-routes unstarted work
    off the ones unreachable for longer than ``grace`` seconds."""

    def __init__(
        self,
        service: FederateService,
        grace: float,
        *,
        registry: PluginRegistry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.service = service
        self.grace = grace
        self.registry = registry
        self.clock = clock
        #: member name -> (when it first failed to answer, why)
        self.unreachable: dict[str, tuple[float, str]] = {}

    def _open_rows(self) -> list[FederatedWorkflow]:
        """Rows whose member has yet to say they ended, rows with a stale copy, and rows
        with a stop still to deliver."""
        ended = [str(status) for status in TERMINAL_STATUSES]
        with self.service.sessions() as session:
            query = select(FederatedWorkflow).where(
                (FederatedWorkflow.last_status.is_(None))
                | (FederatedWorkflow.last_status.not_in(ended))
                | (FederatedWorkflow.stale_remote_id.is_not(None))
                | (FederatedWorkflow.stop_pending.is_(True))
            )
            return list(session.scalars(query))

    def turn(self) -> list[Reroute]:
        """One look at every member holding open work, then the re-routes that are due.
        Blocking (member calls): run it in a worker thread."""
        rows = self._open_rows()
        by_cluster: dict[str, list[FederatedWorkflow]] = {}
        for row in rows:
            by_cluster.setdefault(row.cluster, []).append(row)
            if row.stale_remote_id and row.rerouted_from:
                by_cluster.setdefault(row.rerouted_from, [])
        members = []
        for cluster in by_cluster:
            try:
                members.append(self.service.members.get(cluster))
            except NotFound:
                continue  # left the federation: nothing to ask
        now = self.clock()
        open_ids = {
            cluster: [row.remote_id for row in held if _open(row)]
            for cluster, held in by_cluster.items()
        }
        with acting_for(None):  # Federate's own account asks: no user is acting
            answers = list(self.service._askers.map(lambda m: _ask(m, open_ids[m.name]), members))
        for member, answer in answers:
            if isinstance(answer, Unavailable):
                member.close()  # the next turn reaches it anew
                first, _ = self.unreachable.get(member.name, (now, ""))
                self.unreachable[member.name] = (first, answer.message)
                continue
            self.unreachable.pop(member.name, None)
            if isinstance(answer, FuzzballError):
                # it answers, but refuses: not a failover case (its token, its permissions)
                log.warning("failover could not look at cluster %s: %s", member.name, answer)
                continue
            self._record(answer)
            self._deliver_stops(member.name, rows)
            self._stop_stale(member.name, rows)
        due = []
        for cluster, (since, why) in self.unreachable.items():
            if now - since >= self.grace:
                due += [(row, why) for row in by_cluster.get(cluster, []) if _movable(row)]
        return [moved for row, why in due if (moved := self._reroute(row, why)) is not None]

    def _record(self, answers: dict[str, pb.Workflow | None]) -> None:
        """Keep each workflow's status on the member, and whether its work started."""
        with self.service.sessions() as session, session.begin():
            for remote_id, workflow in answers.items():
                if workflow is None:
                    continue
                for row in session.scalars(
                    select(FederatedWorkflow).where(FederatedWorkflow.remote_id == remote_id)
                ):
                    row.last_status = str(status_of(workflow.status))
                    row.job_started = row.job_started or work_started(workflow)

    def _stop_on(self, cluster: str, remote_id: str, what: str) -> bool:
        """Stop ``remote_id`` on ``cluster`` as Federate's own account; whether it is stopped
        (or not there to stop). ``what`` names it in the log when the stop fails."""
        try:
            with acting_for(None):
                self.service.members.get(cluster).client().stop_workflow(remote_id)
        except (NotFound, FailedPrecondition):
            pass  # never stored there, gone, or already ended: nothing to stop
        except FuzzballError as exc:
            log.warning("stopping %s on cluster %s failed: %s", what, cluster, exc)
            return False
        return True

    def _deliver_stops(self, cluster: str, rows: list[FederatedWorkflow]) -> None:
        """Deliver to ``cluster``, answering again, the stops asked while it did not."""
        for row in rows:
            if row.cluster != cluster or not row.stop_pending:
                continue
            if not self._stop_on(cluster, row.remote_id, f"workflow {row.id}"):
                continue
            with self.service.sessions() as session, session.begin():
                stored = session.get(FederatedWorkflow, row.id)
                if stored is not None and stored.remote_id == row.remote_id:
                    stored.stop_pending = False
            log.info("workflow %s: its recorded stop delivered to cluster %s", row.id, cluster)

    def _stop_stale(self, cluster: str, rows: list[FederatedWorkflow]) -> None:
        """Tell ``cluster``, answering again, to stop the copies of workflows that left it.
        A copy found to have started work there (the member was partitioned, not down) is
        said in the re-route's reason: the workflow then ran on both members."""
        for row in rows:
            if row.rerouted_from != cluster or not row.stale_remote_id:
                continue
            ran = self._stale_copy_ran(cluster, row.stale_remote_id)
            if not self._stop_on(cluster, row.stale_remote_id, f"{row.id}'s stale copy"):
                continue
            with self.service.sessions() as session, session.begin():
                stored = session.get(FederatedWorkflow, row.id)
                if stored is not None:
                    stored.stale_remote_id = None
                    if ran:
                        stored.reroute_reason = f"{stored.reroute_reason}; {ran}"
            if ran:
                log.warning("workflow %s ran on both clusters: %s", row.id, ran)
            log.info("workflow %s: its copy on cluster %s stopped", row.id, cluster)

    def _stale_copy_ran(self, cluster: str, remote_id: str) -> str | None:
        """What the copy ``remote_id`` left on ``cluster`` had done while Federate could not
        see it, when it had started work (None: it had not, or it cannot be read)."""
        try:
            with acting_for(None):
                copy = self.service.members.get(cluster).client().get_workflow(remote_id)
        except FuzzballError:
            return None
        if not work_started(copy):
            return None
        status = status_of(copy.status)
        return (
            f"its copy on cluster {cluster} had started work before it was stopped"
            f" ({status} there): it ran on both clusters"
        )

    def _owner(self, row: FederatedWorkflow) -> Principal:
        """The workflow's owner, as Federate forwards it to the member taking it over."""
        with self.service.sessions() as session:
            account = session.get(FederateAccount, row.account_id)
        if account is None:
            raise NotFound(f"account {row.account_id} of workflow {row.id} no longer exists")
        return Principal(
            account.id,
            account.name,
            account.is_admin,
            AccountKind(account.kind),
            user_id=row.user_id,
            email=row.email,
        )

    def _reroute(self, row: FederatedWorkflow, why: str) -> Reroute | None:
        """Submit ``row``'s file to another member for its owner and move the row there;
        None (and tried again next turn) when no other member takes it."""
        reason = f"cluster {row.cluster} unreachable for over {self.grace:g}s ({why})"
        if self._stop_asked(row.id):
            return None  # asked to stop since this turn read it: it stays, its stop recorded
        try:
            owner = self._owner(row)
            parsed, raw = self.service._parse(row.specification, None, row.name)
            cluster, remote_id = self.service.submit(
                owner, parsed, raw, row.name, avoid=row.cluster
            )
        except FuzzballError as exc:
            log.warning("workflow %s could not be re-routed: %s", row.id, exc.message)
            return None
        now = self.clock()
        with self.service.sessions() as session, session.begin():
            stored = session.get(FederatedWorkflow, row.id, with_for_update=True)
            stopped = stored is None or stored.stop_requested_at is not None
            if stored is not None and not stopped:
                self._move(session, stored, cluster, remote_id, now, reason)
        if stopped:
            # asked to stop while it was being submitted: the copy just made goes too
            self._stop_on(cluster, remote_id, f"workflow {row.id}'s re-submitted copy")
            return None
        log.info("workflow %s re-routed from %s to %s: %s", row.id, row.cluster, cluster, reason)
        self._announce(row, cluster, now, reason)
        return Reroute(row.id, row.cluster, cluster, reason)

    def _stop_asked(self, workflow_id: str) -> bool:
        """Whether a stop was asked for ``workflow_id`` (read now, not at the turn's start)."""
        with self.service.sessions() as session:
            stored = session.get(FederatedWorkflow, workflow_id)
            return stored is None or stored.stop_requested_at is not None

    def _move(
        self,
        session: Session,
        stored: FederatedWorkflow,
        cluster: str,
        remote_id: str,
        now: float,
        reason: str,
    ) -> None:
        """Move ``stored`` to ``remote_id`` on ``cluster``, its old copy kept as stale (to
        stop when its member answers again), with the router's decision recorded."""
        stored.stale_remote_id = stored.remote_id
        stored.rerouted_from = stored.cluster
        stored.rerouted_at = now
        stored.reroute_reason = reason
        stored.cluster = cluster
        stored.remote_id = remote_id
        stored.last_status = None
        stored.job_started = False
        # the router's second decision for this workflow, with the first in its events and
        # in ``workflow why``
        decided = self.service._decision_row(stored.id, cluster)
        if decided is not None:
            session.add(decided)

    def _announce(self, row: FederatedWorkflow, cluster: str, when: float, reason: str) -> None:
        """Tell the ``fuzzball_event`` hooks of the re-route (a hook's failure is logged)."""
        if self.registry is None:
            return
        event = {
            "kind": str(EventKind.WORKFLOW_REROUTED),
            "time": when,
            "workflow_id": row.id,
            "stage": None,
            "node_id": None,
            "message": f"re-routed from cluster {row.cluster} to {cluster}: {reason}",
            "data": {"from": row.cluster, "to": cluster, "reason": reason},
        }
        try:
            self.registry.hook.fuzzball_event(event=event)
        except Exception:  # a site's hook must not stop failover
            log.exception("a fuzzball_event hook failed on workflow %s's re-route", row.id)


def _open(row: FederatedWorkflow) -> bool:
    """Whether the member has yet to say ``row``'s workflow ended."""
    return row.last_status is None or row.last_status not in TERMINAL_STATUSES


def _movable(row: FederatedWorkflow) -> bool:
    """Whether ``row``'s workflow may be submitted elsewhere (see the module's rules)."""
    return (
        _open(row)
        and not row.job_started
        and row.rerouted_at is None
        and row.stop_requested_at is None
        and bool(row.specification)
    )


def _ask(
    member: Member, remote_ids: list[str]
) -> tuple[Member, dict[str, pb.Workflow | None] | FuzzballError]:
    """``member``'s current view of each of ``remote_ids`` (None: not there), or the error
    that kept it from answering."""
    try:
        api = member.client()
        api.version()  # fails when the member is away, even with nothing open there
        found: dict[str, pb.Workflow | None] = {}
        for remote_id in remote_ids:
            try:
                found[remote_id] = api.get_workflow(remote_id)
            except NotFound:
                found[remote_id] = None
        return member, found
    except FuzzballError as exc:
        return member, exc
