"""The JSON Schemas of the identity routes' bodies and replies, for the OpenAPI document.

They are Fuzzball's swagger definitions (``User``, ``Organization``, ``Account``,
``AddOrganizationMemberRequest``...) as this server writes and reads them: replies list
exactly the fields it sends (a User also carries its ``relationship`` and ``clusterAdmin``),
and request bodies refuse fields they do not define, as the handlers do.
"""

from __future__ import annotations

from typing import Any

from fuzzball_core.api.openapi import JsonOperation, Query
from fuzzball_core.vocabulary import AccountRelationship, AuditAction, OrganizationRole

_STRING: dict[str, Any] = {"type": "string"}
_BOOLEAN: dict[str, Any] = {"type": "boolean"}
_TIME: dict[str, Any] = {"type": "string", "format": "date-time"}
_TAGS = ("identity",)
_ADMIN_TAGS = ("administration",)


def _object(properties: dict[str, Any], *, closed: bool = True) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": not closed}


def _list(key: str, item: dict[str, Any]) -> dict[str, Any]:
    return _object({key: {"type": "array", "items": item}, "pageToken": _STRING})


ORGANIZATION = _object({"id": _STRING, "name": _STRING, "createTime": _TIME, "updateTime": _TIME})
USER = _object(
    {
        "id": _STRING,
        "email": _STRING,
        "name": _STRING,
        "createTime": _TIME,
        "updateTime": _TIME,
        "lastActiveTime": _TIME,
        "relationship": _STRING,
        "clusterAdmin": _BOOLEAN,
    }
)
ADMIN_USER = _object(
    {
        "id": _STRING,
        "username": _STRING,
        "createTime": _TIME,
        "updateTime": _TIME,
        "lastLoginTime": _TIME,
    }
)
ACCOUNT = _object({"id": _STRING, "name": _STRING, "createTime": _TIME, "updateTime": _TIME})
SERVICE_ACCOUNT = _object({**ACCOUNT["properties"], "kind": _STRING})
EMPTY = _object({})
NAME_BODY = _object({"name": _STRING})
_ORGANIZATION_ROLES = {"type": "string", "enum": [r.value for r in OrganizationRole]}
_ACCOUNT_RELATIONSHIPS = {"type": "string", "enum": [r.value for r in AccountRelationship]}
ADD_MEMBER_BODY = _object(
    {
        "email": _STRING,
        "relationship": _ORGANIZATION_ROLES,
        "password": _STRING,
        "requireUpdatePassword": _BOOLEAN,
        "clusterAdmin": _BOOLEAN,
    }
)
ACCOUNT_MEMBER_BODY = _object({"userId": _STRING, "relationship": _ACCOUNT_RELATIONSHIPS})
AUDIT_ENTRY = _object(
    {
        "seq": _STRING,
        "time": _TIME,
        "action": {"type": "string", "enum": [a.value for a in AuditAction]},
        "outcome": _STRING,
        "actor": _STRING,
        "actorId": _STRING,
        "organizationId": _STRING,
        "target": _STRING,
        "source": _STRING,
        "detail": {"type": "object"},
    }
)

_PAGE = (
    Query("pageSize", "integer", "items per page"),
    Query("pageToken", "string", "the page after the one that answered this token"),
    Query("orderBy", "string", "refused: each list has one order"),
    Query("filter", "string", "refused: lists are not filtered"),
)
_ORGANIZATION_ID = Query(
    "organizationId", "string", "another organization (cluster administrators only)"
)
_RELATIONSHIP = Query("relationship", "string", "only members of this relationship")


def operation(
    summary: str,
    response: dict[str, Any],
    *,
    request: dict[str, Any] | None = None,
    query: tuple[Query, ...] = (),
    admin: bool = False,
) -> JsonOperation:
    """The declaration of one identity route."""
    return JsonOperation(summary, response, request, query, tags=_ADMIN_TAGS if admin else _TAGS)


