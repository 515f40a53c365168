"""Organizations, members, groups and the cluster's users over REST, as Fuzzball's API has them.

Under ``/v3`` (bodies and replies are the swagger's definitions, field for field):

* ``GET``/``PATCH /organization``; ``GET``/``POST /organization/members``;
  ``PUT``/``DELETE /organization/members/{id}``; ``POST /organization/members/{id}/password``;
  ``POST /v2/organization/members`` (AddOrganizationMember that generates a password when none
  is given and answers it once); the organization routes act on the caller's organization, and
  a cluster administrator names another with the ``organizationId`` query parameter;
* ``POST /profile/password``: the caller changes their own password;
* ``GET``/``POST /accounts``; ``GET``/``PATCH``/``DELETE /accounts/{id}``;
  ``GET``/``POST``/``PUT /accounts/{id}/members``; ``DELETE /accounts/{id}/members/{userId}``;
  ``GET /accounts/{id}/token`` (an account-scoped API token for the signed-in user);
* ``GET``/``POST /admin/users``, ``GET``/``PATCH``/``DELETE /admin/users/{id}`` (cluster
  administrators);
* this project's own, for ``fuzzball admin``: ``GET``/``POST /admin/organizations``,
  ``GET``/``POST /admin/service-accounts`` and ``GET /admin/audit``.

Lists page with ``pageSize`` and ``pageToken``; ``orderBy`` and ``filter`` are refused (each
list has one order, said in its route's description). A body field the route does not know
is refused, naming it, rather than ignored. Each handler declares its body and reply for the
OpenAPI document (:mod:`~fuzzball_core.orchestrate.identity_schemas`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiohttp import web

from fuzzball_core.api.json_body import parse_json_body
from fuzzball_core.api.list_pages import page_size, paged, refuse_unknown
from fuzzball_core.api.openapi import documented
from fuzzball_core.api.rest import ExtraRoutes
from fuzzball_core.errors import FuzzballError, InvalidArgument, PermissionDenied, Unauthenticated
from fuzzball_core.orchestrate import identity_schemas as schema
from fuzzball_core.service.audit import MAX_PAGE_SIZE, AuditEntryView, AuditQuery
from fuzzball_core.service.identity import BAD_CREDENTIALS, Identity, group_relationship
from fuzzball_core.service.identity_views import (
    AccountView,
    MemberView,
    OrganizationView,
    UserView,
)
from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import AccountRelationship, AuditAction, OrganizationRole

T = TypeVar("T")
Handler = Callable[[web.Request], Any]


def identity_routes(identity: Identity) -> ExtraRoutes:
    """The identity routes over ``identity``, for the REST gateway."""
    return ExtraRoutes(
        add=lambda app, base, principal_of: IdentityRoutes(identity, principal_of).add(app, base)
    )


# -- wire forms ----------------------------------------------------------------------------------


def timestamp(seconds: float | None) -> str | None:
    """``seconds`` since the epoch as the proto3 JSON Timestamp (RFC 3339, UTC)."""
    if seconds is None:
        return None
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _present(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` without the unset ones (proto3 JSON leaves them out)."""
    return {key: value for key, value in fields.items() if value not in (None, "")}


def organization_json(organization: OrganizationView) -> dict[str, Any]:
    """The swagger's Organization."""
    return _present(
        {
            "id": organization.id,
            "name": organization.name,
            "createTime": timestamp(organization.created_at),
            "updateTime": timestamp(organization.updated_at),
        }
    )


def user_json(user: UserView, relationship: str | None = None) -> dict[str, Any]:
    """The swagger's User, with the member's ``relationship`` (their organization role, or
    their relationship to the account listed) and ``clusterAdmin`` (as UserProfile has it)."""
    return _present(
        {
            "id": user.id,
            "email": user.email,
            "name": user.name,
            "createTime": timestamp(user.created_at),
            "updateTime": timestamp(user.updated_at),
            "lastActiveTime": timestamp(user.last_login_at),
            "relationship": relationship or user.role,
        }
    ) | {"clusterAdmin": user.cluster_admin}


def admin_user_json(user: UserView) -> dict[str, Any]:
    """The swagger's AdminUser (``username`` is the sign-in email)."""
    return _present(
        {
            "id": user.id,
            "username": user.email,
            "createTime": timestamp(user.created_at),
            "updateTime": timestamp(user.updated_at),
            "lastLoginTime": timestamp(user.last_login_at),
        }
    )


