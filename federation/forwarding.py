"""The caller a Federate is acting for, carried to the member calls it makes.

Federate's service sets who it acts for around the member calls it makes for a caller
(:func:`acting_for`); each member's client carries a :class:`ForwardedIdentityAuth`, which
signs that caller's identity for that member into every request it sends
(:data:`~fuzzball_core.service.forwarded_identity.HEADER`). Calls Federate makes for itself
(asking members for their nodes to route a workflow) are made outside any
:func:`acting_for`, with the Federate account's own rights.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import httpx

from fuzzball_core.service.forwarded_identity import HEADER

#: signs the identity of the caller acted for, for a member (by the member's name)
Sign = Callable[[str], str]

_acting_for: ContextVar[Sign | None] = ContextVar("fuzzball_federate_acting_for", default=None)


@contextmanager
def acting_for(sign: Sign | None) -> Iterator[None]:
    """Member calls made within carry the identity ``sign`` signs (none: Federate's own)."""
    token = _acting_for.set(sign)
    try:
        yield
    finally:
        _acting_for.reset(token)


def current() -> Sign | None:
    """Who the calls made now act for (to carry them into worker threads)."""
    return _acting_for.get()


class ForwardedIdentityAuth(httpx.Auth):
    """Adds the signed identity of the caller acted for to each request to one member."""

    def __init__(self, audience: str) -> None:
        self.audience = audience

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        sign = _acting_for.get()
        if sign is not None:
            request.headers[HEADER] = sign(self.audience)
        yield request
