"""Service endpoints: the rows behind ``/endpoints/{id}/``, who owns them, and which
workflow's service each one reaches.

A workflow's service declares endpoints (``services.NAME.network.endpoints``). Each one
becomes a row when the workflow is stored (:func:`claim`, in the submission's transaction):
a new row for an ordinary endpoint, living as long as the workflow; the existing row for a
``persistent: true`` one, created beforehand with ``fuzzball endpoint create NAME``
(:func:`create`), which the workflow attaches to. A workflow claiming a persistent endpoint
another live workflow holds takes it over by the endpoint's strategy: ``start`` stops the
previous workflow at once; ``ready`` keeps it serving until the new service is ready
(:func:`complete_takeovers`, run by :mod:`~fuzzball_core.orchestrate.endpoint_keeper`).

Names are an account's own: the endpoint belongs to the account in use (the ``group``
scope), its organization and the user who created it. Other accounts never see it (NotFound,
as if it did not exist).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from fuzzball_core.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from fuzzball_core.orchestrate import progress
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.service.views import Principal
from fuzzball_core.spec import ParsedWorkflow
from fuzzball_core.spec.models import EndpointName, Service
from fuzzball_core.store.models import ServiceEndpoint, Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES

SCOPES = ("user", "group", "organization", "public")
KINDS = ("path", "subdomain")
#: what the proxy speaks to a service (Fuzzball 4.4 limits endpoints to these)
PROTOCOLS = ("http", "https")
STRATEGIES = ("start", "ready")
_NAMES = TypeAdapter(EndpointName)


@dataclass(frozen=True)
class EndpointView:
    """An endpoint as its owner sees it (``fuzzball endpoint describe``)."""

    id: str
    name: str
    scope: str
    type: str
    protocol: str
    persistent: bool
    strategy: str
    workflow_id: str
    service: str
    pending_workflow_id: str
    created_at: float
    updated_at: float


def view(row: ServiceEndpoint) -> EndpointView:
    """The row as its owner sees it."""
    return EndpointView(
        id=row.id,
        name=row.name,
        scope=row.scope,
        type=row.kind,
        protocol=row.protocol,
        persistent=row.persistent,
        strategy=row.strategy,
        workflow_id=row.workflow_id or "",
        service=row.service,
        pending_workflow_id=row.pending_workflow_id or "",
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def check_name(name: str) -> str:
    """``name`` when it is an endpoint name (lowercase letters, digits, ``-``, ``_``)."""
    try:
        return str(_NAMES.validate_python(name))
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise InvalidArgument(f"name: {reason}") from None


def _choice(field: str, value: str, allowed: tuple[str, ...]) -> str:
    chosen = value.lower()
    if chosen not in allowed:
        raise InvalidArgument(f"{field}: must be one of {', '.join(allowed)}")
    return chosen


def create(
    session: Session,
    who: Principal,
    name: str,
    *,
    scope: str = "group",
    kind: str = "path",
    strategy: str = "start",
    now: float,
) -> ServiceEndpoint:
    """Reserve the persistent endpoint ``name`` for the caller's account; AlreadyExists
    when the account has one of that name."""
    check_name(name)
    row = ServiceEndpoint(
        id=str(uuid.uuid4()),
        name=name,
        account_id=who.account_id,
        organization_id=who.organization_id,
        owner_user_id=who.user_id,
        persistent=True,
        scope=_choice("scope", scope, SCOPES),
        kind=_choice("type", kind, KINDS),
        protocol="http",
        strategy=_choice("strategy", strategy, STRATEGIES),
        service="",
        port=0,
        pending_service="",
        pending_port=0,
        created_at=now,
        updated_at=now,
    )
    if _persistent(session, who.account_id, name) is not None:
        raise AlreadyExists(f"endpoint {name} already exists")
    session.add(row)
    session.flush()
    return row


def _persistent(session: Session, account_id: str, name: str) -> ServiceEndpoint | None:
    return session.scalars(
        select(ServiceEndpoint).where(
            ServiceEndpoint.account_id == account_id,
            ServiceEndpoint.name == name,
            ServiceEndpoint.persistent.is_(True),
        )
    ).first()


def _live(session: Session, workflow_id: str | None) -> Workflow | None:
    """The workflow, while it has not ended."""
    if workflow_id is None:
        return None
    workflow = session.get(Workflow, workflow_id)
    return workflow if workflow is not None and workflow.status not in TERMINAL_STATUSES else None


def listed(session: Session, who: Principal, workflow_id: str | None = None) -> list[EndpointView]:
    """The account's persistent endpoints and those of its live workflows (only
    ``workflow_id``'s when given), by name."""
    query = select(ServiceEndpoint).where(ServiceEndpoint.account_id == who.account_id)
    if workflow_id is not None:
        query = query.where(
            or_(
                ServiceEndpoint.workflow_id == workflow_id,
                ServiceEndpoint.pending_workflow_id == workflow_id,
            )
        )
    rows = [
        row
        for row in session.scalars(query)
        if row.persistent or _live(session, row.workflow_id) is not None
    ]
    return [view(row) for row in sorted(rows, key=lambda r: (r.name, r.created_at))]


