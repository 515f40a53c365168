"""Who may do what: a caller's permissions from its account kind, role and credential.

The tables themselves are declared with the vocabulary (:data:`~fuzzball_core.vocabulary.
ROLE_PERMISSIONS`, :data:`~fuzzball_core.vocabulary.SERVICE_PERMISSIONS`); this module only
combines them, and says how a refusal reads. Resources the caller may not see answer
NotFound (exactly as if they did not exist); actions the caller may not take on what it
can see answer PermissionDenied naming the permission.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fuzzball_core.errors import PermissionDenied
from fuzzball_core.vocabulary import (
    CLUSTER_ADMIN_PERMISSIONS,
    ROLE_PERMISSIONS,
    SERVICE_PERMISSIONS,
    WORKFLOW_TOKEN_PERMISSIONS,
    AccountKind,
    CredentialKind,
    OrganizationRole,
    Permission,
)

if TYPE_CHECKING:
    from fuzzball_core.service.views import Principal


_KINDS = frozenset(k.value for k in AccountKind)


def permissions_for(
    kind: str,
    *,
    role: str | None = None,
    cluster_admin: bool = False,
    credential: str = CredentialKind.API,
) -> frozenset[str]:
    """The permissions of a caller working in an account of ``kind``.

    A service account has its kind's; a user has their organization role's (a member's when
    the account predates organizations and has no role) plus the cluster administrator's
    when they are one. A workflow's token is bounded by :data:`WORKFLOW_TOKEN_PERMISSIONS`
    whatever its owner may do.
    """
    service = SERVICE_PERMISSIONS.get(AccountKind(kind)) if kind in _KINDS else None
    if service is not None:
        granted: frozenset[str] = service
    else:
        granted = ROLE_PERMISSIONS[OrganizationRole(role or OrganizationRole.MEMBER)]
        if cluster_admin:
            granted = granted | CLUSTER_ADMIN_PERMISSIONS
    if credential == CredentialKind.WORKFLOW:
        granted = granted & WORKFLOW_TOKEN_PERMISSIONS
    return frozenset(granted)


def require(who: Principal, permission: Permission, doing: str) -> None:
    """PermissionDenied unless ``who`` holds ``permission``; the message names what was
    refused (``doing``, e.g. "place node holds") and the missing permission."""
    if not who.may(permission):
        raise PermissionDenied(
            f"{who.email or who.name} may not {doing} (needs the {permission.value} permission)"
        )


def may_start_workflows(who: Principal) -> bool:
    """Whether ``who`` may start workflows (a rerun is a start): with
    :attr:`Permission.RUN_WORKFLOWS`, which the cluster's monitoring and provisioner accounts
    lack whatever their tokens are trusted with."""
    return who.may(Permission.RUN_WORKFLOWS)


def lacks_to_control_workflow(who: Principal, *, its_own: bool) -> Permission | None:
    """The permission ``who`` lacks to stop or rerun a workflow it can see, None when it may.

    It needs :attr:`Permission.RUN_WORKFLOWS`; for a workflow that is not its own
    (``its_own``: of the account it works in), :attr:`Permission.ADMINISTER_CLUSTER` as
    well, since :attr:`Permission.READ_CLUSTER`, which shows another account's, is read
    only. The services refuse with this and the Web UI offers the controls by it, so the
    two never disagree."""
    if not who.may(Permission.RUN_WORKFLOWS):
        return Permission.RUN_WORKFLOWS
    if its_own or who.may(Permission.ADMINISTER_CLUSTER):
        return None
    return Permission.ADMINISTER_CLUSTER
