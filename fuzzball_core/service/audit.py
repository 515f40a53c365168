"""The audit log: who did what to what, when, from where, and how it went.

Every entry is one :class:`~fuzzball_core.store.models.AuditEntry` row with an increasing
``seq``. Callers record logins, failures, lockouts, secret reads, administrative actions and
holds (:class:`~fuzzball_core.vocabulary.AuditAction`); ``fuzzball admin audit list`` and
``GET /v3/admin/audit`` read them back a page at a time, newest first unless asked otherwise,
filtered by action, actor, organization, time and outcome.

Entries never hold a secret's value, a password or a token: :meth:`AuditLog.record` refuses a
``detail`` key that names one (a programming error, so it fails loudly in tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.store.models import AuditEntry
from fuzzball_core.vocabulary import AuditAction

#: The outcomes an entry may have.
OUTCOMES = ("ok", "denied", "failed")
#: The most entries one page holds, and how many a page holds when the caller names no size.
MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE = 500, 50
#: ``detail`` keys that would hold a secret (any key ending in one of them is refused): the
#: values they name never enter the log.
_SECRET_KEYS = ("password", "token", "value", "ciphertext")


@dataclass(frozen=True)
class AuditEntryView:
    """One entry of the audit log, as callers read it."""

    seq: int
    at: float
    action: str
    outcome: str
    actor: str
    actor_id: str | None = None
    organization_id: str | None = None
    target: str = ""
    source: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditQuery:
    """What to read of the log: every field left at its default does not filter.

    ``page_token`` is the ``seq`` a previous page ended before (newest first) or after
    (oldest first), as :class:`AuditPage` hands it back.
    """

    action: str | None = None
    actor: str | None = None
    organization_id: str | None = None
    outcome: str | None = None
    since: float | None = None
    until: float | None = None
    oldest_first: bool = False
    page_size: int = DEFAULT_PAGE_SIZE
    page_token: str = ""


@dataclass(frozen=True)
class AuditPage:
    """A page of entries and the token of the next ("" when this is the last)."""

    entries: tuple[AuditEntryView, ...]
    next_page_token: str = ""


def audit_action(action: str) -> AuditAction:
    """``action`` as an :class:`AuditAction`; InvalidArgument naming the actions there are."""
    try:
        return AuditAction(action)
    except ValueError:
        known = ", ".join(a.value for a in AuditAction)
        raise InvalidArgument(f"action: {action!r} is not an audit action ({known})") from None


class AuditLog:
    """Records entries and reads them back, over Orchestrate's store and ``clock``."""

    def __init__(
        self, sessions: sessionmaker[Session], clock: Callable[[], float] = time.time
    ) -> None:
        self.sessions = sessions
        self.clock = clock

    def record(
        self,
        action: AuditAction,
        *,
        actor: str = "",
        actor_id: str | None = None,
        organization_id: str | None = None,
        target: str = "",
        outcome: str = "ok",
        source: str = "",
        detail: Mapping[str, Any] | None = None,
        session: Session | None = None,
    ) -> None:
        """Add one entry. Within ``session`` when given (the entry then commits or rolls back
        with the caller's change); otherwise in a transaction of its own, so an entry of a
        refused attempt (a failed login) is kept although the caller then raises."""
        if outcome not in OUTCOMES:
            raise ValueError(f"audit outcome {outcome!r} is not one of {OUTCOMES}")
        kept = dict(detail or {})
        for key in kept:
            if key.lower().replace("-", "_").endswith(_SECRET_KEYS):
                raise ValueError(f"audit detail {key!r} may hold a secret; it is never logged")
        entry = AuditEntry(
            at=self.clock(),
            action=AuditAction(action).value,
            outcome=outcome,
            organization_id=organization_id,
            actor=_storable(actor)[:320],
            actor_id=actor_id,
            target=_storable(target)[:500],
            source=_storable(source)[:100],
            detail=kept,
        )
        if session is not None:
            session.add(entry)
            return
        with self.sessions() as own, own.begin():
            own.add(entry)

    def query(self, query: AuditQuery = AuditQuery()) -> AuditPage:
        """A page of the entries ``query`` selects, newest first unless ``oldest_first``."""
        size = query.page_size or DEFAULT_PAGE_SIZE
        if not 1 <= size <= MAX_PAGE_SIZE:
            raise InvalidArgument(f"pageSize: expected 1 to {MAX_PAGE_SIZE}, got {size}")
        if query.outcome is not None and query.outcome not in OUTCOMES:
            raise InvalidArgument(f"outcome: {query.outcome!r} is not one of {', '.join(OUTCOMES)}")
        for name, text in (("actor", query.actor), ("organizationId", query.organization_id)):
            if text is not None and (len(text) > 320 or not text.isprintable()):
                raise InvalidArgument(f"{name}: at most 320 printable characters")
        statement = select(AuditEntry)
        if query.action is not None:
            statement = statement.where(AuditEntry.action == audit_action(query.action).value)
        if query.actor is not None:
            statement = statement.where(AuditEntry.actor == query.actor)
        if query.organization_id is not None:
            statement = statement.where(AuditEntry.organization_id == query.organization_id)
        if query.outcome is not None:
            statement = statement.where(AuditEntry.outcome == query.outcome)
        if query.since is not None:
            statement = statement.where(AuditEntry.at >= query.since)
        if query.until is not None:
            statement = statement.where(AuditEntry.at < query.until)
        if query.page_token:
            after = _page_token(query.page_token)
            statement = statement.where(
                AuditEntry.seq > after if query.oldest_first else AuditEntry.seq < after
            )
        order = AuditEntry.seq.asc() if query.oldest_first else AuditEntry.seq.desc()
        with self.sessions() as session:
            rows = session.scalars(statement.order_by(order).limit(size + 1)).all()
            entries = tuple(_view(row) for row in rows[:size])
        more = len(rows) > size
        return AuditPage(entries, str(entries[-1].seq) if more else "")


def _storable(text: str) -> str:
    """``text`` with its NULs escaped: what a client typed (the email of a failed sign-in)
    may hold them, and PostgreSQL's text refuses them."""
    return text.replace("\x00", "\\x00")


def _page_token(token: str) -> int:
    if not (token.isascii() and token.isdigit() and len(token) <= 18):
        raise InvalidArgument(f"pageToken: {token[:40]!r} is not a page token of the audit log")
    return int(token)


def _view(row: AuditEntry) -> AuditEntryView:
    return AuditEntryView(
        seq=row.seq,
        at=row.at,
        action=row.action,
        outcome=row.outcome,
        actor=row.actor,
        actor_id=row.actor_id,
        organization_id=row.organization_id,
        target=row.target,
        source=row.source,
        detail=dict(row.detail or {}),
    )
