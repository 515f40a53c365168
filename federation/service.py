"""Federate's service layer: the ``OrchestrateService`` calls, answered by member clusters.

Federate runs no workflow itself. ``start_workflow`` validates the file here (so errors name
field paths exactly as Orchestrate's do), asks each member for its nodes, lets the router
choose, and submits the file unchanged to the first choice through the member's REST API,
as the member account configured for it (to the next choice when a member refuses it or does
not answer). The store maps the federated id it hands out to
(cluster, remote id); every later call about that workflow is proxied to its cluster, and
the answers come back as views with the federated id. Nodes are every member's nodes, each
annotated with its cluster's name (``fuzzball.io/cluster``).

Accounts and tokens are Federate's own: the shared token store over Federate's tables
(``fuzzball_federation.models``), in its database. Federate checks its callers' permissions
itself (nodes and holds are its administrators'; a refusal is logged) and tells members who
each call is for: the caller's identity, signed with Federate's key (``forwarding``), which a
member trusting Federate verifies and enforces as well.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core import __version__
from fuzzball_core.api.following import page_token
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.config import DEFAULT_TOKEN_LIFETIME
from fuzzball_core.drivers import Router
from fuzzball_core.errors import (
    FailedPrecondition,
    FuzzballError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.service.accounts import AccountCalls, Accounts
from fuzzball_core.service.contract import LOG_PAGE
from fuzzball_core.service.forwarded_identity import IdentitySigner, TrustedFederates
from fuzzball_core.service.permissions import lacks_to_control_workflow, require
from fuzzball_core.service.submission import read_submission
from fuzzball_core.service.views import (
    IN_USE,
    EventView,
    HoldView,
    LogChunkView,
    NodeView,
    Principal,
    StageExplanation,
    StartedWorkflow,
    WorkflowView,
)
from fuzzball_core.spec import ParsedWorkflow
from fuzzball_core.vocabulary import EventKind, Permission, Status
from fuzzball_federation import remote_views as rv
from fuzzball_federation.capacity import CapacityCache
from fuzzball_federation.forwarding import Sign, acting_for, current
from fuzzball_federation.members import Member, Members
from fuzzball_federation.models import (
    FederateAccount,
    FederateApiToken,
    FederatedWorkflow,
    RoutingDecision,
)
from fuzzball_federation.needs import VolumeNeed, remember, workflow_needs, workflow_volumes
from fuzzball_federation.offers import MemberOffer
from fuzzball_federation.registration import Registrations
from fuzzball_federation.routers.fit import Decision

log = logging.getLogger("fuzzball.federate")

#: The annotation naming a node's cluster in Federate's node listings.
CLUSTER_ANNOTATION = "fuzzball.io/cluster"

T = TypeVar("T")

#: members asked at once by one listing
MAX_PARALLEL_ASKS = 32


class FederateService(AccountCalls):
    """The ``OrchestrateService`` Protocol over a federation of Orchestrate clusters."""

    #: members joining and leaving while it runs (``registration.py``; set by ``main.build``)
    registrations: Registrations | None = None
    #: the Federates this one takes forwarded identities from, as their member (recorded
    #: when it generated their registration); none: a forwarded identity is refused
    trusted_federates: TrustedFederates = TrustedFederates(())

    #: the REST gateway passes a start request's ``clusterId`` on (``cluster_id``)
    PINS_CLUSTERS = True

    def __init__(
        self,
        sessions: sessionmaker[Session],
        members: Members,
        router: Router,
        *,
        registry: PluginRegistry | None = None,
        token_lifetime: float = DEFAULT_TOKEN_LIFETIME,
        signer: IdentitySigner | None = None,
    ) -> None:
        self.sessions = sessions
        self.members = members
        self.router = router
        self._registry = registry
        #: signs the identity of each caller into the member calls made for them (None:
        #: members see only the Federate account, as before identities were forwarded)
        self.signer = signer
        self.accounts = Accounts(
            sessions, FederateAccount, FederateApiToken, token_lifetime=token_lifetime
        )
        # members are asked together: a listing waits for the slowest, not for the sum
        self._askers = ThreadPoolExecutor(MAX_PARALLEL_ASKS, thread_name_prefix="federate-ask")
        #: the members' offers, refreshed in the background: a decision asks no member
        self.capacity = CapacityCache(
            lambda: list(self.members.routable()), self._ask_each, _problem
        )
        # the decision _choose made in this thread, recorded by _start once it is stored
        self._routed = threading.local()
        if registry is not None:
            router.use_hooks(registry.hook)

    def close(self) -> None:
        """Stop asking members: the capacity refresher first (waited for, so no turn of it
        meets the askers shut), then the askers' threads, then the members' connections,
        then the store's."""
        self.capacity.close()
        self._askers.shutdown(wait=True, cancel_futures=True)
        self.members.close()
        self.sessions.kw["bind"].dispose()

    @property
    def registry(self) -> PluginRegistry | None:
        """The plugins whose hooks Federate calls (None in tests built without them)."""
        return self._registry

    # -- accounts (the calls themselves: AccountCalls) ---------------------------------------

    def forwarded_principal(self, who: Principal, assertion: str) -> Principal:
        """Who a Federate this one is a member of acts for (trusted when this one generated
        its registration); Unauthenticated from any other."""
        return self.trusted_federates.principal(who, assertion)

    def version(self) -> str:
        return f"v{__version__}"

    # -- who calls are for --------------------------------------------------------------------

    def _sign(self, who: Principal) -> Sign | None:
        """Signs ``who``'s identity for a member (by its name); None without a signer."""
        signer = self.signer
        if signer is None:
            return None
        return lambda audience: signer.assertion(who, audience)

    def _require(self, who: Principal, permission: Permission, doing: str) -> None:
        """:func:`require`, logging a refusal: Federate's own check, before any member is
        asked (members check again, on the identity forwarded to them)."""
        try:
            require(who, permission, doing)
        except PermissionDenied as exc:
            log.warning("refused %s: %s", who.email or who.name, exc.message)
            raise

    # -- members --------------------------------------------------------------------------------

    def _ask_each(
        self, members: Iterable[Member], call: Callable[[Any], T]
    ) -> list[tuple[Member, T | FuzzballError]]:
        """``call(client)`` for each member at once; each answer or the error it raised."""

        sign = current()  # the worker threads act for the same caller as this one

        def ask(member: Member) -> tuple[Member, T | FuzzballError]:
            try:
                with acting_for(sign):
                    return member, call(member.client())
            except FuzzballError as exc:
                return member, exc

        return list(self._askers.map(ask, members))

    def offers(self) -> list[MemberOffer]:
        """Every member as the router sees it, from the capacity cache (``capacity.py``:
        asked in the background, not per decision); one that does not answer is unhealthy."""
        return self.capacity.offers()

    # -- workflows ------------------------------------------------------------------------------

    def _parse(
        self, raw_specification: str | None, definition: Mapping[str, Any] | None, source: str
    ) -> tuple[ParsedWorkflow, str]:
        return read_submission(raw_specification, definition, source, self._registry)

    def _choose(
        self,
        parsed: ParsedWorkflow,
        who: Principal | None = None,
        *,
        cluster_id: str | None = None,
    ) -> list[str]:
        """The members that can run ``parsed``, best first (only the ``cluster_id`` member
        when one is given); InvalidArgument naming why not. The decision, with every
        member's estimate or rejection, is kept for :meth:`_start` to record."""
        if not len(self.members):
            raise InvalidArgument("this federation has no member clusters (federate.clusters)")
        definition = yaml.safe_load(parsed.to_yaml())
        remember(definition, parsed)  # the router reads the needs without parsing it again
        offers = [
            dataclasses.replace(o, healthy=False, problem="draining: it receives no new work")
            if o.healthy and self._draining(o.name)
            else o
            for o in self.offers()
        ]
        decide = getattr(self.router, "decide", None)
        if decide is not None:
            locations = self._volume_locations(who, workflow_volumes(definition), offers)
            decision: Decision = decide(definition, offers, volume_locations=locations)
        else:  # a router with only route (and rejections): its order, its reasons
            chosen = tuple(self.router.route(definition, offers))
            rejected = {} if chosen else dict(self.router.rejections(definition, offers))
            decision = Decision(chosen, {}, rejected)
        if cluster_id:
            decision = self._pin(decision, cluster_id)
        self._routed.decision = decision
        if decision.chosen:
            return list(decision.chosen)
        needs = _largest_request(definition)
        because = "; ".join(
            f"cluster {offer.name}: {decision.rejected.get(offer.name, 'not chosen by the router')}"
            for offer in offers
        )
        raise InvalidArgument(f"no member cluster can run this workflow{needs}: {because}")

    def _draining(self, name: str) -> bool:
        try:
            return bool(getattr(self.members.get(name), "draining", False))
        except NotFound:
            return True

    def _pin(self, decision: Decision, cluster_id: str) -> Decision:
        """``decision`` narrowed to the member ``cluster_id`` (its id or name) names;
        InvalidArgument when no member has it, FailedPrecondition naming why it cannot run
        the workflow (unreachable, draining, does not fit)."""
        names = [m.name for m in self.members if cluster_id in (getattr(m, "id", None), m.name)]
        if not names:
            known = ", ".join(sorted(m.name for m in self.members))
            raise InvalidArgument(
                f"clusterId: {cluster_id!r} is not a member cluster of this federation"
                f" (members: {known})"
            )
        name = names[0]
        if name not in decision.chosen:
            why = decision.rejected.get(name, "not chosen by the router")
            if self._draining(name):
                why = "draining: it receives no new work"
            raise FailedPrecondition(
                f"clusterId {cluster_id}: cluster {name} cannot run this workflow: {why}"
            )
        return dataclasses.replace(decision, chosen=(name,), pinned=True)

    def _volume_locations(
        self, who: Principal | None, volumes: list[VolumeNeed], offers: list[MemberOffer]
    ) -> dict[str, dict[str, int]]:
        """Where each of the workflow's named persistent volumes lives: reference to
        {member: size in bytes}, asked of each healthy member as ``who`` (the volumes are
        the caller's own there). Only a workflow mounting one asks."""
        if not volumes or who is None:
            return {}
        members = []
        for offer in offers:
            if offer.healthy:
                try:
                    members.append(self.members.get(offer.name))
                except NotFound:
                    continue
        wanted = {volume.reference for volume in volumes}
        found: dict[str, dict[str, int]] = {}
        with acting_for(self._sign(who)):
            answers = self._ask_each(
                members, lambda api: {"volumes": api.every_item("/volumes", "volumes")}
            )
        for member, answer in answers:
            if isinstance(answer, FuzzballError):
                log.warning("volumes of cluster %s unreadable: %s", member.name, answer)
                continue
            for volume in answer.get("volumes") or []:
                reference = volume.get("reference")
                if reference in wanted and volume.get("status") not in _GONE_VOLUMES:
                    size = int(volume.get("sizeBytes") or 0)
                    found.setdefault(reference, {})[member.name] = size
        return found

    def _decision_row(self, workflow_id: str, cluster: str) -> RoutingDecision | None:
        """The row recording this thread's last decision for ``workflow_id``, sent to
        ``cluster``; the ``fuzzball_event`` hooks are told of it (a hook's failure is
        logged)."""
        decision: Decision | None = getattr(self._routed, "decision", None)
        self._routed.decision = None
        if decision is None:
            return None
        row = RoutingDecision(
            workflow_id=workflow_id,
            decided_at=time.time(),
            cluster=cluster,
            summary=decision.summary(cluster),
            data=decision.as_data(cluster),
        )
        if self._registry is not None:
            try:
                event = {
                    "kind": str(EventKind.WORKFLOW_ROUTED),
                    "time": row.decided_at,
                    "workflow_id": workflow_id,
                    "stage": None,
                    "node_id": None,
                    "message": row.summary,
                    "data": row.data,
                }
                self._registry.hook.fuzzball_event(event=event)
            except Exception:  # a site's hook must not stop a submission
                log.exception("a fuzzball_event hook failed on workflow %s's routing", workflow_id)
        return row

    def _decisions(self, workflow_id: str) -> list[RoutingDecision]:
        with self.sessions() as session:
            query = (
                select(RoutingDecision)
                .where(RoutingDecision.workflow_id == workflow_id)
                .order_by(RoutingDecision.id)
            )
            return list(session.scalars(query))

    async def start_workflow_async(self, who: Principal, **source: Any) -> StartedWorkflow:
        """:meth:`start_workflow` for the transports: asking members for their capacity and
        submitting to the chosen one run in a worker thread, off the gateway's event loop."""
        return await asyncio.to_thread(functools.partial(self._start, who, **source))

    def start_workflow(self, who: Principal, **source: Any) -> str:
        return self._start(who, **source).id

    def _start(
        self,
        who: Principal,
        *,
        raw_specification: str | None = None,
        definition: Mapping[str, Any] | None = None,
        name: str | None = None,
        cluster_id: str | None = None,
    ) -> StartedWorkflow:
        """Route the workflow (to the ``cluster_id`` member only, when given) and submit it
        to the chosen member; its id here, and the file's warnings (read here, with the same
        rules as the member's)."""
        self._require(who, Permission.RUN_WORKFLOWS, "start workflows")
        parsed, raw = self._parse(raw_specification, definition, name or "<api>")
        cluster, remote_id = self.submit(who, parsed, raw, name, cluster_id=cluster_id)
        workflow_id = str(uuid.uuid4())
        with self.sessions() as session, session.begin():
            session.add(
                FederatedWorkflow(
                    id=workflow_id,
                    account_id=who.account_id,
                    cluster=cluster,
                    remote_id=remote_id,
                    name=name or "workflow",
                    created_at=time.time(),
                    # kept for failover: submitted again elsewhere if its member goes away
                    specification=raw,
                    user_id=who.user_id,
                    email=who.email,
                )
            )
            decided = self._decision_row(workflow_id, cluster)
            if decided is not None:
                session.flush()  # the workflow's row first: the decision refers to it
                session.add(decided)
        self.capacity.refresh_soon()  # its free capacity just shrank
        log.info("workflow %s -> cluster %s as %s", workflow_id, cluster, remote_id)
        return StartedWorkflow(workflow_id, tuple(parsed.warnings))

    def submit(
        self,
        who: Principal,
        parsed: ParsedWorkflow,
        raw: str,
        name: str | None,
        *,
        avoid: str | None = None,
        cluster_id: str | None = None,
    ) -> tuple[str, str]:
        """Submit ``raw`` for ``who`` to the best member that accepts it (never ``avoid``):
        that member's name and the id it gave the workflow.

        A member that went away (Unavailable) or refuses the workflow (InvalidArgument,
        FailedPrecondition: something it lacks that its offer did not show) is passed over
        for the next chosen one, and the decision recorded names it among the rejected with
        its reason. When every chosen member refused, InvalidArgument names each member's
        reason; when one was unreachable, Unavailable."""
        failures = []
        refused_only = True
        for cluster in self._choose(parsed, who, cluster_id=cluster_id):
            if cluster == avoid:
                continue
            member = self.members.get(cluster)
            try:
                with acting_for(self._sign(who)):
                    return cluster, member.client().start_workflow(raw, name=name)
            except Unavailable as exc:
                # the chosen member went away between the offer and the submission
                failures.append(f"cluster {cluster}: {_problem(exc)}")
                refused_only = False
                self._passed_over(cluster, _problem(exc))
            except (InvalidArgument, FailedPrecondition) as exc:
                failures.append(f"cluster {cluster}: refused it: {exc.message}")
                self._passed_over(cluster, f"refused it: {exc.message}")
        if avoid is not None and not failures:
            failures.append(f"no member but {avoid} can run it")
            refused_only = False
        because = "; ".join(failures)
        if refused_only:
            raise InvalidArgument(f"no member cluster accepted the workflow: {because}")
        raise Unavailable(f"no chosen member cluster accepted the workflow: {because}")

    def _passed_over(self, cluster: str, why: str) -> None:
        """Record in this thread's decision that ``cluster``, chosen, did not take the
        workflow, and why: it is then among the rejected, no longer among the eligible."""
        decision: Decision | None = getattr(self._routed, "decision", None)
        if decision is None:
            return
        self._routed.decision = dataclasses.replace(
            decision,
            chosen=tuple(name for name in decision.chosen if name != cluster),
            rejected={**decision.rejected, cluster: why},
        )

    def validate_workflow(
        self,
        who: Principal,
        *,
        raw_specification: str | None = None,
        definition: Mapping[str, Any] | None = None,
    ) -> list[str]:
        parsed, _ = self._parse(raw_specification, definition, "<api>")
        self._choose(parsed, who)
        self._routed.decision = None
        return list(parsed.warnings)

    def _record(self, who: Principal, workflow_id: str) -> FederatedWorkflow:
        with self.sessions() as session:
            row = session.get(FederatedWorkflow, workflow_id)
        if row is None or (
            row.account_id != who.account_id and not who.may(Permission.READ_CLUSTER)
        ):
            raise NotFound(f"workflow {workflow_id!r} not found")
        return row

    def _proxy(self, who: Principal, workflow_id: str, call: Callable[[Any, str], T]) -> T:
        """``call(member client, remote id)`` for the workflow's cluster."""
        row = self._record(who, workflow_id)
        member = self.members.get(row.cluster)
        try:
            with acting_for(self._sign(who)):
                return call(member.client(), row.remote_id)
        except NotFound:
            raise NotFound(
                f"workflow {workflow_id!r}: cluster {row.cluster} no longer has it"
            ) from None

    def cluster_of(self, who: Principal, workflow_id: str) -> str:
        """The name of the member cluster running a federated workflow."""
        return self._record(who, workflow_id).cluster

    def _view(self, row: FederatedWorkflow, workflow: pb.Workflow) -> WorkflowView:
        """The member's ``workflow`` under Federate's id, owner, starter and member name."""
        view = rv.workflow_view(
            workflow, workflow_id=row.id, account_id=row.account_id, cluster=row.cluster
        )
        return dataclasses.replace(
            view, user_id=row.user_id or view.user_id, email=row.email or view.email
        )

    def list_workflows(self, who: Principal) -> list[WorkflowView]:
        with self.sessions() as session:
            query = select(FederatedWorkflow)
            if not who.may(Permission.READ_CLUSTER):
                query = query.where(FederatedWorkflow.account_id == who.account_id)
            rows = list(session.scalars(query))
        by_cluster: dict[str, dict[str, FederatedWorkflow]] = {}
        for row in rows:
            by_cluster.setdefault(row.cluster, {})[row.remote_id] = row
        views = []
        clusters = []
        for cluster, remote in by_cluster.items():
            try:
                clusters.append(self.members.get(cluster))
            except NotFound as exc:
                views += [unknown_view(row, exc.message) for row in remote.values()]
        with acting_for(self._sign(who)):
            answers = self._ask_each(clusters, lambda api: api.list_workflows())
        for member, listed in answers:
            remote = by_cluster[member.name]
            if isinstance(listed, FuzzballError):
                # not lost: listed from Federate's record, its status unknown while it is away
                log.warning("listing workflows of cluster %s failed: %s", member.name, listed)
                views += [unknown_view(row, _problem(listed)) for row in remote.values()]
                continue
            for workflow in listed:
                record = remote.get(workflow.id)
                if record is not None:
                    views.append(self._view(record, workflow))
        views.sort(key=lambda view: view.created_at, reverse=True)
        return views

    def get_workflow(self, who: Principal, workflow_id: str) -> WorkflowView:
        row = self._record(who, workflow_id)
        try:
            workflow = self._proxy(who, workflow_id, lambda api, rid: api.get_workflow(rid))
        except Unavailable as exc:
            return unknown_view(row, _problem(exc))
        return self._view(row, workflow)

    def stop_workflow(self, who: Principal, workflow_id: str) -> str | None:
        """Stop the workflow on its member. The stop is recorded on Federate's row first, so
        failover never re-routes the workflow from then on. When the member does not answer,
        the stop stays recorded as pending and failover's turns deliver it once the member
        answers again; the caller is told so (a note, not an error: the stop will happen).
        Who may stop it is :meth:`lacks_to_control_workflow`'s."""
        self._require(who, Permission.RUN_WORKFLOWS, "stop workflows")
        seen = self._record(who, workflow_id)  # another organization's workflow is not found
        if self._lacks_to_control(who, seen) is not None:
            # RUN_WORKFLOWS is held (above): what is lacking is administering the cluster
            self._require(who, Permission.ADMINISTER_CLUSTER, "stop workflows of another account")
        with self.sessions() as session, session.begin():
            row = session.get(FederatedWorkflow, workflow_id, with_for_update=True)
            if row is None:
                raise NotFound(f"workflow {workflow_id!r} not found")
            row.stop_requested_at = row.stop_requested_at or time.time()
            cluster = row.cluster  # read under the lock: a re-route before it is seen
        try:
            note = self._proxy(who, workflow_id, lambda api, rid: api.stop_workflow(rid))
        except Unavailable as exc:
            self._set_stop_pending(workflow_id, True)
            log.warning("workflow %s: stop recorded, cluster %s away", workflow_id, cluster)
            return (
                f"stop recorded: cluster {cluster} does not answer ({_problem(exc)}); the stop is"
                " delivered when it answers again, and the workflow is not re-routed"
            )
        self._set_stop_pending(workflow_id, False)  # delivered: an earlier one is done too
        return note or None

    def lacks_to_control_workflow(self, who: Principal, workflow_id: str) -> Permission | None:
        """The permission ``who`` lacks to stop or rerun the workflow (None: it may), as
        :meth:`stop_workflow` would refuse it. NotFound as :meth:`get_workflow`."""
        return self._lacks_to_control(who, self._record(who, workflow_id))

    @staticmethod
    def _lacks_to_control(who: Principal, row: FederatedWorkflow) -> Permission | None:
        """:func:`~fuzzball_core.service.permissions.lacks_to_control_workflow` for a
        workflow ``who`` sees: its own are its account's."""
        return lacks_to_control_workflow(who, its_own=row.account_id == who.account_id)

    def _set_stop_pending(self, workflow_id: str, pending: bool) -> None:
        """Record whether the stop asked for ``workflow_id`` is still to be delivered."""
        with self.sessions() as session, session.begin():
            row = session.get(FederatedWorkflow, workflow_id)
            if row is not None:
                row.stop_pending = pending

    def list_events(
        self, who: Principal, workflow_id: str, *, after_seq: int = 0
    ) -> list[EventView]:
        """The member's events of the workflow, after Federate's own (seq 0: the member's
        seqs are unchanged): its routing decisions, then a re-routed one's
        ``workflow_rerouted``."""
        row = self._record(who, workflow_id)
        events = self._proxy(
            who, workflow_id, lambda api, rid: api.list_events(rid, after_seq=after_seq)
        )
        views = [rv.event_view(e, workflow_id=workflow_id) for e in events]
        if row.rerouted_at is not None and after_seq <= 0:
            views.insert(0, reroute_event(row))
        if after_seq <= 0:  # the routing decisions (seq 0) come before the member's events
            views[:0] = [_routed_event(d) for d in self._decisions(workflow_id)]
        return views

    def read_logs(
        self,
        who: Principal,
        workflow_id: str,
        *,
        stage_name: str | None = None,
        task_id: int | None = None,
        after_seq: int = 0,
        limit: int = LOG_PAGE,
        tail: int | None = None,
    ) -> list[LogChunkView]:
        # the member's seqs are the federated workflow's: its pages are this one's
        chunks, _ = self._proxy(
            who,
            workflow_id,
            lambda api, rid: api.read_log_page(
                rid,
                stage_name,
                task_id=task_id,
                page_size=limit,
                page_token=page_token(after_seq),
                tail=tail,
            ),
        )
        return [rv.log_chunk_view(c) for c in chunks]

    def explain_workflow(
        self, who: Principal, workflow_id: str, *, include_finished: bool = False
    ) -> list[StageExplanation]:
        """The member's explanation of each stage, after Federate's own: where the workflow
        was routed and why (one ``ROUTED`` row per decision, stage ``federate``)."""
        stages = self._proxy(
            who,
            workflow_id,
            lambda api, rid: api.explain_workflow(rid, include_finished=include_finished),
        )
        routed = [
            StageExplanation(
                stage_name="federate",
                kind="workflow",
                status=Status.FINISHED,
                reason="ROUTED",
                message=decision.summary,
            )
            for decision in self._decisions(workflow_id)
        ]
        return routed + [rv.explanation_view(s) for s in stages]

    # -- nodes ----------------------------------------------------------------------------------

    def list_nodes(self, who: Principal) -> list[NodeView]:
        self._require(who, Permission.READ_NODES, "list nodes")
        nodes = []
        with acting_for(self._sign(who)):
            answers = self._ask_each(self.members, lambda api: api.list_nodes())
        for member, listed in answers:
            if isinstance(listed, FuzzballError):
                log.warning("listing nodes of cluster %s failed: %s", member.name, listed)
                continue
            extra = {CLUSTER_ANNOTATION: member.name}
            nodes += [rv.node_view(n, extra_annotations=extra) for n in listed]
        return nodes

    def _node_member(
        self, who: Principal, node_ref: str, permission: Permission, doing: str
    ) -> tuple[Member, pb.GetNodeInfo]:
        """The member that has node ``node_ref`` (id or name) and its ``GetNodeInfo``, once
        ``who`` is found to hold ``permission`` (to do ``doing``)."""
        self._require(who, permission, doing)
        for member, node in self._ask_each(self.members, lambda api: api.get_node(node_ref)):
            if not isinstance(node, FuzzballError):
                return member, node
            if not isinstance(node, NotFound | Unavailable):
                raise node
        raise NotFound(f"node {node_ref!r} not found in any member cluster")

    def get_node(self, who: Principal, node_id: str) -> NodeView:
        with acting_for(self._sign(who)):
            member, node = self._node_member(who, node_id, Permission.READ_NODES, "read nodes")
        view = rv.node_view(node, extra_annotations={CLUSTER_ANNOTATION: member.name})
        return dataclasses.replace(view, stages=self._visible_work(who, member.name, view.stages))

    def _visible_work(self, who: Principal, cluster: str, stages: Iterable[str]) -> tuple[str, ...]:
        """A member node's running work as ``who`` may see it: the work of its own federated
        workflows (any federated workflow's, for an administrator) under the federated id;
        everything else only :data:`IN_USE`, as Orchestrate shows other accounts' work."""
        entries = [entry.partition("/") for entry in stages]
        federated = self._federated_ids(
            who, cluster, {remote_id for remote_id, separator, _ in entries if separator}
        )
        return tuple(
            f"{federated[remote_id]}/{rest}" if separator and remote_id in federated else IN_USE
            for remote_id, separator, rest in entries
        )

    def _federated_ids(self, who: Principal, cluster: str, remote_ids: set[str]) -> dict[str, str]:
        """Member workflow id -> federated id of those of ``remote_ids`` on ``cluster`` that
        ``who`` may see: its own federated workflows (any, for an administrator)."""
        if not remote_ids:
            return {}
        with self.sessions() as session:
            query = select(FederatedWorkflow).where(
                FederatedWorkflow.cluster == cluster, FederatedWorkflow.remote_id.in_(remote_ids)
            )
            if not who.may(Permission.READ_CLUSTER):
                query = query.where(FederatedWorkflow.account_id == who.account_id)
            return {row.remote_id: row.id for row in session.scalars(query)}

    def list_node_events(
        self, who: Principal, node_ref: str, *, after_seq: int = 0
    ) -> list[EventView]:
        """A member node's events as ``who`` may see them (:meth:`_visible_work`'s rule):
        the node's own (registration, holds) and those of ``who``'s federated workflows
        (any federated workflow's, for an administrator) under the federated id; the
        events of every other workflow on the node are left out, as Orchestrate leaves out
        those of workflows a caller may not see."""
        with acting_for(self._sign(who)):
            member, node = self._node_member(
                who, node_ref, Permission.READ_NODES, "read node events"
            )
            events = [
                rv.event_view(e)
                for e in member.client().list_node_events(node.id, after_seq=after_seq)
            ]
        federated = self._federated_ids(
            who, member.name, {e.workflow_id for e in events if e.workflow_id}
        )
        return [
            dataclasses.replace(event, workflow_id=federated[event.workflow_id])
            if event.workflow_id
            else event
            for event in events
            if not event.workflow_id or event.workflow_id in federated
        ]

    def remove_node(self, who: Principal, node_ref: str) -> None:
        with acting_for(self._sign(who)):
            member, node = self._node_member(who, node_ref, Permission.HOLD_NODES, "remove nodes")
            member.client().remove_node(node.id)

    def list_holds(self, who: Principal, node_ref: str) -> list[HoldView]:
        with acting_for(self._sign(who)):
            member, node = self._node_member(who, node_ref, Permission.READ_NODES, "read holds")
            holds = member.client().list_holds(node.id)
        return [rv.hold_view(h, node_id=node.id) for h in holds]

    def add_hold(self, who: Principal, node_ref: str, effect: str, reason: str = "") -> HoldView:
        with acting_for(self._sign(who)):
            member, node = self._node_member(
                who, node_ref, Permission.HOLD_NODES, "place node holds"
            )
            hold = member.client().add_hold(node.id, effect, reason)
        log.info("hold %s on %s/%s placed for %s", effect, member.name, node.id, who.name)
        return rv.hold_view(hold, node_id=node.id)

    def release_hold(self, who: Principal, node_ref: str, hold_id: int) -> None:
        with acting_for(self._sign(who)):
            member, node = self._node_member(
                who, node_ref, Permission.HOLD_NODES, "release node holds"
            )
            member.client().release_hold(node.id, hold_id)

    def uncordon(self, who: Principal, node_ref: str) -> int:
        with acting_for(self._sign(who)):
            member, node = self._node_member(who, node_ref, Permission.HOLD_NODES, "uncordon nodes")
            return member.client().uncordon(node.id).released


