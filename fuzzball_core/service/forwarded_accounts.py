"""The accounts a member cluster keeps for the callers a Federate forwards.

A Federate calls a member with its own account's token and the signed identity of the caller
it acts for (:mod:`~fuzzball_core.service.forwarded_identity`). Acting in the Federate's
account would give every caller of the Federate one namespace on the member: the same
``volume://user/...`` and ``volume://group/...`` volumes, ``secret://`` secrets, endpoints,
``fuzzball://`` images and workflows. So the member keeps an account for each caller of each
Federate account (:attr:`ForwardedCaller.account_id`), made on the caller's first call, and the
caller acts in it: everything keyed on the account is the caller's own, exactly as for two
local accounts. The account belongs to no organization (a Federate's organization ids mean
nothing here, and taking one would reach that organization's secrets); its
``federate_account_id`` names the Federate's account, which sees the workflows it submitted
for its callers (to follow and stop them) and nothing else of theirs. Its
``federate_group_id`` (:attr:`ForwardedCaller.group_id`) stands for the caller's organization
on the Federate: the callers of one organization share ``fuzzball://group/...`` images, as one
organization's accounts do, and no other caller reads or overwrites them (a caller of no
organization has no group but its own account).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.service.forwarded_identity import ForwardedCaller
from fuzzball_core.store.models import Account
from fuzzball_core.vocabulary import AccountKind

#: the longest name kept for a caller's account (``accounts.name`` holds 200)
_NAME_ROOM = 150


class ForwardedAccounts:
    """Finds, or makes, the account a member keeps for a forwarded caller."""

    def __init__(
        self, sessions: sessionmaker[Session], *, clock: Callable[[], float] = time.time
    ) -> None:
        self.sessions = sessions
        self.clock = clock
        #: the ids of accounts known to exist: a caller's later calls read nothing
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def account_of(self, caller: ForwardedCaller) -> str:
        """The id of ``caller``'s account here, made on its first call."""
        account_id = caller.account_id
        with self._lock:
            if account_id in self._known:
                return account_id
        with self.sessions() as session:
            account = session.get(Account, account_id)
            if account is None:
                session.add(
                    Account(
                        id=account_id,
                        # unique among the cluster's accounts of no organization: the id is
                        name=f"{caller.display_name[:_NAME_ROOM]} ({account_id})",
                        kind=AccountKind.USER,
                        created_at=self.clock(),
                        federate_account_id=caller.bearer.account_id,
                        federate_group_id=caller.group_id,
                    )
                )
                try:
                    session.commit()
                except IntegrityError:  # the caller's other first call made it meanwhile
                    session.rollback()
                    if session.get(Account, account_id) is None:
                        raise
            elif account.federate_group_id != caller.group_id:
                # made before accounts kept groups (migration 0024): the organization is
                # part of the account's id, so its group never changes once set
                account.federate_group_id = caller.group_id
                session.commit()
        with self._lock:
            self._known.add(account_id)
        return account_id
