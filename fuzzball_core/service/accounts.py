"""Accounts and their bearer tokens, as every API front (Orchestrate, Federate) keeps them.

Tokens are shown once and stored only as their SHA-256 digest. Each is accepted until it
expires (``accounts.token-lifetime`` after it was issued) or is revoked; either way it is
then Unauthenticated, saying which. An account's kind (admin, monitoring, provisioner, user)
is set when it is created and says what it may do beyond its own workflows. Each revocation,
once committed, is told to whoever keeps callers (:attr:`Accounts.revocations`).
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.config import DEFAULT_TOKEN_LIFETIME
from fuzzball_core.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from fuzzball_core.service.revocations import Revocation, Revocations
from fuzzball_core.service.views import Principal
from fuzzball_core.store.database import checked_write
from fuzzball_core.store.models import Account, ApiToken, User
from fuzzball_core.vocabulary import AccountKind, CredentialKind


def token_digest(token: str) -> str:
    """What the store keeps of a bearer token."""
    return hashlib.sha256(token.encode()).hexdigest()


def account_kind(kind: str) -> AccountKind:
    """``kind`` as an :class:`AccountKind`; InvalidArgument naming the kinds there are."""
    try:
        return AccountKind(kind)
    except ValueError:
        kinds = ", ".join(k.value for k in AccountKind)
        raise InvalidArgument(f"kind: {kind!r} is not an account kind ({kinds})") from None


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Accounts:
    """Creates accounts, issues, authenticates and revokes tokens, over one store.

    The tables are Orchestrate's ``accounts``/``api_tokens`` unless the caller names its own
    mapped classes with the same columns (Federate keeps its accounts in its own tables).
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        account_table: type[Any] = Account,
        token_table: type[Any] = ApiToken,
        *,
        token_lifetime: float = DEFAULT_TOKEN_LIFETIME,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions
        self.account_table = account_table
        self.token_table = token_table
        self.token_lifetime = token_lifetime
        self.clock = clock
        #: told of every revocation made through these accounts (and the identity service
        #: over them), once committed
        self.revocations = Revocations()

    def create(
        self, name: str, *, kind: str = AccountKind.USER, admin: bool = False
    ) -> tuple[Principal, str]:
        """Create an account of the cluster (of no organization) of ``kind`` (``admin=True``
        is kind admin) and its first token. Its name is unique among the cluster's accounts;
        an organization's group of the same name is another account."""
        chosen = AccountKind.ADMIN if admin else account_kind(kind)

        def create(session: Session) -> tuple[Principal, str]:
            if session.scalars(
                self._cluster_accounts().where(self.account_table.name == name)
            ).first():
                raise AlreadyExists(f"account {name!r} already exists")
            account = self.account_table(
                id=str(uuid.uuid4()),
                name=name,
                is_admin=chosen == AccountKind.ADMIN,
                kind=chosen.value,
                created_at=self.clock(),
            )
            session.add(account)
            session.flush()
            token = self._add_token(session, self.token_row(account.id))
            return Principal(account.id, name, account.is_admin, chosen), token

        return checked_write(self.sessions, create)

    def _cluster_accounts(self) -> Any:
        """A SELECT of the cluster's own accounts: those of no organization (every account
        of a table that has no organizations, as Federate's)."""
        statement = select(self.account_table)
        organization = getattr(self.account_table, "organization_id", None)
        return statement if organization is None else statement.where(organization.is_(None))

    def issue_token(self, name: str) -> str:
        """A new bearer token for an existing account."""
        with self.sessions() as session, session.begin():
            return self._add_token(session, self.token_row(self._account(session, name).id))

    def _account(self, session: Session, name: str) -> Any:
        """The account the server's command line names (``issue-token NAME``,
        ``revoke-token --account NAME``): the cluster's own account of that name (a group
        an organization names alike never stands in for it), else the one organization
        account of that name, else the account with that id. FailedPrecondition when
        several organizations have an account of that name: the id then says which."""
        table = self.account_table
        account = session.scalars(self._cluster_accounts().where(table.name == name)).first()
        if account is not None:
            return account
        named = session.scalars(select(table).where(table.name == name).limit(2)).all()
        if len(named) > 1:
            raise FailedPrecondition(
                f"account {name!r}: several organizations have an account of that name;"
                " name the one meant by its id"
            )
        account = named[0] if named else session.get(table, name)
        if account is None:
            raise NotFound(f"account {name!r} not found")
        return account

    def _add_token(self, session: Session, minted: tuple[str, dict[str, Any]]) -> str:
        """Add the row of ``minted`` (from :meth:`token_row`) to ``session``; its token."""
        token, row = minted
        session.add(self.token_table(**row))
        return token

    def token_row(
        self,
        account_id: str,
        *,
        user_id: str | None = None,
        credential: str = CredentialKind.API,
        workflow_id: str | None = None,
        lifetime: float | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """A new bearer token (as :meth:`issue_for` has it) and the columns of its row in
        the token table, for a caller that writes the row itself: the engine's pass inserts
        the tokens it mints with one Core statement, not an ORM row each."""
        token = secrets.token_urlsafe(32)
        now = self.clock()
        row: dict[str, Any] = {
            "account_id": account_id,
            "token_sha256": token_digest(token),
            "created_at": now,
            "expires_at": now + (self.token_lifetime if lifetime is None else lifetime),
        }
        if hasattr(self.token_table, "credential"):
            row.update(user_id=user_id, credential=credential, workflow_id=workflow_id)
        return token, row

    def issue_for(
        self,
        account_id: str,
        *,
        user_id: str | None = None,
        credential: str = CredentialKind.API,
        workflow_id: str | None = None,
        lifetime: float | None = None,
        session: Session | None = None,
    ) -> str:
        """A new bearer token for account ``account_id``, acting as ``user_id`` (None: the
        account itself, a service account), of ``credential`` kind (an account's API token,
        or a workflow's own, tied to ``workflow_id``), valid for ``lifetime`` seconds (the
        configured token lifetime by default). Within ``session`` when one is given (so the
        token is part of the caller's transaction)."""
        minted = self.token_row(
            account_id,
            user_id=user_id,
            credential=credential,
            workflow_id=workflow_id,
            lifetime=lifetime,
        )
        if session is not None:
            return self._add_token(session, minted)
        with self.sessions() as own, own.begin():
            return self._add_token(own, minted)

    def authenticate(self, token: str) -> Principal:
        """The owner of ``token``; Unauthenticated when it is missing, unknown, expired or
        revoked (the message says which, never the token). A user's token carries the
        user's organization, role and cluster-administrator flag."""
        if not token:
            raise Unauthenticated("a bearer token is required (Authorization: Bearer <token>)")
        with self.sessions() as session:
            found = session.execute(
                select(self.account_table, self.token_table)
                .join(self.token_table, self.token_table.account_id == self.account_table.id)
                .where(self.token_table.token_sha256 == token_digest(token))
            ).first()
            if found is None:
                raise Unauthenticated("the bearer token is not valid")
            account, issued = found
            if issued.revoked_at is not None:
                raise Unauthenticated(
                    f"the bearer token was revoked at {_utc(issued.revoked_at)}; ask for a new one"
                )
            if issued.expires_at is not None and issued.expires_at <= self.clock():
                raise Unauthenticated(
                    f"the bearer token expired at {_utc(issued.expires_at)}; ask for a new one"
                )
            user_id = getattr(issued, "user_id", None)
            user = session.get(User, user_id) if user_id else None
            if user_id and user is None:
                raise Unauthenticated("the bearer token's user no longer exists")
        credential = getattr(issued, "credential", CredentialKind.API) or CredentialKind.API
        if user is None:
            return Principal(
                account.id,
                account.name,
                account.is_admin,
                AccountKind(account.kind),
                organization_id=getattr(account, "organization_id", None),
                credential=credential,
                workflow_id=getattr(issued, "workflow_id", None),
            )
        return Principal(
            account.id,
            account.name,
            account.is_admin or user.cluster_admin,
            AccountKind(account.kind),
            user_id=user.id,
            email=user.email,
            organization_id=user.organization_id,
            role=user.role,
            credential=credential,
            workflow_id=getattr(issued, "workflow_id", None),
        )

    def revoke(self, token: str) -> None:
        """Revoke one token (by its value): it is never accepted again. NotFound when no
        account has it."""
        with self.sessions() as session, session.begin():
            issued = session.scalars(
                select(self.token_table).where(self.token_table.token_sha256 == token_digest(token))
            ).first()
            if issued is None:
                raise NotFound("no account has this bearer token")
            if issued.revoked_at is None:
                issued.revoked_at = self.clock()
        self.revocations.announce(Revocation(token_digests=frozenset({token_digest(token)})))

    def end_registration(self, who: Principal, token: str) -> None:
        """The member's side of a Federate leaving it (``DELETE /v3/admin/cluster/{id}``
        with this cluster's own id): ``token``, the registration's own that ``who``
        presented, is revoked. PermissionDenied for a caller that is no ``federate`` account
        acting as itself (an administrator revokes a registration's tokens with the server's
        ``fuzzball-orchestrate revoke-token --account NAME``)."""
        if who.kind != AccountKind.FEDERATE or who.user_id is not None:
            raise PermissionDenied(
                "only a Federate ends its registration here, with the registration's own"
                " token; an administrator revokes one with"
                " `fuzzball-orchestrate revoke-token --account NAME` on the server"
            )
        self.revoke(token)

    def revoke_all(self, name: str) -> int:
        """Revoke every live token of account ``name``; how many were revoked."""
        now = self.clock()
        with self.sessions() as session, session.begin():
            account_id = self._account(session, name).id
            revoked = session.execute(
                update(self.token_table)
                .where(
                    self.token_table.account_id == account_id,
                    self.token_table.revoked_at.is_(None),
                )
                .values(revoked_at=now)
            )
            count = int(getattr(revoked, "rowcount", 0) or 0)
        self.revocations.announce(Revocation(account_ids=frozenset({account_id})))
        return count


class AccountCalls:
    """The account calls of the service contract, answered from :attr:`accounts`.

    Orchestrate's and Federate's services both serve them from their own token store, so they
    inherit them from here instead of each spelling out the same delegation.
    """

    accounts: Accounts

    def create_account(
        self, name: str, *, admin: bool = False, kind: str = AccountKind.USER
    ) -> tuple[Principal, str]:
        """Create an account of ``kind`` (``admin=True``: kind admin) and its first bearer
        token (shown once, stored hashed)."""
        return self.accounts.create(name, admin=admin, kind=kind)

    def issue_token(self, name: str) -> str:
        """A new bearer token for an existing account."""
        return self.accounts.issue_token(name)

    def revoke_token(self, token: str) -> None:
        """Revoke one bearer token: it is Unauthenticated from now on."""
        self.accounts.revoke(token)

    def revoke_tokens(self, name: str) -> int:
        """Revoke every live bearer token of account ``name``; how many there were."""
        return self.accounts.revoke_all(name)

    def authenticate(self, token: str) -> Principal:
        """The caller owning ``token``; Unauthenticated if it is missing, unknown, expired or
        revoked."""
        return self.accounts.authenticate(token)
