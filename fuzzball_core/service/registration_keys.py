"""The keys of Federates trusted by registration, dropped as the registration ends.

A member (an Orchestrate: ``trusted_federate_keys``; a Federate that is another's member:
``federate_trusted_federates``) trusts the forwarding key a Federate gave when it generated a
registration for it, and records with it the ``federate`` account that registration made.
When that registration ends (the Federate leaving, by DELETE or once drained, asks the member
to end it with the registration's token) the key goes too: a request signed with it is
refused from then on. A key a later registration recorded again (a draining member
registered again) belongs to that registration and stays.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.service.forwarded_identity import TrustedFederates

log = logging.getLogger("fuzzball.accounts")


def forget_keys_of(
    sessions: sessionmaker[Session], table: type[Any], account_id: str, trusted: TrustedFederates
) -> list[str]:
    """Stop trusting the keys the registration of federate account ``account_id`` recorded
    in ``table`` (a mapped class with ``name`` and ``account_id``): their rows deleted, and
    ``trusted`` no longer holding them (the configuration's key for a name, if any, is
    trusted again). The Federates' names."""
    with sessions() as session, session.begin():
        rows = list(session.scalars(select(table).where(table.account_id == account_id)))
        names = [row.name for row in rows]
        for row in rows:
            session.delete(row)
    for name in names:
        trusted.distrust(name)
        log.info("Federate %s no longer trusted: its registration ended", name)
    return names
