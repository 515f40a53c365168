"""The endpoint proxy: users reach workflow services at ``/endpoints/{id}/...`` or at
``{id}.<endpoints domain>``, on Orchestrate's endpoint listener (``orchestrate.endpoints``).

aiohttp on both sides: the request is passed on as it came (method, path below the
endpoint, query, headers, a streamed body) and the answer streamed back chunk by chunk as
the service writes it, so Server-Sent Events and long downloads flow; a websocket upgrade
becomes a websocket to the service, each message relayed as it arrives.

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

import aiohttp
from aiohttp import WSMsgType, web
from multidict import CIMultiDict, istr
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
from fuzzball_core.orchestrate.endpoint_keeper import EndpointKeeper
from fuzzball_core.orchestrate.endpoint_routes import endpoint_routes
from fuzzball_core.orchestrate.endpoint_urls import EndpointUrls
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import AccountMember

log = logging.getLogger("fuzzball.orchestrate.endpoints")

FB_AUTHORIZATION = istr("FB-Authorization")
#: seconds a client is told to wait before asking again for a service not ready
RETRY_AFTER = "5"
#: bytes read from a service at most at once (a large download moves in large writes; a
#: streamed answer is passed on as soon as any of it arrives)
READ_BUFFER = 1 << 20
#: an answer at most this long, of announced length, is read whole and sent in one write
SMALL_ANSWER = 64 * 1024
#: how often a request waiting for a pool to wake looks again, and asks it to wake again
WAKE_POLL = 0.1
WAKE_AGAIN = 1.0
#: seconds an authenticated token's caller is reused (a revoked token is refused within it)
TOKEN_TTL = 2.0
#: hop-by-hop headers (RFC 9110 7.6.1) and the ones the proxy sets itself
_NOT_FORWARDED = frozenset(
    istr(h)
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "Host",
        "FB-Authorization",
        "Sec-WebSocket-Key",
        "Sec-WebSocket-Version",
        "Sec-WebSocket-Extensions",
        "Sec-WebSocket-Accept",
    )
)
_PATH_PREFIX = "/endpoints/"


@dataclass(frozen=True)
class Caller:
    """Who asks: an authenticated principal, or nobody (no token)."""

    principal: Principal | None


class EndpointProxy:
    """The proxy's aiohttp application and what it needs to answer."""

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
        self._client: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool = (
            ssl.create_default_context() if config.verify_upstream_tls else False
        )

    # -- the application -------------------------------------------------------------------

    def app(self) -> web.Application:
        """The proxy as an aiohttp application (every path is an endpoint's)."""
        app = web.Application(handler_args={"max_field_size": 16 * 1024})
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._start_client)
        app.on_cleanup.append(self._close_client)
        return app

    async def _start_client(self, _app: web.Application) -> None:
        self._client = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ssl=self._ssl),
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            read_bufsize=READ_BUFFER,
        )

    async def _close_client(self, _app: web.Application) -> None:
        if self._client is not None:
            await self._client.close()

    # -- one request -----------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Find the endpoint, check the caller, and relay the request to its service."""
        try:
            endpoint_id, path = self._route(request)
            caller = self._caller(request)
            destination = self._destination(endpoint_id, caller)
            upstream = await self._ready_upstream(destination, caller)
        except FuzzballError as error:
            return _status_response(error)
        if upstream.pool:
            self.keeper.touch(upstream.workflow_id, upstream.stage_name, upstream.idle_timeout)
        if _is_websocket(request):
            return await self._relay_websocket(request, upstream, path)
        return await self._relay(request, upstream, path)

    def _route(self, request: web.Request) -> tuple[str, str]:
        """(endpoint id, the path to ask the service for, with its query)."""
        host = (request.host or "").rsplit(":", 1)[0].lower() if request.host else ""
        domain = self.config.domain.lower()
        raw = request.raw_path
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
        raise NotFound(f"no endpoint at {request.path[:200]}")

    def _caller(self, request: web.Request) -> Caller:
        """The principal of the token in FB-Authorization or the cookie (None without one);
        Unauthenticated when one is given and is not valid."""
        header = request.headers.get(FB_AUTHORIZATION, "")
        token = ""
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthenticated("FB-Authorization: expected 'Bearer <token>'")
            token = token.strip()
        elif self.config.cookie:
            token = request.cookies.get(self.config.cookie, "")
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
        with self.engine.sessions() as session:
            member = session.scalars(
                select(AccountMember.user_id).where(
                    AccountMember.account_id == account_id, AccountMember.user_id == who.user_id
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

    # -- relaying --------------------------------------------------------------------------

    def _headers(self, request: web.Request, upstream: Upstream) -> CIMultiDict[str]:
        """The request's headers as the service gets them: without hop-by-hop headers, the
        Fuzzball token (header and cookie), with X-Forwarded-* saying where it came from."""
        headers: CIMultiDict[str] = CIMultiDict()
        for name, value in request.headers.items():
            if name in _NOT_FORWARDED:
                continue
            if name == istr("Cookie") and self.config.cookie:
                value = _without_cookie(value, self.config.cookie)
                if not value:
                    continue
            headers.add(name, value)
        headers["X-Forwarded-Host"] = request.host or ""
        headers["X-Forwarded-Proto"] = request.scheme
        if request.remote:
            headers["X-Forwarded-For"] = request.remote
        return headers

    async def _relay(
        self, request: web.Request, upstream: Upstream, path: str
    ) -> web.StreamResponse:
        assert self._client is not None
        body = request.content if request.body_exists else None
        try:
            async with self._client.request(
                request.method,
                upstream.url + path,
                headers=self._headers(request, upstream),
                data=body,
                allow_redirects=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            ) as answer:
                headers = CIMultiDict(
                    (name, value)
                    for name, value in answer.headers.items()
                    if name not in _NOT_FORWARDED
                )
                if answer.content_length is not None and answer.content_length <= SMALL_ANSWER:
                    whole = await answer.read()
                    headers.popall("Content-Length", None)
                    return web.Response(
                        status=answer.status, reason=answer.reason, headers=headers, body=whole
                    )
                response = web.StreamResponse(
                    status=answer.status, reason=answer.reason, headers=headers
                )
                await response.prepare(request)
                return await _stream(request, response, answer, upstream)
        except (TimeoutError, aiohttp.ClientConnectionError) as exc:
            log.info("endpoint service at %s did not answer: %s", upstream.url, exc)
            return _status_response(
                _BadGateway("the endpoint's service did not answer; try again shortly")
            )

    async def _relay_websocket(
        self, request: web.Request, upstream: Upstream, path: str
    ) -> web.StreamResponse:
        assert self._client is not None
        protocols = [
            p.strip()
            for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")
            if p.strip()
        ]
        headers = self._headers(request, upstream)
        headers.popall("Sec-WebSocket-Protocol", None)
        url = "ws" + upstream.url.removeprefix("http") + path
        try:
            service = await self._client.ws_connect(
                url, headers=headers, protocols=protocols, autoping=False
            )
        except (TimeoutError, aiohttp.ClientError) as exc:
            log.info("endpoint service at %s refused the websocket: %s", upstream.url, exc)
            return _status_response(_BadGateway("the endpoint's service refused the websocket"))
        client = web.WebSocketResponse(
            protocols=[service.protocol] if service.protocol else (), autoping=False
        )
        await client.prepare(request)
        async with service:
            await _pump_both(client, service)
        return client


class _BadGateway(Unavailable):
    """The service behind a ready endpoint did not answer (HTTP 502)."""

    http_status = 502


async def _pump_both(
    client: web.WebSocketResponse, service: aiohttp.ClientWebSocketResponse
) -> None:
    """Relay messages both ways until either side closes."""

    async def pump(source: object, sink: object) -> None:
        async for message in source:  # type: ignore[attr-defined]
            if message.type == WSMsgType.TEXT:
                await sink.send_str(message.data)  # type: ignore[attr-defined]
            elif message.type == WSMsgType.BINARY:
                await sink.send_bytes(message.data)  # type: ignore[attr-defined]
            elif message.type == WSMsgType.PING:
                await sink.ping(message.data)  # type: ignore[attr-defined]
            elif message.type == WSMsgType.PONG:
                await sink.pong(message.data)  # type: ignore[attr-defined]
            else:
                break
        with contextlib.suppress(ConnectionError, RuntimeError):
            await sink.close()  # type: ignore[attr-defined]

    tasks = [
        asyncio.ensure_future(pump(client, service)),
        asyncio.ensure_future(pump(service, client)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _stream(
    request: web.Request,
    response: web.StreamResponse,
    answer: aiohttp.ClientResponse,
    upstream: Upstream,
) -> web.StreamResponse:
    """Pass the service's answer on as it arrives. A client that left ends it quietly; a
    service that cut its answer cuts the client's connection too, so the client never takes
    a part for the whole."""
    try:
        async for chunk in answer.content.iter_any():
            try:
                await response.write(chunk)
            except ConnectionError:
                return response  # the client left: nobody to answer
    except (TimeoutError, aiohttp.ClientError) as exc:
        log.warning("endpoint service at %s cut its answer: %s", upstream.url, exc)
        if request.transport is not None:
            request.transport.abort()
        return response
    await response.write_eof()
    return response


def _is_websocket(request: web.Request) -> bool:
    return (
        request.headers.get("Upgrade", "").lower() == "websocket"
        and "upgrade" in request.headers.get("Connection", "").lower()
    )


def _without_cookie(header: str, name: str) -> str:
    """A Cookie header without the cookie ``name``."""
    kept: Iterable[str] = (
        part.strip()
        for part in header.split(";")
        if part.strip() and part.strip().partition("=")[0].strip() != name
    )
    return "; ".join(kept)


def _status_response(error: FuzzballError) -> web.Response:
    response = web.json_response(error.to_status(), status=error.http_status)
    if isinstance(error, Unavailable) and error.http_status == 503:
        response.headers["Retry-After"] = RETRY_AFTER
    if isinstance(error, Unauthenticated):
        response.headers["WWW-Authenticate"] = 'Bearer realm="fuzzball endpoints"'
    return response


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
        self._runner: web.AppRunner | None = None
        self._keeper: asyncio.Task[None] | None = None

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> None:
        """Start the keeper, and the proxy when it has a listener: over TLS with
        ``ssl_context`` (Orchestrate's own, when it serves TLS), so a token a user presents
        never crosses the network in the clear."""
        self._keeper = asyncio.create_task(self.keeper.run(self.health))
        if not self.config.listen:
            return
        self._runner = web.AppRunner(self.proxy.app(), access_log=None)
        await self._runner.setup()
        host, _, port = self.config.listen.rpartition(":")
        await web.TCPSite(
            self._runner, host or "127.0.0.1", int(port), ssl_context=ssl_context
        ).start()
        log.info("endpoint proxy serving on %s", self.config.listen)

    async def close(self) -> None:
        """Stop the listener and the keeper."""
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        if self._runner is not None:
            await self._runner.cleanup()