GET_ORGANIZATION = operation("the caller's organization", ORGANIZATION, query=(_ORGANIZATION_ID,))
UPDATE_ORGANIZATION = operation(
    "rename the organization", ORGANIZATION, request=NAME_BODY, query=(_ORGANIZATION_ID,)
)
LIST_MEMBERS = operation(
    "the organization's members, by email",
    _list("users", USER),
    query=(_RELATIONSHIP, _ORGANIZATION_ID, *_PAGE),
)
ADD_MEMBER = operation(
    "add a member (a password is required)",
    USER,
    request=ADD_MEMBER_BODY,
    query=(_ORGANIZATION_ID,),
)
ADD_MEMBER_V2 = operation(
    "add a member, generating their password when none is given",
    _object({"user": USER, "generatedPassword": _STRING}),
    request=ADD_MEMBER_BODY,
    query=(_ORGANIZATION_ID,),
)
UPDATE_MEMBER = operation(
    "change a member's relationship or cluster-administrator flag (in the query, or the same"
    " fields in a JSON body; each once)",
    USER,
    request=_object(
        {"relationship": _STRING, "updateRelationship": _BOOLEAN, "clusterAdmin": _BOOLEAN}
    ),
    query=(
        Query("relationship", "string", "the new relationship"),
        Query("updateRelationship", "boolean", "change the relationship"),
        Query("clusterAdmin", "boolean", "make or unmake a cluster administrator"),
    ),
)
REMOVE_MEMBER = operation("remove a member", EMPTY)
RESET_PASSWORD = operation(
    "reset a member's password (generated when none is given)",
    _object({"generatedPassword": _STRING}),
    request=_object({"newPassword": _STRING, "requireUpdatePassword": _BOOLEAN}),
)
CHANGE_PASSWORD = operation(
    "change the caller's own password",
    EMPTY,
    request=_object({"currentPassword": _STRING, "newPassword": _STRING}),
)
LIST_ACCOUNTS = operation(
    "the accounts the caller works in, by name",
    _list("accounts", ACCOUNT),
    query=(Query("showUserAccounts", "boolean", "members' personal accounts too"), *_PAGE),
)
CREATE_ACCOUNT = operation("create a group account", ACCOUNT, request=NAME_BODY)
GET_ACCOUNT = operation("an account", ACCOUNT)
UPDATE_ACCOUNT = operation("rename a group", ACCOUNT, request=NAME_BODY)
DELETE_ACCOUNT = operation("delete a group", EMPTY)
LIST_ACCOUNT_MEMBERS = operation(
    "an account's members, by email", _list("users", USER), query=(_RELATIONSHIP, *_PAGE)
)
ADD_ACCOUNT_MEMBER = operation("add a group member", USER, request=ACCOUNT_MEMBER_BODY)
UPDATE_ACCOUNT_MEMBER = operation(
    "change a group member's relationship", USER, request=ACCOUNT_MEMBER_BODY
)
REMOVE_ACCOUNT_MEMBER = operation("remove a group member", EMPTY, query=(_RELATIONSHIP,))
ACCOUNT_TOKEN = operation(
    "an API token for the caller in this account", _object({"token": _STRING})
)
LIST_USERS = operation(
    "the cluster's users, by email", _list("users", ADMIN_USER), query=_PAGE, admin=True
)
CREATE_USER = operation(
    "add a user to an organization",
    _object({"id": _STRING}),
    request=_object({"username": _STRING, "password": _STRING}),
    query=(_ORGANIZATION_ID,),
    admin=True,
)
GET_USER = operation("a user of the cluster", ADMIN_USER, admin=True)
UPDATE_USER = operation(
    "change a user's email or password",
    ADMIN_USER,
    request=_object({"username": _STRING, "password": _STRING}),
    admin=True,
)
DELETE_USER = operation("remove a user", _object({"id": _STRING}), admin=True)
LIST_ORGANIZATIONS = operation(
    "the cluster's organizations, by name",
    _list("organizations", ORGANIZATION),
    query=_PAGE,
    admin=True,
)
CREATE_ORGANIZATION = operation(
    "create an organization and its first owner",
    _object({"organization": ORGANIZATION, "owner": USER, "generatedPassword": _STRING}),
    request=_object({"name": _STRING, "ownerEmail": _STRING, "ownerPassword": _STRING}),
    admin=True,
)
LIST_SERVICE_ACCOUNTS = operation(
    "the cluster's service accounts, by name",
    _list("accounts", SERVICE_ACCOUNT),
    query=_PAGE,
    admin=True,
)
CREATE_SERVICE_ACCOUNT = operation(
    "create a service account and its first token",
    _object(
        {
            "account": _object({"id": _STRING, "name": _STRING, "kind": _STRING}),
            "token": _STRING,
        }
    ),
    request=_object({"name": _STRING, "kind": _STRING}),
    admin=True,
)
LIST_AUDIT = operation(
    "a page of the audit log, newest first",
    _list("entries", AUDIT_ENTRY),
    query=(
        Query("action", "string", "only entries of this action"),
        Query("actor", "string", "only entries of this actor"),
        Query("organizationId", "string", "only entries of this organization"),
        Query("outcome", "string", "ok, denied or failed"),
        Query("since", "string", "from this time (RFC 3339 or epoch seconds)"),
        Query("until", "string", "before this time (RFC 3339 or epoch seconds)"),
        Query("orderBy", "string", "'time desc' (default) or 'time asc'"),
        Query("pageSize", "integer", "entries per page (at most 500)"),
        Query("pageToken", "string", "the page after the one that answered this token"),
    ),
    admin=True,
)
