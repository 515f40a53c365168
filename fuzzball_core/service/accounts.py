"""Accounts and their bearer tokens, as every API front (Orchestrate, Federate) keeps them.

Tokens are shown once and stored only as their SHA-256 digest.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.errors import AlreadyExists, NotFound, Unauthenticated
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import Account, ApiToken


def token_digest(token: str) -> str:
    """What the store keeps of a bearer token."""
    return hashlib.sha256(token.encode()).hexdigest()


class Accounts:
    """Creates accounts, issues tokens and authenticates them, over one store.

    The tables are Orchestrate's ``accounts``/``api_tokens`` unless the caller names its own
    mapped classes with the same columns (Federate keeps its accounts in its own tables).
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        account_table: type[Any] = Account,
        token_table: type[Any] = ApiToken,
    ) -> None:
        self.sessions = sessions
        self.account_table = account_table
        self.token_table = token_table

    def create(self, name: str, *, admin: bool = False) -> tuple[Principal, str]:
        """Create an account and its first bearer token."""
        token = secrets.token_urlsafe(32)
        with self.sessions() as session, session.begin():
            if session.scalars(
                select(self.account_table).where(self.account_table.name == name)
            ).first():
                raise AlreadyExists(f"account {name!r} already exists")
            account = self.account_table(
                id=str(uuid.uuid4()), name=name, is_admin=admin, created_at=time.time()
            )
            session.add(account)
            session.flush()
            session.add(
                self.token_table(
                    account_id=account.id, token_sha256=token_digest(token), created_at=time.time()
                )
            )
        return Principal(account.id, name, admin), token

    def issue_token(self, name: str) -> str:
        """A new bearer token for an existing account."""
        token = secrets.token_urlsafe(32)
        with self.sessions() as session, session.begin():
            account = session.scalars(
                select(self.account_table).where(self.account_table.name == name)
            ).first()
            if account is None:
                raise NotFound(f"account {name!r} not found")
            session.add(
                self.token_table(
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
                    select(self.account_table)
                    .join(self.token_table, self.token_table.account_id == self.account_table.id)
                    .where(self.token_table.token_sha256 == token_digest(token))
                )
                .scalars()
                .first()
            )
            if row is None:
                raise Unauthenticated("the bearer token is not valid")
            return Principal(row.id, row.name, row.is_admin)
