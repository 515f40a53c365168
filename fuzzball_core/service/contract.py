"""The service layer's contract: what the gRPC client API and the REST gateway call.

Both transports authenticate the bearer token with :meth:`OrchestrateService.authenticate`,
then call one method per request with the resulting :class:`Principal`. Methods are plain
(synchronous) calls made from Orchestrate's event-loop thread; each is short (database work
only), except :meth:`OrchestrateService.start_workflow_async`, which the transports await.
Errors are ``fuzzball_core.errors`` types, which the transports map to gRPC codes and
google.rpc.Status bodies. Following logs or events is done by the transport, polling with
``after_seq`` until the workflow is terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from fuzzball_core.service.views import (
    EventView,
    HoldView,
    LogChunkView,
    NodeView,
    Principal,
    StageExplanation,
    StartedWorkflow,
    WorkflowView,
)
from fuzzball_core.vocabulary import Permission

if TYPE_CHECKING:
    from fuzzball_core.store.object_cache import ObjectCache

#: Most chunks one read of a workflow's log returns.
LOG_PAGE = 1000
#: Output past which one read of a log stops (it returns at least one chunk): a page of
#: 64 KiB chunks stays well under gRPC's default 4 MiB message limit.
LOG_PAGE_BYTES = 2 * 1024**2


class OrchestrateService(Protocol):
    """Everything a client can ask of Orchestrate."""

    def authenticate(self, token: str) -> Principal:
        """The caller owning ``token``; ``Unauthenticated`` if it is missing or unknown."""

    def forwarded_principal(self, who: Principal, assertion: str) -> Principal:
        """Who ``who`` acts for by a Federate's signed ``assertion`` (the forwarded-identity
        header); ``Unauthenticated`` unless a trusted Federate signed it."""

    def version(self) -> str:
        """The server's version string (``v0.1.0``)."""

    def start_workflow(
        self,
        who: Principal,
        *,
        raw_specification: str | None = None,
        definition: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> str:
        """Validate, plan and store a workflow; return its id.

        Exactly one of ``raw_specification`` (the file's text, sent unchanged) or
        ``definition`` (the parsed document) is given. ``InvalidArgument`` lists every problem
        with its field path; a job no node could ever hold is refused here too.
        """

    async def start_workflow_async(
        self,
        who: Principal,
        *,
        raw_specification: str | None = None,
        definition: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> StartedWorkflow:
        """:meth:`start_workflow` for the transports, which call it on the event loop: the
        slow parts (Orchestrate pins images at registries, Federate asks its members) run in
        worker threads, so the loop keeps serving other requests meanwhile. The reply adds the
        submission's warnings to the id, for the caller to be shown."""

    def validate_workflow(
        self,
        who: Principal,
        *,
        raw_specification: str | None = None,
        definition: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Validate without storing; return the warnings. ``InvalidArgument`` when invalid."""

    def list_workflows(self, who: Principal) -> list[WorkflowView]:
        """The caller's workflows, newest first (views without stages)."""

    def get_workflow(self, who: Principal, workflow_id: str) -> WorkflowView:
        """One workflow with every stage. ``NotFound`` if absent or not the caller's."""

    def stop_workflow(self, who: Principal, workflow_id: str) -> str | None:
        """Cancel every stage not yet finished; running containers are killed. None once
        done; a note for the caller when the stop is recorded but not yet done (Federate,
        whose member does not answer, delivers it when the member answers again)."""

    def lacks_to_control_workflow(self, who: Principal, workflow_id: str) -> Permission | None:
        """The permission ``who`` lacks to stop or rerun the workflow, None when it may:
        exactly what :meth:`stop_workflow` refuses by (the Web UI offers Stop and Rerun by
        it). ``NotFound`` as :meth:`get_workflow`."""

    def list_events(
        self, who: Principal, workflow_id: str, *, after_seq: int = 0
    ) -> list[EventView]:
        """The workflow's events with ``seq > after_seq``, oldest first."""

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
        """One page of the workflow's output (or of one stage / one task): the chunks with
        ``seq > after_seq``, oldest first, at most ``limit`` (up to :data:`LOG_PAGE`) of
        them and no more output than :data:`LOG_PAGE_BYTES` past the first. The next page
        follows the last chunk's seq; an empty page is the end. With ``tail``, the page
        starts at the ``tail``-th chunk from the end of those after ``after_seq``."""

    def list_nodes(self, who: Principal) -> list[NodeView]:
        """Every registered node."""

    def get_node(self, who: Principal, node_id: str) -> NodeView:
        """One node by id or name. ``NotFound`` if unknown."""

    def list_node_events(
        self, who: Principal, node_ref: str, *, after_seq: int = 0
    ) -> list[EventView]:
        """The node's event log (registration, holds, allocations), oldest first."""

    def remove_node(self, who: Principal, node_ref: str) -> None:
        """Clear an offline (or deprovisioned) node's record and release its holds."""

    # -- holds (administrators, and the monitoring and provisioner service accounts) -------

    def list_holds(self, who: Principal, node_ref: str) -> list[HoldView]:
        """Every hold on a node, oldest first."""

    def add_hold(self, who: Principal, node_ref: str, effect: str, reason: str = "") -> HoldView:
        """Place a cordon, evict or deprovision hold, attributed to the caller's source."""

    def release_hold(self, who: Principal, node_ref: str, hold_id: int) -> None:
        """Release one hold by id."""

    def uncordon(self, who: Principal, node_ref: str) -> int:
        """Release the node's admin cordon holds only; return how many were released."""

    # -- diagnostics -------------------------------------------------------------------------

    def explain_workflow(
        self, who: Principal, workflow_id: str, *, include_finished: bool = False
    ) -> list[StageExplanation]:
        """Why each stage is where it is, in ``workflow describe`` order."""


class ObjectCacheService(Protocol):
    """What Orchestrate's object-cache routes need of its service (Federate has no cache).

    ``object_cache`` is None while the process serves none; ``node_token`` is the credential
    of the nodes that read and write it (empty: no node may).
    """

    object_cache: ObjectCache | None
    node_token: str
