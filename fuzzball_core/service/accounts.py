"""Accounts and their bearer tokens, as every API front (Orchestrate, Federate) keeps them.

Tokens are shown once and stored only as their SHA-256 digest.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.errors import AlreadyExists, NotFound, Unauthenticated
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import Account, ApiToken


def token_digest(token: str) -> str:
    """What the store keeps of a bearer token."""
    return hashlib.sha256(token.encode()).hexdigest()


class Accounts:
    """Creates accounts, issues tokens and authenticates them, over one store."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    def create(self, name: str, *, admin: bool = False) -> tuple[Principal, str]:
        """Create an account and its first bearer token."""
        token = secrets.token_urlsafe(32)
        with self.sessions() as session, session.begin():
            if session.scalars(select(Account).where(Account.name == name)).first():
                raise AlreadyExists(f"account {name!r} already exists")
            account = Account(
                id=str(uuid.uuid4()), name=name, is_admin=admin, created_at=time.time()
            )
            session.add(account)
            session.flush()
            session.add(
                ApiToken(
                    account_id=account.id, token_sha256=token_digest(token), created_at=time.time()
                )
            )
        return Principal(account.id, name, admin), token

    def issue_token(self, name: str) -> str:
        """A new bearer token for an existing account."""
        token = secrets.token_urlsafe(32)
        with self.sessions() as session, session.begin():
            account = session.scalars(select(Account).where(Account.name == name)).first()
            if account is None:
                raise NotFound(f"account {name!r} not found")
            session.add(
                ApiToken(
                    account_id=account.id, token_sha256=token_digest(token), created_at=time.time()
                )
            )
        return token

    def authenticate(self, token: str) -> Principal:
        """The owner of ``token``; Unauthenticated when it is missing or unknown."""
        if not token:
            raise Unauthenticated("a bearer token is required (Authorization: Bearer <token>)")
        with self.sessions() as session:
            row = (
                session.execute(
                    select(Account)
                    .join(ApiToken, ApiToken.account_id == Account.id)
                    .where(ApiToken.token_sha256 == token_digest(token))
                )
                .scalars()
                .first()
            )
            if row is None:
                raise Unauthenticated("the bearer token is not valid")
            return Principal(row.id, row.name, row.is_admin)