def unknown_view(row: FederatedWorkflow, problem: str) -> WorkflowView:
    """A workflow whose member does not answer, from Federate's record: its last known
    status once it had ended there, else UNKNOWN; ``status_reason`` says why and what
    happens next."""
    last = Status(row.last_status) if row.last_status else None
    if last is not None and last.terminal:
        status, next_step = last, "it had ended there"
    elif row.stop_pending:
        status = Status.UNKNOWN
        next_step = (
            "its stop is recorded and delivered when the cluster answers; it is not re-routed"
        )
    elif row.stop_requested_at is not None:
        status = Status.UNKNOWN
        next_step = "it was stopped; its status shows again once the cluster answers"
    elif row.job_started or not row.specification or row.rerouted_at is not None:
        status = Status.UNKNOWN
        next_step = "its status shows again once the cluster answers"
    else:
        status = Status.UNKNOWN
        next_step = (
            "no job had started there, so it is re-routed to another member if the cluster"
            " stays unreachable past federate.failover-grace"
        )
    return WorkflowView(
        id=row.id,
        name=row.name,
        status=status,
        account_id=row.account_id,
        created_at=row.created_at,
        user_id=row.user_id or "",
        email=row.email or "",
        cluster_name=row.cluster,
        status_reason=f"cluster {row.cluster} does not answer: {problem}; {next_step}",
    )


