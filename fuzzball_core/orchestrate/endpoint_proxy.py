"""The endpoint proxy: users reach workflow services at ``/endpoints/{id}/...`` or at
``{id}.<endpoints domain>``, on Orchestrate's endpoint listener (``orchestrate.endpoints``).

This module decides where each request goes (:meth:`EndpointProxy.gate`); the bytes move
in :mod:`endpoint_forwarder`: the request passed on as it came (method, path below the
endpoint, query, headers, its body), the answer passed back as the service writes it, so
Server-Sent Events and long downloads flow, over kept-alive connections to each service; a
websocket upgrade the service accepts becomes a tunnel between the two connections.

Who may use an endpoint is its scope: ``user`` (the user who declared it), ``group`` (the
account in use is the endpoint's, or the user is a member of it), ``organization`` (the
same organization), ``public`` (anyone). The caller's Fuzzball token comes in
``FB-Authorization: Bearer TOKEN`` or in the cookie ``orchestrate.endpoints.cookie``; it is
never passed on, while the service's own ``Authorization`` header is passed on untouched.

Answers of its own are google.rpc.Status bodies: 401 when a token is needed and missing or
not valid, 404 when the endpoint does not exist (or the caller may not see it), 503 with
``Retry-After`` when it exists but its service is not ready or the lookup failed, 502 when
the service does not answer. A pool scaled to zero is woken by the request of a caller its
scope lets in (for a public endpoint: a member of its organization presenting a token),
which waits up to ``wake-timeout`` for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlalchemy import select

from fuzzball_core.config import EndpointsConfig
from fuzzball_core.errors import (
    FuzzballError,
    NotFound,
    Unauthenticated,
    Unavailable,
)
from fuzzball_core.health import Health
from fuzzball_core.orchestrate import service_pools
from fuzzball_core.orchestrate.endpoint_directory import Destination, EndpointDirectory, Upstream
from fuzzball_core.orchestrate.endpoint_forwarder import (
    Forward,
    RequestHead,
    ServicePool,
    serve,
)
from fuzzball_core.orchestrate.endpoint_keeper import EndpointKeeper
from fuzzball_core.orchestrate.endpoint_routes import endpoint_routes
from fuzzball_core.orchestrate.endpoint_urls import EndpointUrls
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import AccountMember

log = logging.getLogger("fuzzball.orchestrate.endpoints")

#: how often a request waiting for a pool to wake looks again, and asks it to wake again
WAKE_POLL = 0.1
WAKE_AGAIN = 1.0
#: seconds an authenticated token's caller is reused (a revoked token is refused within it)
TOKEN_TTL = 2.0
_PATH_PREFIX = "/endpoints/"


@dataclass(frozen=True)
class Caller:
    """Who asks: an authenticated principal, or nobody (no token)."""

    principal: Principal | None


class EndpointProxy:
    """What the proxy decides for each request, and the connections it keeps to services."""

    def __init__(
        self,
        engine: Engine,
        authenticate: Callable[[str], Principal],
        config: EndpointsConfig,
        directory: EndpointDirectory,
        keeper: EndpointKeeper,
    ) -> None:
        self.engine = engine
        self.authenticate = authenticate
        self.config = config
        self.directory = directory
        self.keeper = keeper
        self._tokens: dict[str, tuple[float, Principal | FuzzballError]] = {}
        self._members: dict[tuple[str, str], tuple[float, bool]] = {}
        self.pool = ServicePool(
            ssl.create_default_context() if config.verify_upstream_tls else False
        )

    # -- one request -----------------------------------------------------------------------

    async def gate(self, head: RequestHead) -> Forward:
        """Find the endpoint, check the caller, and say where the request goes (a
        FuzzballError is the client's answer)."""
        endpoint_id, path = self._route(head.header(b"host"), head.target)
        caller = self._caller(head)
        destination = self._destination(endpoint_id, caller)
        upstream = destination.upstream
        if upstream is None or not upstream.ready:
            upstream = await self._ready_upstream(destination, caller)
        if upstream.pool:
            self.keeper.touch(upstream.workflow_id, upstream.stage_name, upstream.idle_timeout)
        cookie: str | None = None
        if self.config.cookie and head.cookies:
            sent = b"; ".join(head.cookies).decode("latin-1")
            cookie = _without_cookie(sent, self.config.cookie)
        return Forward(url=upstream.url, path=path, cookie=cookie)

    def _route(self, host_header: str, raw: str) -> tuple[str, str]:
        """(endpoint id, the path to ask the service for, with its query)."""
        host = host_header.rsplit(":", 1)[0].lower() if host_header else ""
        domain = self.config.domain.lower()
        if domain and host.endswith("." + domain):
            label = host[: -len(domain) - 1]
            if label and "." not in label:
                return label, raw
        if raw.startswith(_PATH_PREFIX):
            rest = raw[len(_PATH_PREFIX) :]
            endpoint_id, slash, tail = rest.partition("/")
            endpoint_id, query_mark, query = endpoint_id.partition("?")
            if endpoint_id:
                if query_mark:
                    return endpoint_id, "/?" + query
                return endpoint_id, "/" + tail if slash else "/"
        raise NotFound(f"no endpoint at {raw.partition('?')[0][:200]}")

    def _caller(self, head: RequestHead) -> Caller:
        """The principal of the token in FB-Authorization or the cookie (None without one);
        Unauthenticated when one is given and is not valid."""
        header = head.header(b"fb-authorization")
        token = ""
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthenticated("FB-Authorization: expected 'Bearer <token>'")
            token = token.strip()
        elif self.config.cookie:
            token = _cookie(head.header(b"cookie"), self.config.cookie)
        if not token:
            return Caller(None)
        now = time.monotonic()
        kept = self._tokens.get(token)
        if kept is None or kept[0] <= now:
            try:
                found: Principal | FuzzballError = self.authenticate(token)
            except Unauthenticated as error:
                found = error
            if len(self._tokens) > 10_000:
                self._tokens.clear()  # bounded: only recent callers are worth keeping
            kept = self._tokens[token] = (now + TOKEN_TTL, found)
        if isinstance(kept[1], FuzzballError):
            raise kept[1]
        return Caller(kept[1])

    def _destination(self, endpoint_id: str, caller: Caller) -> Destination:
        """The endpoint, once the caller may use it."""
        try:
            destination = self.directory.lookup(endpoint_id)
        except FuzzballError:
            raise
        except Exception as exc:
            log.warning("looking up endpoint %s failed: %s", endpoint_id[:64], exc)
            raise Unavailable("the endpoint could not be looked up; try again shortly") from None
        if destination is not None and destination.scope == "public":
            return destination
        if caller.principal is None:
            raise Unauthenticated(
                "this endpoint needs a Fuzzball token: FB-Authorization: Bearer <token>"
            )
        if destination is None or not self._may_use(caller.principal, destination):
            raise NotFound(f"endpoint {endpoint_id[:64]} not found")
        return destination

    def _may_use(self, who: Principal, destination: Destination) -> bool:
        """Whether the endpoint's scope lets ``who`` in."""
        if destination.scope == "user":
            if destination.owner_user_id is None:
                return who.user_id is None and who.account_id == destination.account_id
            return who.user_id == destination.owner_user_id
        if self._in_group(who, destination.account_id):
            return True
        return (
            destination.scope == "organization"
            and destination.organization_id is not None
            and who.organization_id == destination.organization_id
        )

    def _may_wake(self, caller: Caller, destination: Destination) -> bool:
        """Whether the caller may wake the endpoint's idle pool: anyone its scope lets in,
        and for a public endpoint the members of its organization who presented a token."""
        who = caller.principal
        if who is None:
            return False
        if destination.scope != "public":
            return True
        return self._in_group(who, destination.account_id) or (
            destination.organization_id is not None
            and who.organization_id == destination.organization_id
        )

    def _in_group(self, who: Principal, account_id: str) -> bool:
        if who.account_id == account_id:
            return True
        if who.user_id is None:
            return False
        # kept as long as a token's caller is (TOKEN_TTL): a busy group endpoint costs no
        # query per request, and a member removed is refused within it
        key = (who.user_id, account_id)
        now = time.monotonic()
        kept = self._members.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        member = self._is_member(who.user_id, account_id)
        if len(self._members) > 10_000:
            self._members.clear()  # bounded: only recent callers are worth keeping
        self._members[key] = (now + TOKEN_TTL, member)
        return member

    def _is_member(self, user_id: str, account_id: str) -> bool:
        with self.engine.sessions() as session:
            member = session.scalars(
                select(AccountMember.user_id).where(
                    AccountMember.account_id == account_id, AccountMember.user_id == user_id
                )
            ).first()
        return member is not None

    async def _ready_upstream(self, destination: Destination, caller: Caller) -> Upstream:
        """The endpoint's ready service; an idle pool woken for an identified caller and
        waited for up to ``wake-timeout``; Unavailable otherwise."""
        upstream = destination.upstream
        if upstream is None:
            raise Unavailable(f"endpoint {destination.name}: no workflow serves it now")
        if upstream.ready:
            return upstream
        if not upstream.pool or not self._may_wake(caller, destination):
            raise Unavailable(f"endpoint {destination.name}: its service is not ready yet")
        deadline = time.monotonic() + self.config.wake_timeout
        next_wake = 0.0
        while time.monotonic() < deadline:
            if time.monotonic() >= next_wake:
                # again while it waits: a pool still stopping from its idle timeout starts
                # anew once its old instance has ended
                if not self.engine.change(
                    lambda tx: service_pools.wake(
                        self.engine.context, tx, upstream.workflow_id, upstream.stage_name
                    )
                ):
                    raise Unavailable(f"endpoint {destination.name}: its service has ended")
                next_wake = time.monotonic() + WAKE_AGAIN
            await asyncio.sleep(WAKE_POLL)
            found = self.directory.lookup(destination.endpoint_id)
            if found is not None and found.upstream is not None and found.upstream.ready:
                return found.upstream
        raise Unavailable(
            f"endpoint {destination.name}: its service did not wake within"
            f" {self.config.wake_timeout:g}s"
        )


def _without_cookie(header: str, name: str) -> str:
    """A Cookie header without the cookie ``name``."""
    kept: Iterable[str] = (
        part.strip()
        for part in header.split(";")
        if part.strip() and part.strip().partition("=")[0].strip() != name
    )
    return "; ".join(kept)


def _cookie(header: str, name: str) -> str:
    """The value of cookie ``name`` in a Cookie header ('' without it)."""
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key.strip() == name:
            return value.strip().strip('"')
    return ""


class EndpointServing:
    """Everything endpoints add to a serving Orchestrate: the REST routes, the proxy's
    listener (when ``orchestrate.endpoints.listen`` is set) and the keeper's loop."""

    def __init__(
        self,
        engine: Engine,
        authenticate: Callable[[str], Principal],
        config: EndpointsConfig,
        health: Health,
        *,
        secure: bool = False,
    ) -> None:
        self.config = config
        self.health = health
        self.urls = EndpointUrls.of(config.url, config.listen, config.domain, secure=secure)
        engine.context.endpoint_urls = self.urls
        self.directory = EndpointDirectory(engine)
        self.keeper = EndpointKeeper(engine, self.directory, drain=config.drain)
        self.proxy = EndpointProxy(engine, authenticate, config, self.directory, self.keeper)
        self.routes = endpoint_routes(engine, self.urls)
        self._server: asyncio.AbstractServer | None = None
        self._keeper: asyncio.Task[None] | None = None

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> None:
        """Start the keeper, and the proxy when it has a listener: over TLS with
        ``ssl_context`` (Orchestrate's own, when it serves TLS), so a token a user presents
        never crosses the network in the clear."""
        self._keeper = asyncio.create_task(self.keeper.run(self.health))
        if not self.config.listen:
            return
        host, _, port = self.config.listen.rpartition(":")
        self._server = await serve(
            self.proxy.gate, self.proxy.pool, host or "127.0.0.1", int(port), ssl_context
        )
        log.info("endpoint proxy serving on %s", self.config.listen)

    async def close(self) -> None:
        """Stop the listener and the keeper."""
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        if self._server is not None:
            self._server.close()
            self._server = None
        self.proxy.pool.close()
