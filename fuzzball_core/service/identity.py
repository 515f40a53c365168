"""Who exists and what they may be: organizations, their members, groups, sign-in and the
cluster's service accounts.

An organization has users (members, one of them at least an owner) with a password (an argon2
hash, :mod:`~fuzzball_core.service.passwords`); each user has a personal account (kind
``user``, named after their email) and may belong to group accounts of the organization. A
user works in one account at a time: :meth:`Identity.account_token` exchanges a sign-in for an
account-scoped API token. Service accounts (admin, monitoring, provisioner) belong to the
cluster, not to an organization.

What a caller may do is decided by its permissions (:mod:`~fuzzball_core.vocabulary`); what a
caller may not see answers NotFound exactly as if it did not exist: another organization's
users and accounts, and accounts the caller is no member of. Names are each organization's
own: a group's, and a personal account's, is unique within its organization only, so no name
tells one organization of another's accounts. An email names one user of the cluster (sign-in
asks for no organization): one that another organization's user has is refused with
:data:`EMAIL_UNAVAILABLE`, which names no one. Every write that checks a name is free runs
through :func:`~fuzzball_core.store.database.checked_write`, so that a concurrent request
taking the name between the check and the insert is answered as a taken name.

Sign-in (:meth:`Identity.check_password`) locks a user out for :data:`LOCKOUT_SECONDS` after
:data:`MAX_FAILED_LOGINS` failures in a row; logins, failures and lockouts are audited (a
failure naming no user's email as :data:`UNKNOWN_EMAIL`, never as what was typed). A cluster
administrator is changed (password, role, email, removal) only by another: an organization's
owner managing the members could otherwise take the cluster over.
"""

from __future__ import annotations

import functools
import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from fuzzball_core.service.accounts import Accounts, account_kind
from fuzzball_core.service.audit import AuditLog, AuditPage, AuditQuery
from fuzzball_core.service.identity_views import (
    AccountView,
    MemberView,
    OrganizationView,
    UserView,
)
from fuzzball_core.service.passwords import (
    check_policy,
    generate_password,
    hash_password,
    needs_rehash,
    verify_password,
)
from fuzzball_core.service.permissions import require
from fuzzball_core.service.revocations import Revocation
from fuzzball_core.service.views import Principal
from fuzzball_core.store.database import checked_write
from fuzzball_core.store.models import (
    Account,
    AccountMember,
    ApiToken,
    Organization,
    User,
    Workflow,
)
from fuzzball_core.vocabulary import (
    SERVICE_ACCOUNT_KINDS,
    AccountKind,
    AccountRelationship,
    AuditAction,
    CredentialKind,
    OrganizationRole,
    Permission,
)

T = TypeVar("T")

#: Failed sign-ins in a row that lock a user out, and for how long.
MAX_FAILED_LOGINS, LOCKOUT_SECONDS = 5, 15 * 60
#: The one answer to a wrong email or password, so that it tells no one which users exist.
BAD_CREDENTIALS = "invalid email or password"
#: Who a failed sign-in naming no user's email is audited as: what was typed is kept out of
#: the audit log (it may be a password typed into the wrong field).
UNKNOWN_EMAIL = "<unknown email>"
#: Who an action taken on the server's own machine (``fuzzball-orchestrate``) is audited as.
COMMAND_LINE = "command line"
#: Longest names an organization or account may have (their columns' width).
MAX_NAME = 200
#: The refusal of an email that another organization's user signs in with, to anyone but a
#: cluster administrator: it tells no more than that this organization cannot have it.
EMAIL_UNAVAILABLE = (
    "email: {email!r} cannot be used in this organization; ask a cluster administrator"
)


@functools.cache
def _dummy_hash() -> str:
    """The hash verified against when the email is unknown, so that an unknown user takes as
    long to refuse as a wrong password does. Made on the first sign-in rather than at import:
    an argon2id hash is about 0.2 s of CPU that every process importing this module
    (Orchestrate's start among them) would otherwise pay whether anyone signs in or not."""
    return hash_password("an unknown user's password 1A!")


_GROUP_RELATIONSHIPS = {
    AccountRelationship.GROUP_MEMBER: AccountRelationship.GROUP_MEMBER,
    AccountRelationship.GROUP_OWNER: AccountRelationship.GROUP_OWNER,
    # the swagger's deprecated spellings of the same two
    AccountRelationship.ACCOUNT_MEMBER: AccountRelationship.GROUP_MEMBER,
    AccountRelationship.ACCOUNT_OWNER: AccountRelationship.GROUP_OWNER,
}
_OWNERS = (AccountRelationship.GROUP_OWNER, AccountRelationship.ACCOUNT_OWNER)


