"""Revocations, told at once to whoever keeps authenticated callers for a while.

A token's check reads its row, so the API refuses a revoked token at its next request. Whoever
keeps a token's caller to spare that check (the endpoint proxy keeps each token's caller and
each group membership for ``TOKEN_TTL``) subscribes to its :class:`~fuzzball_core.service.
accounts.Accounts`' :class:`Revocations` and forgets what a :class:`Revocation` covers as soon
as it is committed: a token revoked one by one or with its account's, an account (a group)
deleted, a user removed, a member leaving a group, a workflow's tokens revoked as it ends.
Another process's revocations (the server's ``revoke-token`` command) are announced here by
the server's :class:`~fuzzball_core.service.revocation_channel.RevocationReceiver`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from fuzzball_core.listeners import Listeners
from fuzzball_core.service.views import Principal

log = logging.getLogger("fuzzball.accounts")


@dataclass(frozen=True)
class Revocation:
    """What stopped being good, committed: tokens (by their digest, as the store keeps
    them), every token of some accounts, every token acting as some users, group
    memberships ``(user id, account id)`` that ended (with the user's tokens for the group),
    and the tokens of some workflows (revoked as each ended). ``everything``: anything may
    have been revoked unheard (the revocation channel was down: ``service/
    revocation_channel.py``), so nothing kept may be let in as kept; it is told in this
    process only, never sent."""

    token_digests: frozenset[str] = frozenset()
    account_ids: frozenset[str] = frozenset()
    user_ids: frozenset[str] = frozenset()
    memberships: frozenset[tuple[str, str]] = frozenset()
    workflow_ids: frozenset[str] = frozenset()
    everything: bool = False

    def covers(self, digest: Callable[[], str], who: Principal) -> bool:
        """Whether a caller ``who`` kept for a token (``digest`` gives that token's digest,
        computed only when tokens were revoked one by one) may no longer be let in as kept:
        its token, account, user or workflow is revoked, or its user left a group (what it
        was let into may have been through that group)."""
        if self.everything or who.account_id in self.account_ids:
            return True
        if who.workflow_id is not None and who.workflow_id in self.workflow_ids:
            return True
        if who.user_id is not None and (
            who.user_id in self.user_ids or any(who.user_id == u for u, _ in self.memberships)
        ):
            return True
        return bool(self.token_digests) and digest() in self.token_digests

    def ends_membership(self, user_id: str, account_id: str) -> bool:
        """Whether user ``user_id``'s membership of ``account_id`` may no longer be taken as
        kept: it ended, or the user or the account is gone."""
        return (
            self.everything
            or (user_id, account_id) in self.memberships
            or user_id in self.user_ids
            or account_id in self.account_ids
        )


#: told each committed revocation, in the thread that made it
Listener = Callable[[Revocation], None]


class Revocations:
    """Who is told of revocations (one per :class:`Accounts`, shared by whatever revokes
    through it: the account calls, the identity service, the Web UI's sign-out)."""

    def __init__(self) -> None:
        self._listeners: Listeners[Revocation] = Listeners()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Tell ``listener`` of every revocation from now on; returns what unsubscribes it."""
        return self._listeners.subscribe(listener)

    def announce(self, revocation: Revocation) -> None:
        """Tell every listener of ``revocation`` (committed: a listener that asks the store
        again must find it). A listener that fails is logged: the revocation stands."""
        for listener in self._listeners.current():
            try:
                listener(revocation)
            except Exception:
                log.exception("a listener of revocations failed")