def plausible_reference(reference: str) -> bool:
    """Whether ``reference`` could name an endpoint (an id or a name: printable, at most 64
    characters); anything else is looked up nowhere (a database refuses a NUL in a query)."""
    return 0 < len(reference) <= 64 and reference.isprintable()


def find(session: Session, who: Principal, reference: str) -> ServiceEndpoint:
    """The caller's endpoint by id, or its persistent endpoint by name; NotFound otherwise
    (another account's endpoint too, as if it did not exist)."""
    if not plausible_reference(reference):
        raise NotFound(f"endpoint {reference[:64]!r} not found")
    row = session.get(ServiceEndpoint, reference)
    if row is None or row.account_id != who.account_id:
        row = _persistent(session, who.account_id, reference)
    if row is None or (not row.persistent and _live(session, row.workflow_id) is None):
        raise NotFound(f"endpoint {reference} not found")
    return row


def delete(session: Session, who: Principal, reference: str) -> None:
    """Delete a persistent endpoint no live workflow serves (FailedPrecondition naming
    the workflow otherwise; a workflow's own endpoints go with it)."""
    row = find(session, who, reference)
    if not row.persistent:
        raise FailedPrecondition(
            f"endpoint {row.name} belongs to workflow {row.workflow_id}; it ends with it"
        )
    for holder in (row.workflow_id, row.pending_workflow_id):
        if _live(session, holder) is not None:
            raise FailedPrecondition(
                f"endpoint {row.name} is served by workflow {holder}; stop it first"
            )
    session.delete(row)


# -- submission ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """One endpoint a workflow's service declares, checked."""

    field: str
    service: str
    name: str
    port: int
    protocol: str
    scope: str | None
    kind: str | None
    persistent: bool


def declared(parsed: ParsedWorkflow, subdomain_problem: str | None = None) -> list[Declared]:
    """The workflow's endpoints; InvalidArgument naming each field this cluster refuses (a
    protocol other than http or https; type subdomain where ``subdomain_problem`` says why
    no subdomain resolves here)."""
    found: list[Declared] = []
    problems: list[tuple[str, str]] = []
    for service_name, service in (parsed.model.services or {}).items():
        found.extend(_of_service(service_name, service, problems))
    if subdomain_problem:
        problems.extend(
            (f"{e.field}.type", f"subdomain: {subdomain_problem}; use type path")
            for e in found
            if e.kind == "subdomain" and not e.persistent
        )
    if problems:
        raise InvalidArgument(
            "; ".join(f"{path}: {message}" for path, message in problems),
            details=[{"field": p, "description": m} for p, m in problems],
        )
    return found


def _of_service(
    service_name: str, service: Service, problems: list[tuple[str, str]]
) -> Iterable[Declared]:
    network = service.network
    if network is None or not network.endpoints:
        return
    ports = {port.name: port.port for port in network.ports or ()}
    for index, endpoint in enumerate(network.endpoints):
        path = f"services.{service_name}.network.endpoints[{index}]"
        protocol = endpoint.protocol or "http"
        if protocol not in PROTOCOLS:
            problems.append(
                (f"{path}.protocol", f"endpoints speak http or https here, not {protocol}")
            )
            continue
        if endpoint.port_name not in ports:
            continue  # spec.references already refused it
        yield Declared(
            field=path,
            service=service_name,
            name=endpoint.name,
            port=ports[endpoint.port_name],
            protocol=protocol,
            scope=endpoint.scope,
            kind=endpoint.type,
            persistent=bool(endpoint.persistent),
        )