def account_json(account: AccountView) -> dict[str, Any]:
    """The swagger's Account."""
    return _present(
        {
            "id": account.id,
            "name": account.name,
            "createTime": timestamp(account.created_at),
            "updateTime": timestamp(account.updated_at),
        }
    )


def service_account_json(account: AccountView) -> dict[str, Any]:
    """A service account: an Account with its ``kind``."""
    return account_json(account) | {"kind": account.kind}


def audit_entry_json(entry: AuditEntryView) -> dict[str, Any]:
    """One audit log entry."""
    return _present(
        {
            "seq": str(entry.seq),
            "time": timestamp(entry.at),
            "action": entry.action,
            "outcome": entry.outcome,
            "actor": entry.actor,
            "actorId": entry.actor_id,
            "organizationId": entry.organization_id,
            "target": entry.target,
            "source": entry.source,
        }
    ) | {"detail": dict(entry.detail)}


# -- reading requests ----------------------------------------------------------------------------


async def body_fields(request: web.Request, known: Mapping[str, type]) -> dict[str, Any]:
    """The request's JSON object, each field of the type ``known`` gives it; InvalidArgument
    naming a field it does not know, or one of the wrong type."""
    body = parse_json_body(await request.read())
    if not isinstance(body, dict):
        raise InvalidArgument("request body: expected a JSON object")
    unknown = sorted(set(body) - set(known))
    if unknown:
        raise InvalidArgument(
            f"request body: unknown field {unknown[0]!r} (this request takes "
            f"{', '.join(known) or 'no fields'})"
        )
    for name, value in body.items():
        expected = known[name]
        if value is not None and not (
            isinstance(value, expected) and not (expected is not bool and isinstance(value, bool))
        ):
            kind = {str: "a string", bool: "true or false"}.get(expected, expected.__name__)
            raise InvalidArgument(f"{name}: expected {kind}")
    return {name: value for name, value in body.items() if value is not None}


def query_bool(request: web.Request, name: str) -> bool | None:
    """The boolean query parameter ``name`` (None: absent)."""
    value = request.query.get(name)
    if value is None or value == "":
        return None
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise InvalidArgument(f"{name}: expected true or false, got {value[:40]!r}")


def query_float(request: web.Request, name: str) -> float | None:
    """The query parameter ``name`` as seconds since the epoch or an RFC 3339 time."""
    value = request.query.get(name, "")
    if not value:
        return None
    if len(value) > 40:
        raise InvalidArgument(f"{name}: expected a time, got {len(value)} characters")
    try:
        return float(value) if value.replace(".", "", 1).isdigit() else _rfc3339(value)
    except ValueError:
        raise InvalidArgument(
            f"{name}: expected an RFC 3339 time or seconds since the epoch, got {value[:40]!r}"
        ) from None


def _rfc3339(value: str) -> float:
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def relationship_query(request: web.Request) -> str | None:
    """The ``relationship`` query parameter (None: absent)."""
    return request.query.get("relationship") or None


def _source(request: web.Request) -> str:
    return request.remote or ""


# -- the routes ----------------------------------------------------------------------------------

#: what the audit log is filtered by, and every query parameter it takes
_AUDIT_FILTERS = ("action", "actor", "organizationId", "outcome", "since", "until")
_AUDIT_PARAMETERS = (*_AUDIT_FILTERS, "orderBy", "pageSize", "pageToken")

#: what changing a member takes, in the query (the swagger's) or in a JSON body
_MEMBER_UPDATE_FIELDS: dict[str, type] = {
    "relationship": str,
    "updateRelationship": bool,
    "clusterAdmin": bool,
}

_MEMBER_FIELDS: dict[str, type] = {
    "email": str,
    "relationship": str,
    "password": str,
    "requireUpdatePassword": bool,
    "clusterAdmin": bool,
}


