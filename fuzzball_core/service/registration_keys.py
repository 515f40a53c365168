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
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

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
    gone = [name for name in trusted.recorded() if name not in kept]
    for name in gone:
        trusted.distrust(name)
        log.info("Federate %s no longer trusted: its registration ended", name)
    return gone