def claim(
    ctx: EngineContext,
    tx: Transaction,
    who: Principal,
    parsed: ParsedWorkflow,
    workflow_id: str,
) -> None:
    """Give the newly stored workflow its endpoints: new rows for its own, and its
    persistent ones attached (or, held by another live workflow, taken over by the
    endpoint's strategy). FailedPrecondition naming the field when a persistent endpoint
    does not exist."""
    for endpoint in declared(parsed, ctx.endpoint_urls.subdomain_problem()):
        if not endpoint.persistent:
            _add_own(tx, who, workflow_id, endpoint)
            continue
        row = _persistent(tx.session, who.account_id, endpoint.name)
        if row is None:
            raise FailedPrecondition(
                f"{endpoint.field}.persistent: no persistent endpoint {endpoint.name}; create"
                f" it with `fuzzball endpoint create {endpoint.name}`"
            )
        _take_over(ctx, tx, row, workflow_id, endpoint)


def _add_own(tx: Transaction, who: Principal, workflow_id: str, endpoint: Declared) -> None:
    tx.session.add(
        ServiceEndpoint(
            id=str(uuid.uuid4()),
            name=endpoint.name,
            account_id=who.account_id,
            organization_id=who.organization_id,
            owner_user_id=who.user_id,
            persistent=False,
            scope=endpoint.scope or "group",
            kind=endpoint.kind or "path",
            protocol=endpoint.protocol,
            strategy="start",
            workflow_id=workflow_id,
            service=endpoint.service,
            port=endpoint.port,
            pending_service="",
            pending_port=0,
            created_at=tx.now,
            updated_at=tx.now,
        )
    )


def _take_over(
    ctx: EngineContext,
    tx: Transaction,
    row: ServiceEndpoint,
    workflow_id: str,
    endpoint: Declared,
) -> None:
    # the newest workflow says how it is served: its declared scope, type and protocol
    row.scope = endpoint.scope or row.scope
    row.kind = endpoint.kind or row.kind
    row.protocol = endpoint.protocol
    row.updated_at = tx.now
    previous = _live(tx.session, row.workflow_id)
    if previous is None or row.strategy == "start":
        row.workflow_id, row.service, row.port = workflow_id, endpoint.service, endpoint.port
        row.pending_workflow_id, row.pending_service, row.pending_port = None, "", 0
        if previous is not None:
            progress.stop(
                ctx, tx, previous, f"endpoint {row.name} was taken over by workflow {workflow_id}"
            )
        return
    row.pending_workflow_id = workflow_id
    row.pending_service, row.pending_port = endpoint.service, endpoint.port


def switch(tx: Transaction, row: ServiceEndpoint, drain: float) -> None:
    """A ``ready`` takeover's new service is ready: the endpoint reaches it from now on,
    and the previous workflow is stopped ``drain`` seconds later (:func:`retire_due`)."""
    row.retiring_workflow_id = row.workflow_id
    row.retire_at = tx.now + drain
    row.workflow_id, row.service, row.port = (
        row.pending_workflow_id,
        row.pending_service,
        row.pending_port,
    )
    row.pending_workflow_id, row.pending_service, row.pending_port = None, "", 0
    row.updated_at = tx.now


def pending_takeovers(session: Session) -> list[ServiceEndpoint]:
    """Endpoints a ``ready`` takeover waits on."""
    return list(
        session.scalars(
            select(ServiceEndpoint).where(ServiceEndpoint.pending_workflow_id.is_not(None))
        )
    )


def drop_ended_pending(tx: Transaction, row: ServiceEndpoint) -> bool:
    """Forget a ``ready`` takeover whose workflow ended before it became ready; whether it
    did."""
    if _live(tx.session, row.pending_workflow_id) is not None:
        return False
    row.pending_workflow_id, row.pending_service, row.pending_port = None, "", 0
    return True


def retire_due(ctx: EngineContext, tx: Transaction) -> None:
    """Stop the workflows taken over with ``ready`` whose drain time is over."""
    due = tx.session.scalars(
        select(ServiceEndpoint).where(
            ServiceEndpoint.retiring_workflow_id.is_not(None),
            ServiceEndpoint.retire_at <= tx.now,
        )
    )
    for row in list(due):
        previous = _live(tx.session, row.retiring_workflow_id)
        row.retiring_workflow_id, row.retire_at = None, None
        if previous is not None:
            progress.stop(
                ctx,
                tx,
                previous,
                f"endpoint {row.name} was taken over by workflow {row.workflow_id}",
            )