class IdentityRoutes:
    """The handlers, over one :class:`Identity`; ``principal_of`` finds a request's caller."""

    def __init__(
        self, identity: Identity, principal_of: Callable[[web.Request], Principal]
    ) -> None:
        self.identity = identity
        self.principal_of = principal_of

    def add(self, app: web.Application, base: str) -> None:
        """Register every route under ``base`` (``/v3``)."""
        routes: list[tuple[str, str, Handler]] = [
            ("GET", "/organization", self.get_organization),
            ("PATCH", "/organization", self.update_organization),
            ("GET", "/organization/members", self.list_members),
            ("POST", "/organization/members", self.add_member),
            ("PUT", "/organization/members/{id}", self.update_member),
            ("DELETE", "/organization/members/{id}", self.remove_member),
            ("POST", "/organization/members/{id}/password", self.reset_password),
            ("POST", "/v2/organization/members", self.add_member_v2),
            ("POST", "/profile/password", self.change_password),
            ("GET", "/accounts", self.list_accounts),
            ("POST", "/accounts", self.create_account),
            ("GET", "/accounts/{id}", self.get_account),
            ("PATCH", "/accounts/{id}", self.update_account),
            ("DELETE", "/accounts/{id}", self.delete_account),
            ("GET", "/accounts/{id}/members", self.list_account_members),
            ("POST", "/accounts/{id}/members", self.add_account_member),
            ("PUT", "/accounts/{id}/members", self.update_account_member),
            ("DELETE", "/accounts/{id}/members/{userId}", self.remove_account_member),
            ("GET", "/accounts/{id}/token", self.account_token),
            ("GET", "/admin/users", self.list_users),
            ("POST", "/admin/users", self.create_user),
            ("GET", "/admin/users/{id}", self.get_user),
            ("PATCH", "/admin/users/{id}", self.update_user),
            ("DELETE", "/admin/users/{id}", self.delete_user),
            ("GET", "/admin/organizations", self.list_organizations),
            ("POST", "/admin/organizations", self.create_organization),
            ("GET", "/admin/service-accounts", self.list_service_accounts),
            ("POST", "/admin/service-accounts", self.create_service_account),
            ("GET", "/admin/audit", self.list_audit),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, base + path, handler)

    async def _call(self, request: web.Request, call: Callable[[Principal], T]) -> T:
        """``call(caller)`` in a worker thread: password hashing and the store's round trips
        do not hold up the event loop. A refusal for want of a permission is audited."""
        who = self.principal_of(request)
        try:
            return await asyncio.to_thread(call, who)
        except PermissionDenied as refused:
            await asyncio.to_thread(
                self.identity.audit.record,
                AuditAction.PERMISSION_DENIED,
                actor=who.email or who.name,
                actor_id=who.user_id or who.account_id,
                organization_id=who.organization_id,
                target=f"{request.method} {request.path}",
                outcome="denied",
                source=_source(request),
                detail={"reason": refused.message},
            )
            raise

    # -- the organization ----------------------------------------------------------------------

    @documented(schema.GET_ORGANIZATION)
    async def get_organization(self, request: web.Request) -> web.Response:
        organization_id = request.query.get("organizationId") or None
        found = await self._call(
            request, lambda who: self.identity.get_organization(who, organization_id)
        )
        return web.json_response(organization_json(found))

    @documented(schema.UPDATE_ORGANIZATION)
    async def update_organization(self, request: web.Request) -> web.Response:
        fields = await body_fields(request, {"name": str})
        organization_id = request.query.get("organizationId") or None
        updated = await self._call(
            request,
            lambda who: self.identity.update_organization(
                who, name=fields.get("name", ""), organization_id=organization_id
            ),
        )
        return web.json_response(organization_json(updated))

    @documented(schema.LIST_MEMBERS)
    async def list_members(self, request: web.Request) -> web.Response:
        organization_id = request.query.get("organizationId") or None
        role = relationship_query(request)
        members = await self._call(
            request,
            lambda who: self.identity.list_members(who, role=role, organization_id=organization_id),
        )
        page, token = paged(request.query, members)
        return web.json_response(
            _present({"pageToken": token}) | {"users": [user_json(u) for u in page]}
        )

    async def _add_member(
        self, request: web.Request, *, password_required: bool
    ) -> tuple[UserView, str | None]:
        fields = await body_fields(request, _MEMBER_FIELDS)
        if password_required and not fields.get("password"):
            raise InvalidArgument(
                "password: AddOrganizationMember requires a password (or use"
                " /v3/v2/organization/members, which generates one)"
            )
        organization_id = request.query.get("organizationId") or None
        return await self._call(
            request,
            lambda who: self.identity.add_member(
                who,
                fields.get("email", ""),
                role=fields.get("relationship") or OrganizationRole.MEMBER,
                password=fields.get("password"),
                cluster_admin=fields.get("clusterAdmin", False),
                require_update=fields.get("requireUpdatePassword", False),
                organization_id=organization_id,
            ),
        )

    @documented(schema.ADD_MEMBER)
    async def add_member(self, request: web.Request) -> web.Response:
        user, _ = await self._add_member(request, password_required=True)
        return web.json_response(user_json(user))

    @documented(schema.ADD_MEMBER_V2)
    async def add_member_v2(self, request: web.Request) -> web.Response:
        user, generated = await self._add_member(request, password_required=False)
        return web.json_response(
            {"user": user_json(user)} | _present({"generatedPassword": generated})
        )

    @documented(schema.UPDATE_MEMBER)
    async def update_member(self, request: web.Request) -> web.Response:
        user_id = request.match_info["id"]
        # the swagger has them in the query; a body giving them (as a JSON client would) is
        # honoured the same, never taken for success while ignored
        sent = await body_fields(request, _MEMBER_UPDATE_FIELDS) if request.can_read_body else {}
        for name in sent:
            if request.query.get(name):
                raise InvalidArgument(f"{name}: given in both the query and the body; give it once")
        change_role = sent.get("updateRelationship", query_bool(request, "updateRelationship"))
        role = sent.get("relationship", relationship_query(request))
        if change_role and not role:
            raise InvalidArgument("relationship: updateRelationship needs the new relationship")
        if role and not change_role:
            raise InvalidArgument(
                "updateRelationship: set it to true to change the member's relationship"
            )
        cluster_admin = sent.get("clusterAdmin", query_bool(request, "clusterAdmin"))
        updated = await self._call(
            request,
            lambda who: self.identity.update_member(
                who, user_id, role=role if change_role else None, cluster_admin=cluster_admin
            ),
        )
        return web.json_response(user_json(updated))

    @documented(schema.REMOVE_MEMBER)
    async def remove_member(self, request: web.Request) -> web.Response:
        user_id = request.match_info["id"]
        await self._call(request, lambda who: self.identity.remove_member(who, user_id))
        return web.json_response({})

    @documented(schema.RESET_PASSWORD)
    async def reset_password(self, request: web.Request) -> web.Response:
        user_id = request.match_info["id"]
        fields = await body_fields(request, {"newPassword": str, "requireUpdatePassword": bool})
        generated = await self._call(
            request,
            lambda who: self.identity.reset_password(
                who,
                user_id,
                new_password=fields.get("newPassword"),
                require_update=fields.get("requireUpdatePassword", False),
            ),
        )
        return web.json_response(_present({"generatedPassword": generated}))

    @documented(schema.CHANGE_PASSWORD)
    async def change_password(self, request: web.Request) -> web.Response:
        fields = await body_fields(request, {"currentPassword": str, "newPassword": str})
        for name in ("currentPassword", "newPassword"):
            if not fields.get(name):
                raise InvalidArgument(f"{name}: required")
        try:
            await self._call(
                request,
                lambda who: self.identity.change_password(
                    who,
                    current_password=fields["currentPassword"],
                    new_password=fields["newPassword"],
                    source=_source(request),
                ),
            )
        except Unauthenticated as refused:
            # the caller's token was good: what was refused is the password they sent, which
            # a 401 would have a client take for its sign-in gone bad
            raise current_password_refusal(refused) from None
        return web.json_response({})

    # -- accounts (groups) ---------------------------------------------------------------------

    @documented(schema.LIST_ACCOUNTS)
    async def list_accounts(self, request: web.Request) -> web.Response:
        show = bool(query_bool(request, "showUserAccounts"))
        accounts = await self._call(
            request, lambda who: self.identity.list_accounts(who, show_user_accounts=show)
        )
        page, token = paged(request.query, accounts)
        return web.json_response(
            _present({"pageToken": token}) | {"accounts": [account_json(a) for a in page]}
        )

    @documented(schema.CREATE_ACCOUNT)
    async def create_account(self, request: web.Request) -> web.Response:
        fields = await body_fields(request, {"name": str})
        created = await self._call(
            request, lambda who: self.identity.create_account(who, fields.get("name", ""))
        )
        return web.json_response(account_json(created))

    @documented(schema.GET_ACCOUNT)
    async def get_account(self, request: web.Request) -> web.Response:
        account_id = request.match_info["id"]
        found = await self._call(request, lambda who: self.identity.get_account(who, account_id))
        return web.json_response(account_json(found))

    @documented(schema.UPDATE_ACCOUNT)
    async def update_account(self, request: web.Request) -> web.Response:
        account_id = request.match_info["id"]
        fields = await body_fields(request, {"name": str})
        updated = await self._call(
            request,
            lambda who: self.identity.update_account(who, account_id, name=fields.get("name", "")),
        )
        return web.json_response(account_json(updated))

    @documented(schema.DELETE_ACCOUNT)
    async def delete_account(self, request: web.Request) -> web.Response:
        account_id = request.match_info["id"]
        await self._call(request, lambda who: self.identity.delete_account(who, account_id))
        return web.json_response({})

    @documented(schema.LIST_ACCOUNT_MEMBERS)
    async def list_account_members(self, request: web.Request) -> web.Response:
        account_id = request.match_info["id"]
        asked = relationship_query(request)
        # the deprecated ACCOUNT_* spellings filter as their GROUP_* equals, as writes store them
        relationship = group_relationship(asked[:40]).value if asked is not None else None
        members = await self._call(
            request,
            lambda who: self.identity.list_account_members(
                who, account_id, relationship=relationship
            ),
        )
        page, token = paged(request.query, members)
        return web.json_response(
            _present({"pageToken": token}) | {"users": [_member_json(m) for m in page]}
        )

    async def _member_change(self, request: web.Request) -> tuple[str, str, str]:
        fields = await body_fields(request, {"userId": str, "relationship": str})
        if not fields.get("userId"):
            raise InvalidArgument("userId: required")
        relationship = fields.get("relationship") or AccountRelationship.GROUP_MEMBER.value
        return request.match_info["id"], fields["userId"], relationship

    @documented(schema.ADD_ACCOUNT_MEMBER)
    async def add_account_member(self, request: web.Request) -> web.Response:
        account_id, user_id, relationship = await self._member_change(request)
        added = await self._call(
            request,
            lambda who: self.identity.add_account_member(
                who, account_id, user_id, relationship=relationship
            ),
        )
        return web.json_response(_member_json(added))

    @documented(schema.UPDATE_ACCOUNT_MEMBER)
    async def update_account_member(self, request: web.Request) -> web.Response:
        account_id, user_id, relationship = await self._member_change(request)
        changed = await self._call(
            request,
            lambda who: self.identity.update_account_member(
                who, account_id, user_id, relationship=relationship
            ),
        )
        return web.json_response(_member_json(changed))

    @documented(schema.REMOVE_ACCOUNT_MEMBER)
    async def remove_account_member(self, request: web.Request) -> web.Response:
        account_id, user_id = request.match_info["id"], request.match_info["userId"]
        relationship = relationship_query(request)
        await self._call(
            request,
            lambda who: self.identity.remove_account_member(
                who, account_id, user_id, relationship=relationship
            ),
        )
        return web.json_response({})

    @documented(schema.ACCOUNT_TOKEN)
    async def account_token(self, request: web.Request) -> web.Response:
        account_id = request.match_info["id"]
        token = await self._call(
            request,
            lambda who: self.identity.account_token(who, account_id, source=_source(request)),
        )
        return web.json_response({"token": token})

    # -- the cluster's users -------------------------------------------------------------------

    @documented(schema.LIST_USERS)
    async def list_users(self, request: web.Request) -> web.Response:
        users = await self._call(request, self.identity.list_users)
        page, token = paged(request.query, users)
        return web.json_response(
            _present({"pageToken": token}) | {"users": [admin_user_json(u) for u in page]}
        )

    @documented(schema.CREATE_USER)
    async def create_user(self, request: web.Request) -> web.Response:
        fields = await body_fields(request, {"username": str, "password": str})
        if not fields.get("password"):
            raise InvalidArgument("password: required")
        organization_id = request.query.get("organizationId") or None
        created, _ = await self._call(
            request,
            lambda who: self.identity.add_member(
                who,
                fields.get("username", ""),
                password=fields["password"],
                organization_id=organization_id,
            ),
        )
        return web.json_response({"id": created.id})

    @documented(schema.GET_USER)
    async def get_user(self, request: web.Request) -> web.Response:
        user_id = request.match_info["id"]
        found = await self._call(request, lambda who: self.identity.get_user(who, user_id))
        return web.json_response(admin_user_json(found))

    @documented(schema.UPDATE_USER)
    async def update_user(self, request: web.Request) -> web.Response:
        user_id = request.match_info["id"]
        fields = await body_fields(request, {"username": str, "password": str})
        changed = await self._call(
            request,
            lambda who: self.identity.update_user(
                who, user_id, email=fields.get("username"), password=fields.get("password")
            ),
        )
        return web.json_response(admin_user_json(changed))

    @documented(schema.DELETE_USER)
    async def delete_user(self, request: web.Request) -> web.Response:
        user_id = request.match_info["id"]

        def remove(who: Principal) -> None:
            self.identity.get_user(who, user_id)  # cluster administrators only
            self.identity.remove_member(who, user_id)

        await self._call(request, remove)
        return web.json_response({"id": user_id})

    # -- this project's administration routes --------------------------------------------------

    @documented(schema.LIST_ORGANIZATIONS)
    async def list_organizations(self, request: web.Request) -> web.Response:
        organizations = await self._call(request, self.identity.list_organizations)
        page, token = paged(request.query, organizations)
        return web.json_response(
            _present({"pageToken": token}) | {"organizations": [organization_json(o) for o in page]}
        )

    @documented(schema.CREATE_ORGANIZATION)
    async def create_organization(self, request: web.Request) -> web.Response:
        fields = await body_fields(request, {"name": str, "ownerEmail": str, "ownerPassword": str})
        organization, owner, generated = await self._call(
            request,
            lambda who: self.identity.create_organization(
                fields.get("name", ""),
                owner_email=fields.get("ownerEmail", ""),
                owner_password=fields.get("ownerPassword"),
                by=who,
            ),
        )
        return web.json_response(
            {"organization": organization_json(organization), "owner": user_json(owner)}
            | _present({"generatedPassword": generated})
        )

    @documented(schema.LIST_SERVICE_ACCOUNTS)
    async def list_service_accounts(self, request: web.Request) -> web.Response:
        accounts = await self._call(request, self.identity.list_service_accounts)
        page, token = paged(request.query, accounts)
        return web.json_response(
            _present({"pageToken": token}) | {"accounts": [service_account_json(a) for a in page]}
        )

    @documented(schema.CREATE_SERVICE_ACCOUNT)
    async def create_service_account(self, request: web.Request) -> web.Response:
        fields = await body_fields(request, {"name": str, "kind": str})
        created, token = await self._call(
            request,
            lambda who: self.identity.create_service_account(
                fields.get("name", ""), fields.get("kind", ""), by=who
            ),
        )
        return web.json_response(
            {"account": {"id": created.account_id, "name": created.name, "kind": created.kind}}
            | {"token": token}
        )

    @documented(schema.LIST_AUDIT)
    async def list_audit(self, request: web.Request) -> web.Response:
        refuse_unknown(
            request.query,
            _AUDIT_PARAMETERS,
            why="not supported; the audit log is filtered by " + ", ".join(_AUDIT_FILTERS),
        )
        order = request.query.get("orderBy", "")
        if order not in ("", "seq desc", "seq asc", "time desc", "time asc"):
            raise InvalidArgument(
                f"orderBy: {order[:40]!r}; the audit log is ordered by 'time desc' (newest"
                " first, the default) or 'time asc'"
            )
        query = AuditQuery(
            action=request.query.get("action") or None,
            actor=request.query.get("actor") or None,
            organization_id=request.query.get("organizationId") or None,
            outcome=request.query.get("outcome") or None,
            since=query_float(request, "since"),
            until=query_float(request, "until"),
            oldest_first=order.endswith("asc"),
            page_size=page_size(request.query, 50, MAX_PAGE_SIZE),
            page_token=request.query.get("pageToken", ""),
        )
        page = await self._call(request, lambda who: self.identity.audit_page(who, query))
        return web.json_response(
            _present({"pageToken": page.next_page_token})
            | {"entries": [audit_entry_json(e) for e in page.entries]}
        )


def _member_json(member: MemberView) -> dict[str, Any]:
    return user_json(member.user, member.relationship)


def current_password_refusal(refused: Unauthenticated) -> FuzzballError:
    """What a change of one's own password answers when the current password was refused by
    the sign-in check: a wrong one is InvalidArgument naming ``currentPassword``, a user
    locked out PermissionDenied saying until when (never 401: the caller's token is good)."""
    if refused.message == BAD_CREDENTIALS:
        return InvalidArgument("currentPassword: not your current password")
    return PermissionDenied(f"currentPassword: {refused.message}")