def reroute_event(row: FederatedWorkflow) -> EventView:
    """The ``workflow_rerouted`` event of a re-routed workflow, from its record."""
    return EventView(
        seq=0,
        time=row.rerouted_at or 0.0,
        kind=EventKind.WORKFLOW_REROUTED,
        message=f"re-routed from cluster {row.rerouted_from} to {row.cluster}: "
        f"{row.reroute_reason}",
        workflow_id=row.id,
        data={"from": row.rerouted_from, "to": row.cluster, "reason": row.reroute_reason},
    )


#: volume statuses of data that is going or gone (not where the workflow's data lives)
_GONE_VOLUMES = ("DELETING", "DELETED")


def _routed_event(decision: RoutingDecision) -> EventView:
    """The ``workflow_routed`` event of a recorded decision (seq 0: Federate's own, before
    the member's)."""
    return EventView(
        seq=0,
        time=decision.decided_at,
        kind=EventKind.WORKFLOW_ROUTED,
        message=decision.summary,
        workflow_id=decision.workflow_id,
        data=dict(decision.data or {}),
    )


def _problem(error: FuzzballError) -> str:
    """A member's failure as a short reason (``unreachable (...)``, ``refused the token``)."""
    message = error.message
    if isinstance(error, Unauthenticated):
        return "refused Federate's token for it"
    if message.startswith("cluster ") and ": " in message:
        return message.split(": ", 1)[1]
    if isinstance(error, Unavailable):
        return f"unreachable ({message})"
    return message


def _largest_request(definition: Mapping[str, Any]) -> str:
    """`` (largest request: jobs.x: 8 cores, ...)`` for the refusal message."""
    needs = workflow_needs(definition)
    if not needs:
        return ""
    largest = max(needs, key=lambda n: (sum(n.devices.values()), n.cores, n.memory))
    return f" (largest request {largest.describe()})"
