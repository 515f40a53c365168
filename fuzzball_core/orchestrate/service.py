"""The service layer over the store and the engine (implements ``OrchestrateService``).

Construct it with a session factory and a running :class:`Engine`::

    service = SqlOrchestrateService(sessions, engine, registry=registry)
    principal, token = service.create_account("admin", admin=True)

Queries read the database directly and return views; changes go through the engine.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.orm import Session, defer, sessionmaker

from fuzzball_core import __version__
from fuzzball_core.config import DEFAULT_CLUSTER_NAME, DEFAULT_TOKEN_LIFETIME
from fuzzball_core.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.node_rows import LISTED_NODE, UNHEARD_NODE, NodeRows
from fuzzball_core.orchestrate.node_usage_copies import (
    NodeUsageCopy,
    NodeUsageReader,
    NodeUsages,
    UsageShown,
)
from fuzzball_core.orchestrate.run_owners import RunOwner, RunOwners, read_owners
from fuzzball_core.orchestrate.states import LIVE_RUN
from fuzzball_core.orchestrate.submission import PreparedSubmission, preparers
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.scheduling import Scheduler
from fuzzball_core.service.accounts import AccountCalls, Accounts
from fuzzball_core.service.audit import AuditLog
from fuzzball_core.service.contract import LOG_PAGE, LOG_PAGE_BYTES
from fuzzball_core.service.forwarded_accounts import ForwardedAccounts
from fuzzball_core.service.forwarded_identity import TrustedFederates
from fuzzball_core.service.identity import Identity
from fuzzball_core.service.oidc import OidcIssuer, looks_like_jwt
from fuzzball_core.service.permissions import (
    lacks_to_control_workflow,
    may_start_workflows,
    require,
)
from fuzzball_core.service.submission import read_submission
from fuzzball_core.service.views import (
    IN_USE,
    TERMINAL,
    EventView,
    HoldView,
    LogChunkView,
    MeteringView,
    NodeView,
    Principal,
    StageExplanation,
    StageView,
    StartedWorkflow,
    WorkflowView,
)
from fuzzball_core.spec import ParsedWorkflow
from fuzzball_core.spec.parsed_files import ParsedFiles
from fuzzball_core.spec.plan import Condition
from fuzzball_core.store.models import (
    Account,
    Event,
    LogChunk,
    Node,
    NodeHold,
    Run,
    Stage,
    User,
    Workflow,
)
from fuzzball_core.store.object_cache import ObjectCache
from fuzzball_core.vocabulary import AccountKind, AuditAction, Permission, Status

#: Most rows one listing call returns; callers page with ``after_seq``.
PAGE = 5000
#: The orders a workflow listing may take, and the column expression each sorts by: a
#: workflow never started sorts as 0 by its start, so paging by it needs no NULL cases.
WORKFLOW_ORDERS = {
    "submitted": Workflow.created_at,
    "started": func.coalesce(Workflow.started_at, 0.0),
}
#: The kinds of service account whose holds are attributed to them rather than to ``admin``.
SERVICE_HOLD_SOURCES = {
    AccountKind.MONITORING: "monitoring",
    AccountKind.PROVISIONER: "provisioner",
}


class ListReads:
    """The workflow and node lists, read from the store and a copy of the engine's memory:
    what the REST list worker process (:mod:`~fuzzball_core.orchestrate.list_worker`) serves
    with a reader of copies sent over from the engine's process, and what
    :class:`SqlOrchestrateService` serves in the engine's own."""

    #: this cluster's name on its workflows, set by ``server.build`` from
    #: ``orchestrate.cluster-name``
    cluster_name: str = DEFAULT_CLUSTER_NAME

    def __init__(
        self,
        sessions: sessionmaker[Session],
        node_usages: NodeUsageReader,
        audit: AuditLog,
        *,
        last_heard: bool = True,
    ) -> None:
        """``last_heard``: whether the node views say when each node was last heard (the
        REST list's ``ListNodeInfo`` does not: the list worker's views leave it None, so a
        heartbeat or a lease written to a row changes nothing a list made of them shows,
        and after a quiet while, when every node has been heard since, the next list is
        the last one rather than every node's view made again)."""
        self.sessions = sessions
        self.audit = audit
        #: what node views show of the engine's memory: copies made on its loop for callers
        #: on other threads (the REST gateway's) or processes (the list worker)
        self.node_usages = node_usages
        #: whose work the runs on nodes are, kept from one node list to the next
        self.run_owners = RunOwners()
        #: node id -> what the last node list read and made of the node
        self._listed: dict[str, KeptNode] = {}
        #: the nodes' rows, kept between lists (on PostgreSQL only the changed ones read)
        self.node_rows = NodeRows(LISTED_NODE if last_heard else UNHEARD_NODE)
        #: the copy of the engine's memory last found to agree with rows, and those rows
        self._agreed: tuple[NodeUsageCopy | None, Sequence[NodeColumns]] = (None, ())
        #: what the last node list's views were made of, and its views
        self._last_list: _LastList | None = None
        #: the last rows read and the nodes made of them (the same list while no row changed)
        self._last_rows: tuple[Sequence[tuple[Any, ...]], list[ListedNode]] = ((), [])
        #: the run labels of the last list, the copy and the caller they were made for
        self._last_labels: tuple[NodeUsageCopy | None, Principal | None, dict[int, str]] = (
            None,
            None,
            {},
        )

    def list_workflows(self, who: Principal) -> list[WorkflowView]:
        with self.sessions() as session:
            query = select(Workflow).order_by(Workflow.created_at.desc()).limit(PAGE)
            seen = workflows_seen_by(who)
            if seen is not None:
                query = query.where(seen)
            workflows = list(session.scalars(query))
            emails = _emails(session, workflows)
            return [self._owned_view(_workflow_view(w, ()), emails) for w in workflows]

    def _owned_view(self, view: WorkflowView, emails: Mapping[str, str]) -> WorkflowView:
        """``view`` with its starter's email and this cluster's name."""
        return dataclasses.replace(
            view, email=emails.get(view.user_id, ""), cluster_name=self.cluster_name
        )

    @property
    def listed_copy(self) -> NodeUsageCopy | None:
        """The copy of the engine's memory the last node list showed (None before one)."""
        last = self._last_list
        return None if last is None else last.memory

    def list_nodes(self, who: Principal, *, copy: NodeUsageCopy | None = None) -> list[NodeView]:
        """Every node's view (``OrchestrateService.list_nodes``); ``copy``: the copy of the
        engine's memory to show rather than the reader's latest, when it covers every node
        and agrees with their rows (the list worker's lists prepared ahead of their GETs)."""
        self._require(who, Permission.READ_NODES, "list nodes", "nodes")
        kept = self._listed
        with self.sessions() as session:
            # the columns a view shows, not ORM rows, as the driver's tuples: a list reads
            # every node and changes none; a node whose columns are as the last list read
            # them keeps what was made of them (see KeptNode)
            connection = session.connection()
            rows = self.node_rows.read(connection)
            last_rows, last_nodes = self._last_rows
            if rows is last_rows:  # no row written since (NodeRows: the same list)
                nodes = last_nodes
            else:
                nodes = _listed_nodes(rows, kept)
                self._last_rows = (rows, nodes)
            # every node's holds and running stages in two queries, not two per node (a
            # node list of 5,000 nodes held the loop for seconds)
            holds: dict[str, tuple[HoldView, ...]] = {}
            for h in connection.execute(_LISTED_HOLDS):
                holds[h.node_id] = (*holds.get(h.node_id, ()), HoldView(*h))
            memory = self._node_memory([node.id for node in nodes], nodes, copy)
            labels = self._labels(session, memory, who)
        last = self._last_list
        if (
            last is not None
            and last.memory is memory
            and last.holds == holds
            and (last.labels is labels or last.labels == labels)
            and len(last.nodes) == len(nodes)
            and (last.nodes is nodes or all(map(operator.is_, nodes, last.nodes)))
        ):
            # what every view is made of is the last list's: its views (most lists half a
            # second apart while a copy of the engine's memory is made every 1-4 s at 5,000
            # nodes; the loop below was about 8 ms of such a list's CPU)
            return list(last.views)
        usages, heard = memory.usages, memory.heard
        views: list[NodeView] = []
        listed: dict[str, KeptNode] = {}
        for row, node in zip(rows, nodes, strict=True):
            node_id = node.id
            usage = usages.get(node_id)
            stored = node.last_seen
            # None: not read (last_heard False), and so not shown
            last_seen = None if stored is None else max(stored, heard.get(node_id, stored))
            node_holds = holds.get(node_id, ())
            # what the view shows besides the node's columns: its usage (its running stages
            # as this caller may see them), when it was last heard, its holds
            if usage is None:
                shown: tuple[Any, ...] = (None, last_seen, node_holds)
            else:
                stages = _stages(usage.job_ids, labels) if usage.job_ids else ()
                shown = (
                    usage.used_cores,
                    usage.used_memory,
                    usage.used_devices,
                    stages,
                    last_seen,
                    node_holds,
                )
            before = kept.get(node_id)
            if before is not None and before.node is node and before.shown == shown:
                views.append(before.view)
                listed[node_id] = before
                continue
            view = _node_view_of(node, usage, last_seen, node_holds, labels)
            views.append(view)
            listed[node_id] = KeptNode(row, node, shown, view)
        # replaced whole (two lists at once each read the one before, the last one kept)
        self._listed = listed
        # a tuple: the caller's list may change after
        self._last_list = _LastList(nodes, memory, holds, labels, tuple(views))
        return views

    def _labels(self, session: Session, memory: NodeUsageCopy, who: Principal) -> dict[int, str]:
        """Run id -> its label as ``who`` sees it, of the runs ``memory`` holds: the last
        list's when made of the same copy for the same caller and every run's owner was
        found (a list every half second shows the same copy for 1-4 s at 5,000 nodes;
        thousands of runs' ids, owners and labels were 2-4 ms of its CPU)."""
        copy, caller, labels = self._last_labels
        if copy is memory and caller == who:
            return labels
        run_ids = _run_ids(job for usage in memory.usages.values() for job in usage.job_ids)
        owners = self.run_owners.of(session, run_ids)
        labels = _run_labels(owners, who)
        # a run whose row was not found may be by the next list: looked up again then
        self._last_labels = (
            (memory, who, labels) if len(owners) == len(run_ids) else (None, None, {})
        )
        return labels

    def _node_memory(
        self,
        node_ids: list[str],
        rows: Sequence[NodeColumns],
        copy: NodeUsageCopy | None = None,
    ) -> NodeUsageCopy:
        """The engine's memory of the nodes whose ``rows`` were just read: a copy that agrees
        with each row's state and capacity (one made before a node changed would show it
        with usage it never had in that state), asked for anew when the latest does not;
        ``copy`` rather than the latest when it covers them."""
        if copy is not None and copy.nodes.issuperset(node_ids):
            memory = copy
        else:
            memory = self.node_usages.read(node_ids)
        # the copy and the very rows (the same objects: a list's unchanged rows) found to
        # agree before agree now: copies and rows never change, and a list every half second
        # is mostly given the copy the one before was (one is made every 1-4 s at 5,000 nodes,
        # and checking its 5,000 rows was about 5 ms of a list's CPU)
        agreed, checked = self._agreed
        if memory is agreed and (
            rows is checked or (len(rows) == len(checked) and all(map(operator.is_, rows, checked)))
        ):
            return memory
        if memory.agrees_with(rows):
            self._agreed = (memory, rows)
            return memory
        return self.node_usages.read(node_ids, fresh=True)

    def _require(self, who: Principal, permission: Permission, doing: str, target: str) -> None:
        """:func:`require`, auditing a refusal (who tried what on which target)."""
        try:
            require(who, permission, doing)
        except PermissionDenied:
            self._audit(
                who,
                AuditAction.PERMISSION_DENIED,
                target,
                outcome="denied",
                detail={"permission": permission.value, "doing": doing},
            )
            raise

    def _audit(
        self,
        who: Principal,
        action: AuditAction,
        target: str,
        *,
        outcome: str = "ok",
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """One entry in the audit log, naming the user acting (or the account)."""
        self.audit.record(
            action,
            actor=who.email or who.name,
            actor_id=who.user_id or who.account_id,
            organization_id=who.organization_id,
            target=target,
            outcome=outcome,
            source=who.source,
            detail=dict(detail or {}),
        )


class SqlOrchestrateService(ListReads, AccountCalls):
    """Orchestrate's service layer on SQLAlchemy."""

    #: the cluster's object cache and the node token that reads and writes it, set by
    #: ``configure_images`` (None: this Orchestrate serves no object cache)
    object_cache: ObjectCache | None = None
    node_token: str = ""
    #: the Federates whose forwarded identities are accepted, set by ``server.build`` from
    #: ``orchestrate.trusted-federates`` (none: a forwarded identity is refused)
    trusted_federates: TrustedFederates = TrustedFederates(())
    #: the OIDC issuer whose access tokens sign users in, set by ``server.build`` (None:
    #: only API tokens are accepted)
    oidc: OidcIssuer | None = None
    #: copies of the engine's memory made on its loop (served to the gateway's thread and,
    #: over a pipe, to the list worker)
    node_usages: NodeUsages

    def __init__(
        self,
        sessions: sessionmaker[Session],
        engine: Engine,
        *,
        registry: PluginRegistry | None = None,
        token_lifetime: float = DEFAULT_TOKEN_LIFETIME,
    ) -> None:
        super().__init__(sessions, NodeUsages(engine.context), AuditLog(sessions))
        self.engine = engine
        self._registry = registry
        #: submitted files' parses, reused when the same text comes again
        self._files = ParsedFiles()
        self.accounts = Accounts(sessions, token_lifetime=token_lifetime)
        #: the accounts kept for the callers trusted Federates forward
        self.forwarded_accounts = ForwardedAccounts(sessions)
        #: organizations, users, groups, sign-in and service accounts
        self.identity = Identity(sessions, self.accounts, self.audit)

    @property
    def scheduler(self) -> Scheduler:
        return self.engine.scheduler

    # -- accounts (the calls themselves: AccountCalls) ---------------------------------------

    def authenticate(self, token: str) -> Principal:
        """The caller owning ``token``: a login access token of :attr:`oidc` (a JWT) is its
        user's login principal, anything else an account's API token (AccountCalls)."""
        if self.oidc is not None and looks_like_jwt(token):
            return self.oidc.authenticate(token)
        return self.accounts.authenticate(token)

    def forwarded_principal(self, who: Principal, assertion: str) -> Principal:
        """Who ``who`` (a Federate's account) acts for, by the identity a trusted Federate
        signed (:mod:`~fuzzball_core.service.forwarded_identity`): that caller, with only the
        permissions both hold, in the account this cluster keeps for it
        (:mod:`~fuzzball_core.service.forwarded_accounts`), so that two callers of a Federate
        share nothing here. Unauthenticated when no trusted Federate signed it."""
        caller = self.trusted_federates.caller(who, assertion)
        return caller.principal(self.forwarded_accounts.account_of(caller))

    def version(self) -> str:
        return f"v{__version__}"

    # -- workflows -----------------------------------------------------------------------------

    def _parse(
        self, raw_specification: str | None, definition: Mapping[str, Any] | None, source: str
    ) -> tuple[ParsedWorkflow, str]:
        return read_submission(raw_specification, definition, source, self._registry, self._files)

    def start_workflow(
        self,
        who: Principal,
        *,
        raw_specification: str | None = None,
        definition: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> str:
        self._require_to_start(who, name)
        source = name or "<api>"
        parsed, raw = self._parse(raw_specification, definition, source)
        return self.engine.submit(who, parsed, raw, name or "workflow")

    async def start_workflow_async(
        self,
        who: Principal,
        *,
        raw_specification: str | None = None,
        definition: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> StartedWorkflow:
        """:meth:`start_workflow` for the transports: parsing and pinning images (registry
        round trips) run in a worker thread, so the event loop keeps serving meanwhile. The
        reply carries the file's warnings, which the caller is shown."""
        self._require_to_start(who, name)
        source = name or "<api>"

        def prepare() -> tuple[ParsedWorkflow, str, PreparedSubmission]:
            # one hop to the worker for both: each hop and its return to the loop cost a
            # hello-world ~0.3 ms of latency and the loop a callback
            parsed, raw = self._parse(raw_specification, definition, source)
            return parsed, raw, self.engine.prepare(who, parsed)

        # in the submissions' own threads, with this call's context (as asyncio.to_thread)
        context = contextvars.copy_context()
        parsed, raw, prepared = await asyncio.get_running_loop().run_in_executor(
            preparers(), context.run, prepare
        )
        # stored with the other submissions that reach the loop in the same turn: one
        # transaction for all of them (Engine.submit_async)
        workflow_id = await self.engine.submit_async(
            who, parsed, raw, name or "workflow", prepared=prepared
        )
        return StartedWorkflow(workflow_id, tuple(parsed.warnings))

    def _require_to_start(self, who: Principal, name: str | None) -> None:
        """PermissionDenied unless ``who`` runs workflows (the cluster's monitoring and
        provisioner accounts do not, whatever their tokens are trusted with); a set lookup on
        the principal, nothing more: submissions pay it every time (the refusal's target is
        made only for a refusal)."""
        if not may_start_workflows(who):
            self._require(
                who, Permission.RUN_WORKFLOWS, "start workflows", f"workflow {name or 'workflow'}"
            )

    def validate_workflow(
        self,
        who: Principal,
        *,
        raw_specification: str | None = None,
        definition: Mapping[str, Any] | None = None,
    ) -> list[str]:
        parsed, _ = self._parse(raw_specification, definition, "<api>")
        return list(parsed.warnings)

    def _owned(self, session: Session, who: Principal, workflow_id: str) -> Workflow:
        """The workflow if ``who`` may see it; otherwise NotFound, worded exactly as for an
        id that does not exist, so that nobody learns another account's workflow ids."""
        workflow = session.get(Workflow, workflow_id)
        if workflow is None:
            raise NotFound(f"workflow {workflow_id} not found")
        if sees_workflows_of(who, workflow.account_id):
            return workflow
        if not _forwards(who) or not sees_workflows_of(
            who, workflow.account_id, federate_account_id=_federate_of(session, workflow)
        ):
            raise NotFound(f"workflow {workflow_id} not found")
        return workflow

    def _controlled(
        self, session: Session, who: Principal, workflow_id: str, doing: str
    ) -> Workflow:
        """The workflow if ``who`` may act on it (``doing``: stop it), not only see it, as
        :meth:`lacks_to_control_workflow` says; the refusal audited. NotFound as
        :meth:`_owned` for one it may not see."""
        target = f"workflow {workflow_id}"
        # refused before the lookup: without it nothing is controlled, seen or not
        self._require(who, Permission.RUN_WORKFLOWS, doing, target)
        workflow = self._owned(session, who, workflow_id)
        if self._lacks_to_control(session, who, workflow) is not None:
            # RUN_WORKFLOWS is held (above): what is lacking is administering the cluster
            self._require(who, Permission.ADMINISTER_CLUSTER, f"{doing} of another account", target)
        return workflow

    def _lacks_to_control(
        self, session: Session, who: Principal, workflow: Workflow
    ) -> Permission | None:
        """:func:`~fuzzball_core.service.permissions.lacks_to_control_workflow` for a
        workflow ``who`` sees: its own are those :func:`works_with_workflows_of` names."""
        its_own = works_with_workflows_of(
            who,
            workflow.account_id,
            federate_account_id=_federate_of(session, workflow) if _forwards(who) else None,
        )
        return lacks_to_control_workflow(who, its_own=its_own)

    def lacks_to_control_workflow(self, who: Principal, workflow_id: str) -> Permission | None:
        """The permission ``who`` lacks to stop or rerun the workflow (None: it may), as
        :meth:`stop_workflow` would refuse it; nothing is audited (a question, not an
        attempt). NotFound as :meth:`get_workflow` for one it may not see."""
        with self.sessions() as session:
            workflow = self._owned(session, who, workflow_id)
            return self._lacks_to_control(session, who, workflow)

    def list_workflows_page(
        self,
        who: Principal,
        *,
        order: str = "submitted",
        ascending: bool = False,
        status: str | None = None,
        name: str | None = None,
        after: tuple[float, str] | None = None,
        limit: int = 50,
    ) -> tuple[list[WorkflowView], tuple[float, str] | None]:
        """One page of the caller's workflows (views without stages or file), keyset-paged
        so that any page costs what the first does, and the key of the next page's start.

        ``order`` is ``submitted`` (created_at) or ``started`` (started_at; one never started
        sorts as 0), ties broken by id; ``after`` is the (key, id) a previous page returned.
        ``status`` keeps one status, ``name`` the names containing it (any case). The key
        returned is None when this page is the last.
        """
        if order not in WORKFLOW_ORDERS:
            raise InvalidArgument(f"order: must be one of {', '.join(WORKFLOW_ORDERS)}")
        key = WORKFLOW_ORDERS[order]
        query = select(Workflow).options(
            defer(Workflow.raw_specification), defer(Workflow.definition_v4)
        )
        seen = workflows_seen_by(who)
        if seen is not None:
            query = query.where(seen)
        if status:
            query = query.where(Workflow.status == status)
        if name:
            pattern = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            query = query.where(Workflow.name.ilike(f"%{pattern}%", escape="\\"))
        if after is not None:
            # (key, id) past the previous page's last row, in the listing's direction
            past = (
                or_(key > after[0], and_(key == after[0], Workflow.id > after[1]))
                if ascending
                else or_(key < after[0], and_(key == after[0], Workflow.id < after[1]))
            )
            query = query.where(past)
        direction = (
            (key.asc(), Workflow.id.asc()) if ascending else (key.desc(), Workflow.id.desc())
        )
        limit = max(1, min(limit, PAGE))
        with self.sessions() as session:
            page = query.add_columns(key).order_by(*direction).limit(limit + 1)
            rows = list(session.execute(page))
            emails = _emails(session, [w for w, _ in rows[:limit]])
        views = [self._owned_view(_listed_workflow_view(w), emails) for w, _ in rows[:limit]]
        if len(rows) <= limit:
            return views, None
        last, last_key = rows[limit - 1]
        return views, (float(last_key), last.id)

    def get_workflow(self, who: Principal, workflow_id: str) -> WorkflowView:
        with self.sessions() as session:
            workflow = self._owned(session, who, workflow_id)
            stages = session.scalars(
                select(Stage).where(Stage.workflow_id == workflow_id).order_by(Stage.id)
            )
            metering = _stage_metering(session, workflow_id)
            view = _workflow_view(
                workflow, tuple(_stage_view(s, metering.get(s.id)) for s in stages)
            )
            return self._owned_view(view, _emails(session, [workflow]))

    def stop_workflow(self, who: Principal, workflow_id: str) -> str | None:
        with self.sessions() as session:
            self._controlled(session, who, workflow_id, "stop workflows")
        self.engine.stop(workflow_id)
        return None

    def list_events(
        self, who: Principal, workflow_id: str, *, after_seq: int = 0
    ) -> list[EventView]:
        with self.sessions() as session:
            self._owned(session, who, workflow_id)
            rows = session.scalars(
                select(Event)
                .where(Event.workflow_id == workflow_id, Event.seq > after_seq)
                .order_by(Event.seq)
                .limit(PAGE)
            )
            return [_event_view(e) for e in rows]

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
        with self.sessions() as session:
            self._owned(session, who, workflow_id)
            if task_id is not None and stage_name is not None:
                self._check_task(workflow_id, stage_name, task_id)
            query = select(LogChunk).where(
                LogChunk.workflow_id == workflow_id, LogChunk.seq > after_seq
            )
            if stage_name is not None:
                # "hello" and "jobs.hello" both name the job
                full = stage_name if "." in stage_name else f"jobs.{stage_name}"
                query = query.where(LogChunk.stage_name.in_((stage_name, full)))
            if task_id is not None:
                query = query.where(LogChunk.task_id == task_id)
            if tail is not None:
                if tail <= 0:
                    return []
                # counted back from the real end, not from the end of a first page
                first = session.scalar(
                    query.with_only_columns(LogChunk.seq)
                    .order_by(LogChunk.seq.desc())
                    .offset(tail - 1)
                    .limit(1)
                )
                if first is not None:
                    query = query.where(LogChunk.seq >= first)
            rows = session.scalars(
                query.order_by(LogChunk.seq)
                .limit(max(1, min(limit, LOG_PAGE)))
                .execution_options(yield_per=64)
            )
            page: list[LogChunkView] = []
            size = 0
            for c in rows:
                size += len(c.data.encode())
                if page and size > LOG_PAGE_BYTES:
                    break
                page.append(LogChunkView(c.seq, c.time, c.stage_name, c.stream, c.data, c.task_id))
            return page

    def _check_task(self, workflow_id: str, stage_name: str, task_id: int) -> None:
        """InvalidArgument naming ``taskId`` unless ``task_id`` is a task of the task array
        ``stage_name`` (its range from the workflow's plan: a task not yet dispatched has
        no run, and may have output later)."""
        plan = self.engine.plan_of(workflow_id)
        full = stage_name if "." in stage_name else f"jobs.{stage_name}"
        planned = None if plan is None else plan.stages.get(full)
        if planned is None:
            return  # no such job: reading finds nothing, as for any name not found
        tasks = planned.tasks
        if tasks is None:
            raise InvalidArgument(f"taskId: {full} is not a task array (it has no task {task_id})")
        if not tasks.start <= task_id <= tasks.end:
            raise InvalidArgument(
                f"taskId: {full} has tasks {tasks.start} to {tasks.end}, not {task_id}"
            )

    # -- nodes ---------------------------------------------------------------------------------

    def get_node(self, who: Principal, node_id: str) -> NodeView:
        self._require(who, Permission.READ_NODES, "read nodes", f"node {node_id}")
        with self.sessions() as session:
            node = (
                session.get(Node, node_id)
                or session.scalars(select(Node).where(Node.name == node_id)).first()
            )
            if node is None:
                raise NotFound(f"node {node_id} not found")
            return self._node_view(session, node, who, self._node_memory([node.id], [node]))

    def _node_view(
        self,
        session: Session,
        node: Node,
        who: Principal,
        memory: NodeUsageCopy,
        *,
        holds: tuple[HoldView, ...] | None = None,
        labels: dict[int, str] | None = None,
    ) -> NodeView:
        """The node as ``who`` sees it, with ``memory``'s usage and last-heard time;
        ``holds`` and ``labels`` (run id -> its running stage) when the caller loaded them for
        many nodes at once."""
        usage = memory.usages.get(node.id)
        if labels is None:
            run_ids = _run_ids(usage.job_ids) if usage else []
            labels = _run_labels(read_owners(session, run_ids), who)
        if holds is None:
            holds = tuple(
                _hold_view(h)
                for h in session.scalars(
                    select(NodeHold).where(NodeHold.node_id == node.id).order_by(NodeHold.id)
                )
            )
        return _node_view_of(node, usage, memory.last_seen(node.id, node.last_seen), holds, labels)

    def list_node_events(
        self, who: Principal, node_ref: str, *, after_seq: int = 0
    ) -> list[EventView]:
        """The node's event log (registration, holds, allocations, deprovisioning), oldest
        first. Allocations of workflows the caller may not see are left out."""
        self._require(who, Permission.READ_NODES, "read node events", f"node {node_ref}")
        with self.sessions() as session:
            node = self.engine.find_node(session, node_ref)
            query = (
                select(Event, Workflow.account_id)
                .outerjoin(Workflow, Workflow.id == Event.workflow_id)
                .where(Event.node_id == node.id, Event.seq > after_seq)
                .order_by(Event.seq)
                .limit(PAGE)
            )
            return [
                _event_view(e)
                for e, owner in session.execute(query)
                if owner is None or sees_workflows_of(who, owner)
            ]

    # -- holds -------------------------------------------------------------------------------

    def hold_source(self, who: Principal) -> str:
        """Who a caller places holds as: the monitoring and provisioner service accounts as
        themselves, anyone else holding :attr:`Permission.HOLD_NODES` (cluster
        administrators) as ``admin``. ``PermissionDenied`` naming the permission for anyone
        without it, whatever its name or kind."""
        self._require(who, Permission.HOLD_NODES, "place or release node holds", "nodes")
        if who.kind in SERVICE_HOLD_SOURCES:
            return SERVICE_HOLD_SOURCES[AccountKind(who.kind)]
        return "admin"

    def add_hold(self, who: Principal, node_ref: str, effect: str, reason: str = "") -> HoldView:
        """Place a hold (cordon, evict or deprovision) on a node as the caller."""
        source = self.hold_source(who)
        hold_id = self.engine.add_hold(node_ref, effect, source, reason, who.name)
        node = self.get_node(who, node_ref)
        hold = next(h for h in node.holds if h.id == hold_id)
        self._audit(
            who,
            AuditAction.HOLD_ADDED,
            _node_target(node),
            detail={"hold": hold.id, "effect": effect, "source": source, "reason": reason},
        )
        return hold

    def list_holds(self, who: Principal, node_ref: str) -> list[HoldView]:
        """Every hold on a node, oldest first."""
        return list(self.get_node(who, node_ref).holds)

    def release_hold(self, who: Principal, node_ref: str, hold_id: int) -> None:
        """Release one hold by id (any source; the caller must be allowed to hold nodes)."""
        self.hold_source(who)
        self.engine.release_holds(node_ref, hold_id=hold_id, released_by=who.name)
        target = _node_target(self.get_node(who, node_ref))
        self._audit(who, AuditAction.HOLD_RELEASED, target, detail={"hold": hold_id})

    def uncordon(self, who: Principal, node_ref: str) -> int:
        """Release the node's admin cordon holds only; return how many were released."""
        self.hold_source(who)
        released = self.engine.release_holds(
            node_ref, effect="cordon", source="admin", released_by=who.name
        )
        if released:
            self._audit(
                who,
                AuditAction.HOLD_RELEASED,
                _node_target(self.get_node(who, node_ref)),
                detail={"effect": "cordon", "source": "admin", "released": released},
            )
        return released

    def remove_node(self, who: Principal, node_ref: str) -> None:
        """Clear an offline node's record and release its holds."""
        self.hold_source(who)
        self.engine.remove_node(node_ref)

    # -- why -----------------------------------------------------------------------------------

    def explain_workflow(
        self, who: Principal, workflow_id: str, *, include_finished: bool = False
    ) -> list[StageExplanation]:
        """Why each stage is where it is, in ``workflow describe`` order; waiting stages only
        unless ``include_finished``."""
        with self.sessions() as session:
            self._owned(session, who, workflow_id)
            stages = list(
                session.scalars(
                    select(Stage).where(Stage.workflow_id == workflow_id).order_by(Stage.id)
                )
            )
            by_name = {stage.name: stage for stage in stages}
            explanations = []
            for stage in stages:
                if stage.status in TERMINAL and not include_finished:
                    continue
                explanations.append(self._explain(session, stage, by_name))
            return explanations

    def _explain(
        self, session: Session, stage: Stage, by_name: dict[str, Stage]
    ) -> StageExplanation:
        def explained(reason: str, message: str, start: float | None = None) -> StageExplanation:
            return StageExplanation(stage.name, stage.kind, stage.status, reason, message, start)

        if stage.status in TERMINAL:
            return explained(stage.status, stage.message or stage.status.lower())
        diagnosis = self.engine.waiting_diagnosis(stage.id)
        if diagnosis is not None:
            return explained(diagnosis.reason.value, diagnosis.message, diagnosis.estimated_start)
        live = list(
            session.scalars(select(Run).where(Run.stage_id == stage.id, Run.status.in_(LIVE_RUN)))
        )
        if live:
            node_ids = {n for run in live for n in run.node_ids}
            names = sorted(
                session.scalars(select(Node.name).where(Node.id.in_(node_ids)))
            ) or sorted(node_ids)
            notes = "".join(
                f"; {note}" for run in live if (note := self.engine.placement_note(run.id))
            )
            if any(run.status == Status.STARTED for run in live):
                return explained("RUNNING", f"running on {', '.join(names)}{notes}")
            return explained("STARTING", f"placed on {', '.join(names)}; starting{notes}")
        waiting = self._unmet_dependencies(session, stage, by_name)
        if waiting:
            return explained("WAITING_ON_DEPENDENCY", "waiting for " + ", ".join(waiting))
        return explained("WAITING", "ready; waiting for the next scheduling pass")

    def _unmet_dependencies(
        self, session: Session, stage: Stage, by_name: dict[str, Stage]
    ) -> list[str]:
        plan = self.engine.plan_of(stage.workflow_id)
        if plan is None:
            return []
        unmet = []
        for edge in plan.dependencies_of(stage.name):
            source = by_name.get(edge.source)
            status = source.status if source is not None else "?"
            wanted = {"on-failure": "fail", "on-end": "end"}.get(edge.condition.value, "finish")
            if status not in TERMINAL:
                unmet.append(f"{edge.source} to {wanted} (now {status})")
            elif (
                edge.condition is Condition.ON_END
                and source is not None
                and session.scalar(
                    select(Run.id)
                    .where(Run.stage_id == source.id, Run.status.in_(LIVE_RUN))
                    .limit(1)
                )
            ):
                # a service's stage ends before its container has stopped: egress waits for it
                unmet.append(f"{edge.source}'s container to stop")
        return unmet


def sees_workflows_of(
    who: Principal, account_id: str, *, federate_account_id: str | None = None
) -> bool:
    """Whether ``who`` may see the workflows of account ``account_id``: those of the account
    it works in, or, with :attr:`Permission.READ_CLUSTER` (cluster administrators, the
    ``admin`` service account), every account's of every organization.

    The others are those :func:`works_with_workflows_of` names."""
    return works_with_workflows_of(
        who, account_id, federate_account_id=federate_account_id
    ) or who.may(Permission.READ_CLUSTER)


def works_with_workflows_of(
    who: Principal, account_id: str, *, federate_account_id: str | None = None
) -> bool:
    """Whether the workflows of account ``account_id`` are ``who``'s own to follow and stop,
    not merely to read (as :attr:`Permission.READ_CLUSTER` shows every account's): those of
    the account it works in.

    A Federate's caller (``who.forwarded_by``) also has those the Federate submitted in its
    own account before each caller had an account here (Federate tells its callers' apart for
    those); a Federate's own account, those of the accounts kept for its callers, when the
    account's ``federate_account_id`` (given) names it."""
    if account_id == who.account_id:
        return True
    if who.forwarded_by is not None:
        return account_id == who.forwarded_by
    return federate_account_id is not None and federate_account_id == who.account_id


def _federate_of(session: Session, workflow: Workflow) -> str | None:
    """The Federate account whose caller's account runs ``workflow`` (None: no caller's)."""
    owner = session.get(Account, workflow.account_id)
    return owner.federate_account_id if owner is not None else None


def _forwards(who: Principal) -> bool:
    """Whether ``who`` is a Federate's own account (it sees its callers' workflows)."""
    return who.kind == AccountKind.FEDERATE and who.forwarded_by is None


def workflows_seen_by(who: Principal) -> ColumnElement[bool] | None:
    """The condition :func:`sees_workflows_of` puts on ``Workflow.account_id``, for a
    query; None when ``who`` sees every workflow."""
    if who.may(Permission.READ_CLUSTER):
        return None
    accounts = [who.account_id] if who.forwarded_by is None else [who.account_id, who.forwarded_by]
    seen: ColumnElement[bool] = Workflow.account_id.in_(accounts)
    if _forwards(who):
        callers = select(Account.id).where(Account.federate_account_id == who.account_id)
        seen = or_(seen, Workflow.account_id.in_(callers))
    return seen


def _run_ids(job_ids: Iterable[str]) -> list[int]:
    """The run ids among the scheduler's job keys (``run-<id>``)."""
    return [int(key.removeprefix("run-")) for key in job_ids if key.startswith("run-")]


def _stages(job_ids: Iterable[str], labels: Mapping[int, str]) -> tuple[str, ...]:
    """The running stages a node's view names: ``labels`` of its runs, by run id."""
    run_ids = _run_ids(job_ids)
    if len(run_ids) > 1:
        run_ids.sort()
    return tuple(labels[r] for r in run_ids if r in labels)


def _run_labels(owners: Mapping[int, RunOwner], who: Principal) -> dict[int, str]:
    """Run id -> ``<workflow id>/<stage name>[/<task>]`` of runs the scheduler holds, for
    the runs ``who`` may see (its own; an administrator's, every one); each run of another
    account is :data:`IN_USE`, so the node's use shows and nothing else of it."""
    # asked once an account, not once a run (an array's runs are all one account's)
    accounts = {owner.account_id: owner.federate_account_id for owner in owners.values()}
    seen = {
        account: _sees_runs_of(who, account, federate) for account, federate in accounts.items()
    }
    return {
        run_id: owner.label if seen[owner.account_id] else IN_USE
        for run_id, owner in owners.items()
    }


def _sees_runs_of(who: Principal, account_id: str, federate_account_id: str | None) -> bool:
    """Whether a node view shows ``who`` the runs of account ``account_id``: those of the
    workflows it sees, and, to a Federate's caller (reading nodes: the Federate's
    administrators), the runs of each caller of that Federate, which the Federate shows each
    of its callers only for their own workflows (by its record of whose each is)."""
    if sees_workflows_of(who, account_id, federate_account_id=federate_account_id):
        return True
    return who.forwarded_by is not None and federate_account_id == who.forwarded_by


def _node_view_of(
    node: NodeColumns,
    usage: UsageShown | None,
    last_seen: float | None,
    holds: tuple[HoldView, ...],
    labels: Mapping[int, str],
) -> NodeView:
    """A node's view: its columns, the scheduler's ``usage`` of it (its running stages named
    by ``labels``, run id -> stage, the runs not in it left out), its holds and when it was
    last heard.

    The view is made from the dict of its fields at once: ``NodeView`` is frozen, and its
    generated ``__init__`` sets each of its 14 fields through ``object.__setattr__``, 7 µs a
    view here against 1.5 (a third of a 500-node list's CPU). Every field is set, so it is
    the view ``NodeView(**fields)`` would make (a test compares the two)."""
    stages: tuple[str, ...] = ()
    if usage is None:
        used_cores, used_memory, used_devices = 0, 0, {}
    else:
        used_cores, used_memory = usage.used_cores, usage.used_memory
        used_devices = dict(usage.used_devices)
        if usage.job_ids:
            stages = _stages(usage.job_ids, labels)
    view = object.__new__(NodeView)
    object.__setattr__(
        view,
        "__dict__",
        {
            "id": node.id,
            "name": node.name,
            "status": node.status,
            "cores": node.cores,
            "memory": node.memory,
            "devices": dict(node.devices or {}),
            "annotations": dict(node.annotations or {}),
            "used_cores": used_cores,
            "used_memory": used_memory,
            "used_devices": used_devices,
            "registered_at": node.registered_at,
            "last_seen": last_seen,
            "stages": stages,
            "holds": holds,
        },
    )
    return view


def _hold_view(h: NodeHold) -> HoldView:
    return HoldView(h.id, h.node_id, h.effect, h.source, h.reason, h.placed_by, h.placed_at)


class NodeColumns(Protocol):
    """What a node's view is made of: a :class:`Node` row, or a :class:`ListedNode`."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def cores(self) -> int: ...
    @property
    def memory(self) -> int: ...
    @property
    def devices(self) -> dict[str, int]: ...
    @property
    def annotations(self) -> dict[str, str]: ...
    @property
    def registered_at(self) -> float: ...
    @property
    def last_seen(self) -> float | None: ...


class ListedNode(NamedTuple):
    """A node's columns as a node list reads them (``node_rows.LISTED_NODE``)."""

    id: str
    name: str
    status: str
    cores: int
    memory: int
    devices: dict[str, int]
    annotations: dict[str, str]
    registered_at: float
    #: None where the list does not read it (``ListReads(last_heard=False)``)
    last_seen: float | None


class _LastList(NamedTuple):
    """What a node list's views were made of (each the same object the next list compares
    by identity, or equal mappings), and its views."""

    nodes: list[ListedNode]
    memory: NodeUsageCopy
    holds: Mapping[str, tuple[HoldView, ...]]
    labels: Mapping[int, str]
    views: tuple[NodeView, ...]


class KeptNode(NamedTuple):
    """What a node list read of a node and made of it, for the next list: a node whose
    columns and shown usage are the same there gets the same view (views are immutable),
    and the REST body its kept text (``NodeListBody``). Between two lists of a large cluster
    most nodes are unchanged: remaking each one's columns and view cost 5-8 µs a node (30-40
    ms of a list's CPU at 5,000 nodes), comparing them about 1."""

    #: the node's columns as the driver read them
    row: tuple[Any, ...]
    node: ListedNode
    #: what its view shows besides its columns (see ``list_nodes``)
    shown: tuple[Any, ...]
    view: NodeView


def _listed_nodes(
    rows: Iterable[tuple[Any, ...]], kept: Mapping[str, KeptNode]
) -> list[ListedNode]:
    """The rows of ``node_rows.LISTED_NODE`` with their JSON decoded, each distinct text once
    (the views copy what they keep of it); a row as the last list read it (``kept``) is
    that list's node."""
    decoded: dict[str | None, Any] = {None: {}}

    def document(text: str) -> Any:
        decoded[text] = found = json.loads(text)
        return found

    listed: list[ListedNode] = []
    for row in rows:
        before = kept.get(row[0])
        # a row not read again is the tuple the last list kept
        if before is not None and (before.row is row or before.row == row):
            listed.append(before.node)
            continue
        # the texts looked up inline, and no starred unpacking: half the CPU of a call per row
        node_id, name, status, cores, memory, devices, notes, registered_at, last_seen = row
        listed.append(
            ListedNode(
                node_id,
                name,
                status,
                cores,
                memory,
                decoded[devices] if devices in decoded else document(devices),
                decoded[notes] if notes in decoded else document(notes),
                registered_at,
                last_seen,
            )
        )
    return listed


#: the hold columns a node list reads, in :class:`HoldView`'s order
_LISTED_HOLD = (
    NodeHold.id,
    NodeHold.node_id,
    NodeHold.effect,
    NodeHold.source,
    NodeHold.reason,
    NodeHold.placed_by,
    NodeHold.placed_at,
)
_LISTED_HOLDS = select(*_LISTED_HOLD).order_by(NodeHold.id)


def _stage_metering(session: Session, workflow_id: str) -> dict[int, MeteringView]:
    """Each stage's traffic: what every node of every run of it (each attempt, each task)
    reported; stages none of whose runs reported any are absent."""
    reported: dict[int, list[dict[str, int]]] = {}
    rows = session.execute(
        select(Run.stage_id, Run.metering).where(
            Run.workflow_id == workflow_id, Run.metering.is_not(None)
        )
    )
    for stage_id, by_node in rows:
        reported.setdefault(stage_id, []).extend((by_node or {}).values())
    totals = {stage_id: MeteringView.total(counters) for stage_id, counters in reported.items()}
    return {stage_id: total for stage_id, total in totals.items() if total is not None}


def _emails(session: Session, workflows: Iterable[Workflow]) -> dict[str, str]:
    """The email of each user who started one of ``workflows``, by user id."""
    user_ids = {w.user_id for w in workflows if w.user_id}
    if not user_ids:
        return {}
    rows = session.execute(select(User.id, User.email).where(User.id.in_(user_ids)))
    return {user_id: email for user_id, email in rows}


def _workflow_view(workflow: Workflow, stages: tuple[StageView, ...]) -> WorkflowView:
    return WorkflowView(
        id=workflow.id,
        name=workflow.name,
        status=workflow.status,
        account_id=workflow.account_id,
        created_at=workflow.created_at,
        started_at=workflow.started_at,
        finished_at=workflow.finished_at,
        error=workflow.error or "",
        raw_specification=workflow.raw_specification,
        stages=stages,
        annotations=dict(workflow.annotations or {}),
        user_id=workflow.user_id or "",
    )


def _listed_workflow_view(workflow: Workflow) -> WorkflowView:
    """A listing's view: the row's own columns, without the (deferred) file."""
    return WorkflowView(
        id=workflow.id,
        name=workflow.name,
        status=workflow.status,
        account_id=workflow.account_id,
        created_at=workflow.created_at,
        started_at=workflow.started_at,
        finished_at=workflow.finished_at,
        error=workflow.error or "",
        annotations=dict(workflow.annotations or {}),
        user_id=workflow.user_id or "",
    )


def _stage_view(stage: Stage, metering: MeteringView | None = None) -> StageView:
    return StageView(
        id=str(stage.id),
        workflow_id=stage.workflow_id,
        name=stage.name,
        kind=stage.kind,
        status=stage.status,
        node_ids=tuple(stage.node_ids or ()),
        exit_code=stage.exit_code,
        message=stage.message or "",
        attempt=stage.attempt,
        created_at=stage.created_at,
        started_at=stage.started_at,
        finished_at=stage.finished_at,
        task_count=stage.task_count,
        tasks_finished=stage.tasks_finished,
        tasks_failed=stage.tasks_failed,
        tasks_running=stage.tasks_running,
        metering=metering,
    )


def _event_view(event: Event) -> EventView:
    return EventView(
        event.seq,
        event.time,
        event.kind,
        event.message,
        event.workflow_id,
        event.stage_name,
        event.node_id,
        dict(event.data or {}),
    )


def _node_target(node: NodeView) -> str:
    """A node as the audit log names it, whether the caller gave its id or its name:
    ``node NAME (ID)``."""
    return f"node {node.name} ({node.id})"
