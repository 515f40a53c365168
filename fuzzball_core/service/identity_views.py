"""What the identity service hands to the API layer: organizations, users, accounts and the
members of accounts, as plain immutable views of the stored rows."""

from __future__ import annotations

from dataclasses import dataclass

from fuzzball_core.store.models import Account, Organization, User


@dataclass(frozen=True)
class OrganizationView:
    """A tenant of the cluster."""

    id: str
    name: str
    created_at: float
    updated_at: float | None = None

    @classmethod
    def of(cls, row: Organization) -> OrganizationView:
        """The view of a stored organization."""
        return cls(row.id, row.name, row.created_at, row.updated_at)


@dataclass(frozen=True)
class UserView:
    """A person who signs in; never carries the password hash."""

    id: str
    email: str
    organization_id: str
    role: str  # an OrganizationRole
    name: str = ""
    cluster_admin: bool = False
    require_password_update: bool = False
    created_at: float = 0.0
    updated_at: float | None = None
    last_login_at: float | None = None
    #: while set and in the future, sign-ins are refused (too many failed ones)
    locked_until: float | None = None

    @classmethod
    def of(cls, row: User) -> UserView:
        """The view of a stored user."""
        return cls(
            id=row.id,
            email=row.email,
            organization_id=row.organization_id,
            role=row.role,
            name=row.name or "",
            cluster_admin=bool(row.cluster_admin),
            require_password_update=bool(row.require_password_update),
            created_at=row.created_at,
            updated_at=row.updated_at,
            last_login_at=row.last_login_at,
            locked_until=row.locked_until,
        )


@dataclass(frozen=True)
class AccountView:
    """An account: a user's personal one, a group of an organization, or a service account."""

    id: str
    name: str
    kind: str  # an AccountKind
    organization_id: str | None = None
    owner_user_id: str | None = None
    created_at: float = 0.0
    updated_at: float | None = None

    @classmethod
    def of(cls, row: Account) -> AccountView:
        """The view of a stored account."""
        return cls(
            id=row.id,
            name=row.name,
            kind=row.kind,
            organization_id=row.organization_id,
            owner_user_id=row.owner_user_id,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


@dataclass(frozen=True)
class MemberView:
    """A user's membership of an account, with their relationship to it."""

    user: UserView
    relationship: str  # an AccountRelationship
