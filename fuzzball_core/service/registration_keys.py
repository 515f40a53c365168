"""The keys of Federates trusted by registration, dropped as the registration ends.

A member (an Orchestrate: ``trusted_federate_keys``; a Federate that is another's member:
``federate_trusted_federates``) trusts the forwarding key a Federate gave when it generated a
registration for it, and records with it the ``federate`` account that registration made.
When that registration ends (the Federate leaving, by DELETE or once drained, asks the member
to end it with the registration's token) the key goes too: a request signed with it is
refused from then on. A key a later registration recorded again (a draining member
registered again) belongs to that registration and stays. Revoking every token of the
account (``revoke-token --account NAME``, what a member's administrator is told to do when
the Federate could not reach it as it left) ends the registration the same way.

The key is honoured only beside a live token of its account
(:class:`~fuzzball_core.service.forwarded_identity.TrustedFederate`), so a registration whose
tokens all expired (the Federate's end of it arriving too late, answered Unauthenticated)
trusts nothing; :func:`forget_lapsed_keys` deletes such keys' rows as well, at start and
when revocations are caught up, so that none is kept forever. So does it a key recorded before
registrations named their account that the migrations (0019, f0006) matched to none: no
registration can be named for it, so nothing it signs is honoured, and the Federate must
register again.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.forwarded_identity import TrustedFederates

log = logging.getLogger("fuzzball.accounts")


def forget_keys_of(
    sessions: sessionmaker[Session],
    table: type[Any],
    account_ids: Collection[str],
    trusted: TrustedFederates,
) -> list[str]:
    """Stop trusting the keys the registrations of federate accounts ``account_ids``
    recorded in ``table`` (a mapped class with ``name`` and ``account_id``): their rows
    deleted, and ``trusted`` no longer holding any recorded key whose row is gone (another
    process may have deleted it: the server's ``revoke-token --account`` command; the
    configuration's key for a name, if any, is trusted again). The names no longer
    trusted."""
    with sessions() as session, session.begin():
        if account_ids:
            for row in session.scalars(select(table).where(table.account_id.in_(account_ids))):
                session.delete(row)
            session.flush()
        kept = set(session.scalars(select(table.name)))
    return _distrust_all_but(kept, trusted, "its registration ended")


def forget_lapsed_keys(
    accounts: Accounts, table: type[Any], trusted: TrustedFederates
) -> list[str]:
    """Stop trusting the keys in ``table`` whose registration's account (in ``accounts``'
    token table) has no live token left, each expired or revoked, or that name no account
    at all (recorded before revision 0019 / f0006, which found none for them): such a key
    could no longer be honoured (it needs a live token of its account), so its row is
    deleted rather than kept forever. The names no longer trusted."""
    tokens = accounts.token_table
    live = select(tokens.account_id).where(
        tokens.revoked_at.is_(None),
        or_(tokens.expires_at.is_(None), tokens.expires_at > accounts.clock()),
    )
    with accounts.sessions() as session, session.begin():
        unnamed = list(session.scalars(select(table.name).where(table.account_id.is_(None))))
        lapsed = select(table).where(or_(table.account_id.is_(None), table.account_id.not_in(live)))
        for row in session.scalars(lapsed):
            session.delete(row)
        session.flush()
        kept = set(session.scalars(select(table.name)))
    for name in unnamed:
        log.warning(
            "Federate %s's key was recorded before registrations named their account and no"
            " account was found for it: it is no longer trusted; the Federate must register"
            " again (configuration:generate)",
            name,
        )
    return _distrust_all_but(kept, trusted, "its registration's tokens all expired or were revoked")


def _distrust_all_but(kept: set[str], trusted: TrustedFederates, why: str) -> list[str]:
    """Distrust each recorded key of ``trusted`` whose name ``kept`` (the rows left) lacks;
    those names."""
    gone = [name for name in trusted.recorded() if name not in kept]
    for name in gone:
        trusted.distrust(name)
        log.info("Federate %s no longer trusted: %s", name, why)
    return gone