def utc_text(seconds: float) -> str:
    """``seconds`` since the epoch as an ISO 8601 UTC time, as messages show it."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def organization_role(role: str) -> OrganizationRole:
    """``role`` as an :class:`OrganizationRole`; InvalidArgument naming the roles there are."""
    try:
        return OrganizationRole(role)
    except ValueError:
        known = ", ".join(r.value for r in OrganizationRole)
        raise InvalidArgument(
            f"relationship: {role!r} is not an organization role ({known})"
        ) from None


def group_relationship(relationship: str) -> AccountRelationship:
    """``relationship`` of a group's member, the deprecated ACCOUNT_* spellings read as their
    GROUP_* equals; InvalidArgument naming the ones there are."""
    try:
        return _GROUP_RELATIONSHIPS[AccountRelationship(relationship)]
    except ValueError:
        known = ", ".join(r.value for r in AccountRelationship)
        raise InvalidArgument(
            f"relationship: {relationship!r} is not an account relationship ({known})"
        ) from None


def _checked_name(what: str, name: str) -> str:
    name = name.strip()
    if not name:
        raise InvalidArgument(f"name: the {what} needs a name")
    if len(name) > MAX_NAME or not name.isprintable():
        raise InvalidArgument(f"name: a {what}'s name is printable and at most {MAX_NAME} long")
    return name


def _checked_email(email: str) -> str:
    email = email.strip()
    local, at, domain = email.partition("@")
    # at most MAX_NAME: the user's personal account is named after it
    if not (at and local and domain) or len(email) > MAX_NAME or any(c.isspace() for c in email):
        raise InvalidArgument(f"email: {email[:80]!r} is not an email address")
    if not email.isprintable():
        raise InvalidArgument("email: holds characters that are not printable")
    return email


_STORED_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _lookup(session: Session, table: type[T], key: str) -> T | None:
    """The row of ``table`` with id ``key``; None for any key that is no id this store makes
    (a client's text goes no further than this: PostgreSQL refuses a NUL in it outright)."""
    return session.get(table, key) if _STORED_ID.fullmatch(key) else None


def _actor(who: Principal | None) -> str:
    if who is None:
        return COMMAND_LINE
    return who.email or who.name


class Identity:
    """Organizations, users, groups, sign-in and service accounts over Orchestrate's store."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        accounts: Accounts,
        audit: AuditLog,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions
        self.accounts = accounts
        self.audit = audit
        self.clock = clock

    # -- organizations -------------------------------------------------------------------------

    def create_organization(
        self,
        name: str,
        *,
        owner_email: str,
        owner_password: str | None = None,
        by: Principal | None = None,
    ) -> tuple[OrganizationView, UserView, str | None]:
        """Create organization ``name`` with its first owner (and the owner's personal
        account); the owner's password is ``owner_password`` (policy checked) or generated,
        and then returned (shown once). ``by`` is the cluster administrator asking (None: the
        server's own command line)."""
        if by is not None:
            require(by, Permission.ADMINISTER_CLUSTER, "create organizations")
        name = _checked_name("organization", name)
        now = self.clock()

        def create(session: Session) -> tuple[OrganizationView, UserView, str | None]:
            _organization_name_free(session, name)
            organization = Organization(id=str(uuid.uuid4()), name=name, created_at=now)
            session.add(organization)
            session.flush()
            owner, generated = self._new_user(
                session,
                organization.id,
                owner_email,
                role=OrganizationRole.OWNER,
                password=owner_password,
                sees_every_organization=True,
            )
            self.audit.record(
                AuditAction.ORGANIZATION_CREATED,
                actor=_actor(by),
                actor_id=by.user_id or by.account_id if by else None,
                organization_id=organization.id,
                target=f"organization {name}",
                source=by.source if by else "",
                detail={"owner": owner.email},
                session=session,
            )
            return OrganizationView.of(organization), UserView.of(owner), generated

        return checked_write(self.sessions, create)

    def list_organizations(self, who: Principal) -> list[OrganizationView]:
        """Every organization of the cluster, by name (cluster administrators)."""
        require(who, Permission.ADMINISTER_CLUSTER, "list organizations")
        with self.sessions() as session:
            rows = session.scalars(select(Organization).order_by(Organization.name)).all()
            return [OrganizationView.of(row) for row in rows]

    def get_organization(
        self, who: Principal, organization_id: str | None = None
    ) -> OrganizationView:
        """The caller's organization (a cluster administrator may name another)."""
        with self.sessions() as session:
            return OrganizationView.of(self._organization(session, who, organization_id))

    def update_organization(
        self, who: Principal, *, name: str, organization_id: str | None = None
    ) -> OrganizationView:
        """Rename the caller's organization (its owners, or a cluster administrator)."""
        name = _checked_name("organization", name)

        def rename(session: Session) -> OrganizationView:
            organization = self._organization(session, who, organization_id)
            self._require_manager(who, organization.id, "rename the organization")
            _organization_name_free(session, name, but=organization.id)
            old, organization.name, organization.updated_at = organization.name, name, self.clock()
            self._audit(
                session, who, AuditAction.ORGANIZATION_UPDATED, organization.id,
                f"organization {name}", detail={"old_name": old},
            )  # fmt: skip
            return OrganizationView.of(organization)

        return checked_write(self.sessions, rename)

    def _organization(
        self, session: Session, who: Principal, organization_id: str | None
    ) -> Organization:
        """The organization a call is about: the caller's own, or (cluster administrators
        only) the one named; another organization is NotFound to everyone else."""
        wanted = organization_id or who.organization_id
        if wanted is None:
            raise FailedPrecondition(
                f"{who.name} belongs to no organization; name one (organizationId)"
            )
        organization = _lookup(session, Organization, wanted)
        visible = wanted == who.organization_id or who.may(Permission.ADMINISTER_CLUSTER)
        if organization is None or not visible:
            raise NotFound(f"organization {wanted} not found")
        return organization

    def _require_manager(self, who: Principal, organization_id: str, doing: str) -> None:
        """PermissionDenied unless ``who`` owns ``organization_id`` or administers the
        cluster."""
        if who.may(Permission.ADMINISTER_CLUSTER):
            return
        if who.organization_id != organization_id:  # _organization already hid it
            raise NotFound(f"organization {organization_id} not found")
        require(who, Permission.MANAGE_ORGANIZATION, doing)

    # -- members -------------------------------------------------------------------------------

    def add_member(
        self,
        who: Principal,
        email: str,
        *,
        role: str = OrganizationRole.MEMBER,
        password: str | None = None,
        cluster_admin: bool = False,
        require_update: bool = False,
        name: str = "",
        organization_id: str | None = None,
    ) -> tuple[UserView, str | None]:
        """Add a user to the caller's organization (a cluster administrator names one) with
        ``password`` (policy checked) or a generated one, returned then (shown once); the
        user gets a personal account. Only the organization's owners or cluster
        administrators may; only cluster administrators make cluster administrators."""
        chosen = organization_role(role)
        if cluster_admin:
            require(who, Permission.ADMINISTER_CLUSTER, "make cluster administrators")

        def add(session: Session) -> tuple[UserView, str | None]:
            organization = self._organization(session, who, organization_id)
            self._require_manager(who, organization.id, "add organization members")
            user, generated = self._new_user(
                session,
                organization.id,
                email,
                role=chosen,
                password=password,
                cluster_admin=cluster_admin,
                require_update=require_update,
                name=name,
                sees_every_organization=who.may(Permission.ADMINISTER_CLUSTER),
            )
            self._audit(
                session, who, AuditAction.MEMBER_ADDED, organization.id, f"user {user.email}",
                detail={"role": chosen.value, "cluster_admin": cluster_admin},
            )  # fmt: skip
            return UserView.of(user), generated

        return checked_write(self.sessions, add)

    def _new_user(
        self,
        session: Session,
        organization_id: str,
        email: str,
        *,
        role: OrganizationRole,
        password: str | None,
        cluster_admin: bool = False,
        require_update: bool = False,
        name: str = "",
        sees_every_organization: bool = False,
    ) -> tuple[User, str | None]:
        """A new user of ``organization_id`` and their personal account (named ``email``);
        ``sees_every_organization``: the caller may be told of another organization's user
        (see :func:`_email_free`)."""
        email = _checked_email(email)
        if len(name) > MAX_NAME or not name.isprintable():
            raise InvalidArgument(f"name: a user's name is printable and at most {MAX_NAME} long")
        _email_free(session, email, organization_id, tell_where=sees_every_organization)
        _account_name_free(session, organization_id, email)
        generated = None
        if password is None or password == "":
            password = generated = generate_password(username=name, email=email)
        check_policy(password, username=name, email=email)
        now = self.clock()
        user = User(
            id=str(uuid.uuid4()),
            organization_id=organization_id,
            email=email,
            name=name,
            role=role.value,
            cluster_admin=cluster_admin,
            password_hash=hash_password(password),
            require_password_update=require_update,
            failed_logins=0,
            created_at=now,
        )
        session.add(user)
        session.flush()
        _add_owned_account(
            session, email, AccountKind.USER, organization_id, user.id, now, personal=True
        )
        return user, generated

    def list_members(
        self, who: Principal, *, role: str | None = None, organization_id: str | None = None
    ) -> list[UserView]:
        """The members of the caller's organization (of ``role`` only, when given), by
        email."""
        wanted = organization_role(role) if role else None
        with self.sessions() as session:
            organization = self._organization(session, who, organization_id)
            if who.user_id is None and not who.may(Permission.ADMINISTER_CLUSTER):
                raise PermissionDenied(f"{who.name} is no member of an organization")
            statement = select(User).where(User.organization_id == organization.id)
            if wanted is not None:
                statement = statement.where(User.role == wanted.value)
            rows = session.scalars(statement.order_by(User.email)).all()
            return [UserView.of(row) for row in rows]

    def get_member(self, who: Principal, user_id: str) -> UserView:
        """One user the caller may see: of their own organization (any, to a cluster
        administrator)."""
        with self.sessions() as session:
            return UserView.of(self._visible_user(session, who, user_id))

    def _visible_user(self, session: Session, who: Principal, user_id: str) -> User:
        user = _lookup(session, User, user_id)
        if user is None or not (
            user.organization_id == who.organization_id or who.may(Permission.ADMINISTER_CLUSTER)
        ):
            raise NotFound(f"user {user_id} not found")
        return user

    def _managed_user(self, session: Session, who: Principal, user_id: str, doing: str) -> User:
        """A user the caller may change: of an organization the caller manages. A cluster
        administrator is the cluster's as well as their organization's: only a caller who
        administers the cluster changes one (resets their password, changes their role or
        email, removes them), or an organization's owner could sign in as them."""
        user = self._visible_user(session, who, user_id)
        self._require_manager(who, user.organization_id, doing)
        if user.cluster_admin:
            require(
                who,
                Permission.ADMINISTER_CLUSTER,
                f"{doing}: {user.email} is a cluster administrator",
            )
        return user

    def update_member(
        self,
        who: Principal,
        user_id: str,
        *,
        role: str | None = None,
        cluster_admin: bool | None = None,
        email: str | None = None,
    ) -> UserView:
        """Change a member's role, cluster-administrator flag or email (the organization's
        owners; only cluster administrators change the flag, or anything of a cluster
        administrator). The last owner stays one."""
        chosen = organization_role(role) if role else None
        if cluster_admin is not None:
            require(who, Permission.ADMINISTER_CLUSTER, "make or unmake cluster administrators")

        def change(session: Session) -> UserView:
            user = self._managed_user(session, who, user_id, "change organization members")
            detail: dict[str, Any] = {}
            if chosen is not None and chosen.value != user.role:
                if chosen != OrganizationRole.OWNER:
                    self._keep_an_owner(session, user)
                user.role = detail["role"] = chosen.value
            if cluster_admin is not None and cluster_admin != user.cluster_admin:
                user.cluster_admin = detail["cluster_admin"] = cluster_admin
            if email is not None and email != user.email:
                self._rename_user(session, who, user, _checked_email(email))
                detail["email"] = user.email
            user.updated_at = self.clock()
            self._audit(
                session, who, AuditAction.MEMBER_UPDATED, user.organization_id,
                f"user {user.email}", detail=detail,
            )  # fmt: skip
            return UserView.of(user)

        return checked_write(self.sessions, change)

    def _rename_user(self, session: Session, who: Principal, user: User, email: str) -> None:
        """Give ``user`` (and their personal account) the sign-in ``email``."""
        tell_where = who.may(Permission.ADMINISTER_CLUSTER)
        _email_free(session, email, user.organization_id, tell_where=tell_where, but=user.id)
        personal = self._personal_account(session, user.id)
        if personal is not None:
            _account_name_free(session, user.organization_id, email, but=personal.id)
            personal.name = email
        user.email = email

    def _keep_an_owner(self, session: Session, user: User) -> None:
        """FailedPrecondition when ``user`` is their organization's last owner."""
        if user.role != OrganizationRole.OWNER:
            return
        owners = session.scalar(
            select(func.count())
            .select_from(User)
            .where(
                User.organization_id == user.organization_id,
                User.role == OrganizationRole.OWNER.value,
            )
        )
        if (owners or 0) <= 1:
            raise FailedPrecondition(
                f"{user.email} is the organization's last owner; make another member an owner first"
            )

    def remove_member(self, who: Principal, user_id: str) -> None:
        """Remove a user from their organization (its owners, or a cluster administrator; a
        cluster administrator only by another): their tokens are revoked and their
        memberships end. Their personal account stays,
        with its workflows' history, usable by no one, renamed so that the email can be
        added again."""
        with self.sessions() as session, session.begin():
            user = self._managed_user(session, who, user_id, "remove organization members")
            self._keep_an_owner(session, user)
            session.execute(
                update(ApiToken)
                .where(ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None))
                .values(revoked_at=self.clock())
            )
            personal = self._personal_account(session, user.id)
            if personal is not None:  # its name is free for the email to be added again
                personal.name = f"removed {user.id} {user.email}"[:MAX_NAME]
                personal.updated_at = self.clock()
            self._audit(
                session, who, AuditAction.MEMBER_REMOVED, user.organization_id,
                f"user {user.email}",
            )  # fmt: skip
            removed = str(user.id)
            session.delete(user)
        self.accounts.revocations.announce(Revocation(user_ids=frozenset({removed})))

    def reset_password(
        self,
        who: Principal,
        user_id: str,
        *,
        new_password: str | None = None,
        require_update: bool = False,
    ) -> str | None:
        """Set a member's password to ``new_password`` (policy checked) or a generated one,
        returned then (shown once); their lockout ends. The organization's owners or a
        cluster administrator; a cluster administrator's only by another."""
        with self.sessions() as session, session.begin():
            user = self._managed_user(session, who, user_id, "reset members' passwords")
            generated = None
            if not new_password:
                new_password = generated = generate_password(username=user.name, email=user.email)
            self._set_password(user, new_password, require_update=require_update)
            self._audit(
                session, who, AuditAction.PASSWORD_CHANGED, user.organization_id,
                f"user {user.email}", detail={"reset": True},
            )  # fmt: skip
            return generated

    def change_password(
        self, who: Principal, *, current_password: str, new_password: str, source: str = ""
    ) -> None:
        """The caller changes their own password: ``new_password`` is checked against the
        policy, then ``current_password`` as a sign-in is (failures count towards the
        lockout)."""
        if who.user_id is None:
            raise FailedPrecondition(f"{who.name} is a service account; it has no password")
        if who.credential == CredentialKind.WORKFLOW:
            raise PermissionDenied("a workflow's token may not change its user's password")
        with self.sessions() as session:
            user = session.get(User, who.user_id)
            if user is None:
                raise NotFound(f"user {who.user_id} not found")
            email = user.email
            # first: a refused new password must not record the current one's check as a
            # sign-in (last_login_at, a ``login`` audit line) for a change that never happened
            check_policy(new_password, username=user.name, email=email)
        # the current password proves who asks; it is no sign-in (no ``login`` line, no
        # last sign-in time), though a wrong one counts towards the lockout as a sign-in's does
        self.check_password(email, current_password, source=source, signing_in=False)
        with self.sessions() as session, session.begin():
            user = session.get(User, who.user_id)
            if user is None:
                raise NotFound(f"user {who.user_id} not found")
            self._set_password(user, new_password, require_update=False)
            self._audit(
                session, who, AuditAction.PASSWORD_CHANGED, user.organization_id,
                f"user {user.email}", source=source,
            )  # fmt: skip

    def _set_password(self, user: User, password: str, *, require_update: bool) -> None:
        check_policy(password, username=user.name, email=user.email)
        user.password_hash = hash_password(password)
        user.require_password_update = require_update
        user.failed_logins, user.locked_until = 0, None
        user.updated_at = self.clock()

    # -- signing in ----------------------------------------------------------------------------

    def check_password(
        self, email: str, password: str, *, source: str = "", signing_in: bool = True
    ) -> UserView:
        """The user signing in with ``email`` and ``password``; Unauthenticated otherwise.

        A wrong password and an unknown email get the same answer. After
        :data:`MAX_FAILED_LOGINS` failures in a row the user is locked out for
        :data:`LOCKOUT_SECONDS`: every attempt meanwhile, the right password too, is refused
        saying until when. A good sign-in resets the count and records the time and a
        ``login`` audit line; with ``signing_in`` False (a password checked to confirm a
        change) it only resets the count.
        """
        now = self.clock()
        # made before the lookup, so that the first sign-in pays for it whoever it names
        dummy_hash = _dummy_hash()
        # no stored email is longer or unprintable: such a name is an unknown user's, and is
        # not sent to the store (PostgreSQL refuses a NUL in text outright)
        wanted = email.strip().lower() if len(email) <= 320 and email.isprintable() else ""
        with self.sessions() as session, session.begin():
            user = session.scalars(
                select(User)
                .where(func.lower(User.email) == wanted)
                # concurrent attempts count one after the other (PostgreSQL; SQLite writes
                # one transaction at a time anyway)
                .with_for_update()
            ).first()
            if user is None:
                verify_password(dummy_hash, password)  # as slow as a known user's refusal
                # not the typed name: no user has it, and it may well be a password typed
                # into the email field
                self.audit.record(
                    AuditAction.LOGIN_FAILED, actor=UNKNOWN_EMAIL, target=f"user {UNKNOWN_EMAIL}",
                    outcome="denied", source=source, detail={"reason": "unknown user"},
                    session=session,
                )  # fmt: skip
                refusal: Unauthenticated | None = Unauthenticated(BAD_CREDENTIALS)
            else:
                refusal = self._attempt(session, user, password, now, source, signing_in)
            view = UserView.of(user) if user is not None else None
        if refusal is not None:
            raise refusal
        assert view is not None
        return view

    def _attempt(
        self,
        session: Session,
        user: User,
        password: str,
        now: float,
        source: str,
        signing_in: bool,
    ) -> Unauthenticated | None:
        """Check one sign-in of ``user`` (or, not ``signing_in``, its password alone),
        recording how it went; the refusal to raise once the record is committed (None: the
        password was right)."""

        def audit(action: AuditAction, outcome: str, **detail: Any) -> None:
            self.audit.record(
                action, actor=user.email, actor_id=user.id, organization_id=user.organization_id,
                target=f"user {user.email}", outcome=outcome, source=source, detail=detail,
                session=session,
            )  # fmt: skip

        if user.locked_until is not None and user.locked_until > now:
            audit(AuditAction.LOGIN_FAILED, "denied", reason="locked out")
            return Unauthenticated(
                f"{user.email} is locked out after {MAX_FAILED_LOGINS} failed sign-ins until"
                f" {utc_text(user.locked_until)}; try again then, or ask an organization owner"
                " to reset the password"
            )
        if user.locked_until is not None:  # the lockout is over: a fresh count
            user.failed_logins, user.locked_until = 0, None
        if not verify_password(user.password_hash, password):
            user.failed_logins = (user.failed_logins or 0) + 1
            audit(AuditAction.LOGIN_FAILED, "denied", failures=user.failed_logins)
            if user.failed_logins >= MAX_FAILED_LOGINS:
                user.locked_until = now + LOCKOUT_SECONDS
                audit(AuditAction.LOCKED_OUT, "denied", until=utc_text(user.locked_until))
            return Unauthenticated(BAD_CREDENTIALS)
        if user.password_hash and needs_rehash(user.password_hash):
            user.password_hash = hash_password(password)
        user.failed_logins = 0
        if signing_in:
            user.last_login_at = now
            audit(AuditAction.LOGIN, "ok")
        return None

    def login_principal(self, user_id: str) -> Principal:
        """Who a sign-in (a login access token) of ``user_id`` acts as: the user in their
        personal account, with a login credential. NotFound when the user is gone."""
        with self.sessions() as session:
            user = _lookup(session, User, user_id)
            if user is None:
                raise NotFound(f"user {user_id} not found")
            personal = self._personal_account(session, user.id)
            if personal is None:
                raise FailedPrecondition(f"{user.email} has no personal account")
            return Principal(
                personal.id,
                personal.name,
                user.cluster_admin,
                AccountKind.USER,
                user_id=user.id,
                email=user.email,
                organization_id=user.organization_id,
                role=user.role,
                credential=CredentialKind.LOGIN,
            )

    @staticmethod
    def _personal_account(session: Session, user_id: str) -> Account | None:
        return session.scalars(
            select(Account).where(
                Account.owner_user_id == user_id, Account.kind == AccountKind.USER.value
            )
        ).first()

    def account_token(self, who: Principal, account_id: str, *, source: str = "") -> str:
        """An API token for the user ``who`` working in account ``account_id`` (their
        personal account or a group they belong to); NotFound for any other account. A
        workflow's own token may not choose accounts, nor may a user who must choose a new
        password first (``requireUpdatePassword``) until they have."""
        if who.user_id is None:
            raise FailedPrecondition(
                f"{who.name} is a service account; it has its own token and no other account"
            )
        if who.credential == CredentialKind.WORKFLOW:
            raise PermissionDenied("a workflow's token may not choose accounts")
        with self.sessions() as session, session.begin():
            account = self._member_account(session, who, account_id)
            user = session.get(User, who.user_id)
            if user is not None and user.require_password_update:
                raise FailedPrecondition(
                    f"{user.email} must choose a new password before working in an account"
                    " (POST /v3/profile/password, or fuzzball context update-user"
                    " --new-password)"
                )
            token = self.accounts.issue_for(account.id, user_id=who.user_id, session=session)
            self._audit(
                session, who, AuditAction.TOKEN_ISSUED, account.organization_id,
                f"account {account.name}", source=source,
            )  # fmt: skip
            return token

    def _member_account(self, session: Session, who: Principal, account_id: str) -> Account:
        account = _lookup(session, Account, account_id)
        member = (
            session.get(AccountMember, (account_id, who.user_id))
            if account is not None and account.organization_id == who.organization_id
            else None
        )
        if account is None or member is None:
            raise NotFound(f"account {account_id} not found")
        return account

    # -- groups (accounts of an organization) --------------------------------------------------

    def create_account(self, who: Principal, name: str) -> AccountView:
        """A group account of the caller's organization, the caller its owner."""
        name = _checked_name("group", name)
        if who.user_id is None or who.organization_id is None:
            raise FailedPrecondition(f"{who.name} is no member of an organization")
        if who.credential == CredentialKind.WORKFLOW:
            raise PermissionDenied("a workflow's token may not create groups")
        organization_id, owner_id, now = who.organization_id, who.user_id, self.clock()

        def create(session: Session) -> AccountView:
            _account_name_free(session, organization_id, name)
            account = _add_owned_account(
                session, name, AccountKind.GROUP, organization_id, owner_id, now
            )
            self._audit(session, who, AuditAction.ACCOUNT_CREATED, organization_id, f"group {name}")
            return AccountView.of(account)

        return checked_write(self.sessions, create)

    def list_accounts(
        self, who: Principal, *, show_user_accounts: bool = False
    ) -> list[AccountView]:
        """The accounts the caller works in (their personal account and their groups), by
        name. The organization's owners see every group of it, and with
        ``show_user_accounts`` every member's personal account too."""
        if who.organization_id is None:
            raise FailedPrecondition(f"{who.name} belongs to no organization")
        with self.sessions() as session:
            mine = select(AccountMember.account_id).where(AccountMember.user_id == who.user_id)
            statement = select(Account).where(Account.organization_id == who.organization_id)
            if who.may(Permission.MANAGE_ORGANIZATION):
                if not show_user_accounts:
                    statement = statement.where(
                        (Account.kind == AccountKind.GROUP.value) | Account.id.in_(mine)
                    )
            elif show_user_accounts:
                raise PermissionDenied(
                    "showUserAccounts: only the organization's owners see members' accounts"
                )
            else:
                statement = statement.where(Account.id.in_(mine))
            rows = session.scalars(statement.order_by(Account.name)).all()
            return [AccountView.of(row) for row in rows]

    def get_account(self, who: Principal, account_id: str) -> AccountView:
        """An account the caller is a member of (any of the organization's, to its owners)."""
        with self.sessions() as session:
            return AccountView.of(self._visible_account(session, who, account_id))

    def _visible_account(self, session: Session, who: Principal, account_id: str) -> Account:
        account = _lookup(session, Account, account_id)
        if account is not None and account.organization_id is not None:
            if who.may(Permission.ADMINISTER_CLUSTER):
                return account
            if account.organization_id == who.organization_id and (
                who.may(Permission.MANAGE_ORGANIZATION)
                or session.get(AccountMember, (account_id, who.user_id)) is not None
            ):
                return account
        raise NotFound(f"account {account_id} not found")

    def _managed_group(
        self, session: Session, who: Principal, account_id: str, doing: str
    ) -> Account:
        """A group the caller may change: they own it, or manage its organization."""
        account = self._visible_account(session, who, account_id)
        if account.kind != AccountKind.GROUP:
            raise FailedPrecondition(
                f"account {account.name} is a personal account; only groups can be changed"
            )
        if who.may(Permission.MANAGE_ORGANIZATION) or who.may(Permission.ADMINISTER_CLUSTER):
            return account
        member = session.get(AccountMember, (account_id, who.user_id))
        if member is None or member.relationship not in _OWNERS:
            raise PermissionDenied(
                f"{who.email or who.name} may not {doing} (only the group's owners and the"
                " organization's owners may)"
            )
        return account

    def update_account(self, who: Principal, account_id: str, *, name: str) -> AccountView:
        """Rename a group (its owners, or the organization's)."""
        name = _checked_name("group", name)

        def rename(session: Session) -> AccountView:
            account = self._managed_group(session, who, account_id, "rename the group")
            _account_name_free(session, account.organization_id, name, but=account.id)
            old, account.name, account.updated_at = account.name, name, self.clock()
            self._audit(
                session, who, AuditAction.ACCOUNT_UPDATED, account.organization_id,
                f"group {name}", detail={"old_name": old},
            )  # fmt: skip
            return AccountView.of(account)

        return checked_write(self.sessions, rename)

    def delete_account(self, who: Principal, account_id: str) -> None:
        """Delete a group that has run no workflows (its owners, or the organization's); its
        tokens go with it."""
        with self.sessions() as session, session.begin():
            account = self._managed_group(session, who, account_id, "delete the group")
            used = session.scalars(
                select(Workflow.id).where(Workflow.account_id == account.id).limit(1)
            ).first()
            if used is not None:
                raise FailedPrecondition(
                    f"group {account.name} has workflows; it is kept with their history"
                )
            self._audit(
                session, who, AuditAction.ACCOUNT_DELETED, account.organization_id,
                f"group {account.name}",
            )  # fmt: skip
            deleted = str(account.id)
            session.delete(account)
        self.accounts.revocations.announce(Revocation(account_ids=frozenset({deleted})))

    def list_account_members(
        self, who: Principal, account_id: str, *, relationship: str | None = None
    ) -> list[MemberView]:
        """The members of an account the caller can see, by email (of ``relationship``
        only, when given)."""
        wanted = AccountRelationship(relationship) if relationship else None
        with self.sessions() as session:
            account = self._visible_account(session, who, account_id)
            statement = (
                select(User, AccountMember.relationship)
                .join(AccountMember, AccountMember.user_id == User.id)
                .where(AccountMember.account_id == account.id)
            )
            if wanted is not None:
                statement = statement.where(AccountMember.relationship == wanted.value)
            rows = session.execute(statement.order_by(User.email)).all()
            return [MemberView(UserView.of(user), str(kind)) for user, kind in rows]

    def add_account_member(
        self,
        who: Principal,
        account_id: str,
        user_id: str,
        *,
        relationship: str = AccountRelationship.GROUP_MEMBER,
    ) -> MemberView:
        """Add a member of the organization to a group (its owners, or the
        organization's)."""
        chosen = group_relationship(relationship)

        def add(session: Session) -> MemberView:
            account = self._managed_group(session, who, account_id, "add group members")
            user = _lookup(session, User, user_id)
            if user is None or user.organization_id != account.organization_id:
                raise NotFound(f"user {user_id} not found")
            if session.get(AccountMember, (account.id, user.id)) is not None:
                raise AlreadyExists(f"{user.email} is already a member of {account.name}")
            session.add(
                AccountMember(
                    account_id=account.id,
                    user_id=user.id,
                    relationship=chosen.value,
                    created_at=self.clock(),
                )
            )
            self._audit(
                session, who, AuditAction.ACCOUNT_UPDATED, account.organization_id,
                f"group {account.name}", detail={"added": user.email, "as": chosen.value},
            )  # fmt: skip
            return MemberView(UserView.of(user), chosen.value)

        return checked_write(self.sessions, add)

    def update_account_member(
        self, who: Principal, account_id: str, user_id: str, *, relationship: str
    ) -> MemberView:
        """Change a group member's relationship (owner or member)."""
        chosen = group_relationship(relationship)
        with self.sessions() as session, session.begin():
            account = self._managed_group(session, who, account_id, "change group members")
            member, user = self._group_member(session, account, user_id)
            member.relationship = chosen.value
            self._audit(
                session, who, AuditAction.ACCOUNT_UPDATED, account.organization_id,
                f"group {account.name}", detail={"changed": user.email, "as": chosen.value},
            )  # fmt: skip
            return MemberView(UserView.of(user), chosen.value)

    def remove_account_member(
        self, who: Principal, account_id: str, user_id: str, *, relationship: str | None = None
    ) -> None:
        """Remove a member from a group (with ``relationship``, only if that is theirs); the
        API tokens they hold for the group are revoked."""
        wanted = group_relationship(relationship) if relationship else None
        with self.sessions() as session, session.begin():
            account = self._managed_group(session, who, account_id, "remove group members")
            member, user = self._group_member(session, account, user_id)
            if wanted is not None and group_relationship(member.relationship) != wanted:
                raise NotFound(f"{user.email} is no {wanted.value} of {account.name}")
            session.execute(
                update(ApiToken)
                .where(
                    ApiToken.account_id == account.id,
                    ApiToken.user_id == user.id,
                    ApiToken.revoked_at.is_(None),
                )
                .values(revoked_at=self.clock())
            )
            session.delete(member)
            self._audit(
                session, who, AuditAction.ACCOUNT_UPDATED, account.organization_id,
                f"group {account.name}", detail={"removed": user.email},
            )  # fmt: skip
            ended = (str(user.id), str(account.id))
        self.accounts.revocations.announce(Revocation(memberships=frozenset({ended})))

    @staticmethod
    def _group_member(
        session: Session, account: Account, user_id: str
    ) -> tuple[AccountMember, User]:
        user = _lookup(session, User, user_id)
        member = session.get(AccountMember, (account.id, user.id)) if user else None
        if member is None or user is None:
            raise NotFound(f"user {user_id} is no member of {account.name}")
        return member, user

    # -- the cluster's users and service accounts ----------------------------------------------

    def list_users(self, who: Principal) -> list[UserView]:
        """Every user of the cluster, by email (cluster administrators)."""
        require(who, Permission.ADMINISTER_CLUSTER, "list the cluster's users")
        with self.sessions() as session:
            return [UserView.of(row) for row in session.scalars(select(User).order_by(User.email))]

    def get_user(self, who: Principal, user_id: str) -> UserView:
        """Any user of the cluster (cluster administrators)."""
        require(who, Permission.ADMINISTER_CLUSTER, "read the cluster's users")
        return self.get_member(who, user_id)

    def update_user(
        self,
        who: Principal,
        user_id: str,
        *,
        email: str | None = None,
        password: str | None = None,
    ) -> UserView:
        """Change any user's email and password together, or neither (cluster
        administrators); a new password is policy checked and ends a lockout."""
        require(who, Permission.ADMINISTER_CLUSTER, "change the cluster's users")

        def change(session: Session) -> UserView:
            user = self._visible_user(session, who, user_id)
            detail: dict[str, Any] = {}
            if email is not None and email != user.email:
                self._rename_user(session, who, user, _checked_email(email))
                detail["email"] = user.email
            if password:
                self._set_password(user, password, require_update=False)
                detail["new_credentials"] = True
            user.updated_at = self.clock()
            self._audit(
                session, who, AuditAction.MEMBER_UPDATED, user.organization_id,
                f"user {user.email}", detail=detail,
            )  # fmt: skip
            return UserView.of(user)

        return checked_write(self.sessions, change)

    def create_service_account(
        self, name: str, kind: str, *, by: Principal | None = None
    ) -> tuple[Principal, str]:
        """A service account of the cluster (admin, monitoring or provisioner) and its first
        token (shown once). ``by``: the cluster administrator asking (None: the server's own
        command line)."""
        if by is not None:
            require(by, Permission.ADMINISTER_CLUSTER, "create service accounts")
        chosen = account_kind(kind)
        if chosen not in SERVICE_ACCOUNT_KINDS:
            kinds = ", ".join(sorted(k.value for k in SERVICE_ACCOUNT_KINDS))
            raise InvalidArgument(f"kind: a service account is one of {kinds}, not {kind!r}")
        created, token = self.accounts.create(_checked_name("service account", name), kind=chosen)
        self.audit.record(
            AuditAction.SERVICE_ACCOUNT_CREATED,
            actor=_actor(by),
            actor_id=(by.user_id or by.account_id) if by else None,
            target=f"service account {created.name}",
            source=by.source if by else "",
            detail={"kind": chosen.value},
        )
        return created, token

    def list_service_accounts(self, who: Principal) -> list[AccountView]:
        """The cluster's service accounts, by name (cluster administrators)."""
        require(who, Permission.ADMINISTER_CLUSTER, "list service accounts")
        kinds = [k.value for k in SERVICE_ACCOUNT_KINDS]
        with self.sessions() as session:
            rows = session.scalars(
                select(Account).where(Account.kind.in_(kinds)).order_by(Account.name)
            )
            return [AccountView.of(row) for row in rows]

    # -- audit ---------------------------------------------------------------------------------

    def audit_page(self, who: Principal, query: AuditQuery) -> AuditPage:
        """A page of the audit log (cluster administrators)."""
        require(who, Permission.ADMINISTER_CLUSTER, "read the audit log")
        return self.audit.query(query)

    def _audit(
        self,
        session: Session,
        who: Principal,
        action: AuditAction,
        organization_id: str | None,
        target: str,
        *,
        detail: dict[str, Any] | None = None,
        source: str = "",
    ) -> None:
        """Record ``who``'s ``action`` within ``session`` (it commits with the change)."""
        self.audit.record(
            action,
            actor=_actor(who),
            actor_id=who.user_id or who.account_id,
            organization_id=organization_id,
            target=target,
            source=source or who.source,
            detail=detail,
            session=session,
        )


def _organization_name_free(session: Session, name: str, *, but: str | None = None) -> None:
    """AlreadyExists when an organization other than ``but`` is named ``name`` (only cluster
    administrators and the server's command line create or name organizations)."""
    clash = session.scalars(select(Organization).where(Organization.name == name)).first()
    if clash is not None and clash.id != but:
        raise AlreadyExists(f"organization {name!r} already exists")


def _account_name_free(
    session: Session, organization_id: str | None, name: str, *, but: str | None = None
) -> None:
    """AlreadyExists when an account of ``organization_id`` (None: the cluster's own) other
    than ``but`` is named ``name``: a group, or a member's personal account (named after
    their email). Names are the organization's own; another organization's accounts are
    never looked at."""
    clash = session.scalars(
        select(Account.id).where(Account.organization_id == organization_id, Account.name == name)
    ).first()
    if clash is not None and clash != but:
        raise AlreadyExists(f"an account named {name!r} already exists in this organization")


def _email_free(
    session: Session, email: str, organization_id: str, *, tell_where: bool, but: str = ""
) -> None:
    """Refuse ``email`` for a user of ``organization_id`` when a user other than ``but``
    signs in with it: an email names one user of the cluster, since signing in asks for no
    organization.

    A user of the same organization is AlreadyExists, as the organization's owners can list
    its members anyway. A user of another organization is that organization's own: unless
    ``tell_where`` (a cluster administrator, who sees every organization), the refusal says
    neither that a user has the email nor where, only that this organization cannot have it
    (:data:`EMAIL_UNAVAILABLE`)."""
    holder = session.scalars(
        select(User).where(func.lower(User.email) == email.lower(), User.id != but)
    ).first()
    if holder is None:
        return
    if holder.organization_id == organization_id:
        raise AlreadyExists(f"user {email!r} is already a member of this organization")
    if tell_where:
        elsewhere = session.get(Organization, holder.organization_id)
        where = elsewhere.name if elsewhere is not None else holder.organization_id
        raise AlreadyExists(f"user {email!r} already exists in organization {where!r}")
    raise FailedPrecondition(EMAIL_UNAVAILABLE.format(email=email))


def _add_owned_account(
    session: Session,
    name: str,
    kind: AccountKind,
    organization_id: str,
    owner_id: str,
    now: float,
    *,
    personal: bool = False,
) -> Account:
    """Add an account of ``kind`` to the organization with ``owner_id`` as its owner: a
    user's personal account (``personal``: the user is its ACCOUNT_OWNER and it records
    whose it is) or a group account (its creator the GROUP_OWNER)."""
    account = Account(
        id=str(uuid.uuid4()),
        name=name,
        is_admin=False,
        kind=kind.value,
        organization_id=organization_id,
        owner_user_id=owner_id if personal else None,
        created_at=now,
    )
    session.add(account)
    session.flush()
    relationship = (
        AccountRelationship.ACCOUNT_OWNER if personal else AccountRelationship.GROUP_OWNER
    )
    session.add(
        AccountMember(
            account_id=account.id,
            user_id=owner_id,
            relationship=relationship.value,
            created_at=now,
        )
    )
    return account
