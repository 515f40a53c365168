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
import concurrent.futures
import contextlib
import functools
import itertools
import json
import logging
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select

from fuzzball_core.backoff import Backoff
from fuzzball_core.config import EndpointsConfig, split_listen
from fuzzball_core.errors import (
    FuzzballError,
    NotFound,
    Unauthenticated,
    Unavailable,
)
from fuzzball_core.health import Health
from fuzzball_core.orchestrate import service_pools
from fuzzball_core.orchestrate.endpoint_directory import (
    READY_TTL,
    Destination,
    EndpointDirectory,
    Upstream,
)
from fuzzball_core.orchestrate.endpoint_forwarder import (
    Forward,
    RequestHead,
    ServicePool,
    serve,
)
from fuzzball_core.orchestrate.endpoint_keeper import EndpointKeeper
from fuzzball_core.orchestrate.endpoint_routes import endpoint_routes
from fuzzball_core.orchestrate.endpoint_urls import EndpointUrls
from fuzzball_core.orchestrate.endpoint_worker import Routing
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.service.accounts import token_digest
from fuzzball_core.service.revocations import Revocation, Revocations
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import AccountMember

log = logging.getLogger("fuzzball.orchestrate.endpoints")

#: how often a request waiting for a pool to wake looks again, and asks it to wake again
WAKE_POLL = 0.1
WAKE_AGAIN = 1.0
#: seconds an authenticated token's caller is reused: what bounds a revocation this process is
#: not told of (another process's whose message was lost: ``service/revocation_channel.py``);
#: those it is told of are forgotten at once (:meth:`EndpointProxy.follow`)
TOKEN_TTL = 2.0
#: seconds a revoking call waits for the proxy's processes to say they forgot the revoked
#: tokens' decisions (past it, a process that has not answered is being started again)
FORGET_WAIT = 2.0

#: told the tokens whose kept decisions must go (None: every token's); the futures it returns
#: are awaited, up to FORGET_WAIT, before the revoking call returns
TokensForgotten = Callable[[list[str] | None], list["asyncio.Future[None]"]]


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
        self.routing = Routing(config.domain, config.cookie)
        self._tokens: dict[str, tuple[float, Principal | FuzzballError]] = {}
        self._members: dict[tuple[str, str], tuple[float, bool]] = {}
        #: told the tokens a revocation covers (the proxy's processes keep decisions by token)
        self.on_forget_tokens: list[TokensForgotten] = []
        #: revocations applied so far: a decision made across one is not kept
        self._revocations = 0
        #: when the kept callers were last dropped for their number (monotonic): a process
        #: may keep decisions for tokens no longer named here until TOKEN_TTL after it
        self._dropped_at = float("-inf")
        self.pool = ServicePool(
            ssl.create_default_context() if config.verify_upstream_tls else False
        )

    # -- one request -----------------------------------------------------------------------

    async def gate(self, head: RequestHead) -> Forward:
        """Find the endpoint, check the caller, and say where the request goes (a
        FuzzballError is the client's answer): the gate of a proxy served in this process."""
        endpoint_id, path = self.routing.route(head.header(b"host"), head.target)
        upstream, _ = await self.decide(endpoint_id, self.routing.token(head))
        if upstream.pool:
            self.keeper.touch(upstream.workflow_id, upstream.stage_name, upstream.idle_timeout)
        return Forward(url=upstream.url, path=path, cookie=self.routing.passed_cookie(head))

    async def decide(self, endpoint_id: str, token: str) -> tuple[Upstream, float]:
        """The ready service a caller presenting ``token`` ('' for none) reaches at
        ``endpoint_id``, and until when (monotonic) that answer may be reused: no longer
        than this process keeps the ready address, the token's caller and its group
        membership, so whoever keeps it refuses a revoked token as soon as this does."""
        revocations = self._revocations
        caller, until = self._caller(token)
        destination = self._destination(endpoint_id, caller)
        upstream = destination.upstream
        if upstream is None or not upstream.ready:
            upstream = await self._ready_upstream(destination, caller)
            if self._revocations != revocations:
                # revoked while the pool woke: asked again, and the answer is not kept
                self._destination(endpoint_id, self._caller(token)[0])
                return upstream, 0.0
        until = min(until, time.monotonic() + READY_TTL)
        who = caller.principal
        if who is not None and who.user_id is not None:
            member = self._members.get((who.user_id, destination.account_id))
            if member is not None:
                until = min(until, member[0])
        return upstream, until

    def _caller(self, token: str) -> tuple[Caller, float]:
        """The principal of ``token`` (None without one) and until when it is kept;
        Unauthenticated when one is given and is not valid."""
        if not token:
            return Caller(None), float("inf")
        now = time.monotonic()
        kept = self._tokens.get(token)
        if kept is None or kept[0] <= now:
            try:
                found: Principal | FuzzballError = self.authenticate(token)
            except Unauthenticated as error:
                found = error
            if len(self._tokens) > 10_000:
                self._tokens.clear()  # bounded: only recent callers are worth keeping
                self._dropped_at = now
            kept = self._tokens[token] = (now + TOKEN_TTL, found)
        if isinstance(kept[1], FuzzballError):
            raise kept[1]
        return Caller(kept[1]), kept[0]

    # -- revocations ----------------------------------------------------------------------

    def follow(self, revocations: Revocations) -> Callable[[], None]:
        """Forget what each of ``revocations`` covers as soon as it is committed (called on
        the event loop this proxy decides on); returns what stops following. A revocation
        made in another thread returns once this loop has forgotten it and the proxy's
        processes have said they did too (up to FORGET_WAIT): the revoked token is refused
        at its next request. One made on this loop (the Web UI's sign-out) cannot wait for
        them: their lines are sent before its answer is."""
        loop = asyncio.get_running_loop()
        settling: set[asyncio.Task[None]] = set()

        def told(revocation: Revocation) -> None:
            if _running_loop() is loop:
                task = loop.create_task(_settle(self.forget_revoked(revocation)))
                settling.add(task)
                task.add_done_callback(settling.discard)
                return

            async def forget() -> None:
                await _settle(self.forget_revoked(revocation))

            try:
                asyncio.run_coroutine_threadsafe(forget(), loop).result(FORGET_WAIT + 1.0)
            except (RuntimeError, concurrent.futures.CancelledError):
                return  # the loop has closed, or is closing: nothing is kept any more
            except TimeoutError:
                log.warning("the endpoint proxy did not forget a revocation in time")

        return revocations.subscribe(told)

    def forget_revoked(self, revocation: Revocation) -> list[asyncio.Future[None]]:
        """Forget the kept callers and group memberships ``revocation`` covers and tell
        whoever keeps decisions by token (the proxy's processes) to forget those tokens';
        what to await for them to have done so."""
        self._revocations += 1
        covered = [
            token
            for token, (_, found) in self._tokens.items()
            if isinstance(found, Principal)
            and revocation.covers(functools.partial(token_digest, token), found)
        ]
        for token in covered:
            del self._tokens[token]
        for key in [key for key in self._members if revocation.ends_membership(*key)]:
            del self._members[key]
        forgotten: list[str] | None = covered
        if revocation.everything or time.monotonic() - self._dropped_at < TOKEN_TTL:
            forgotten = None  # tokens dropped unread may still be kept elsewhere: all go
        if forgotten == []:
            return []
        return [wait for tell in self.on_forget_tokens for wait in tell(forgotten)]

    # -- who may use what ------------------------------------------------------------------

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
        # query per request, and a member removed is forgotten at once (forget_revoked)
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


class ProxyProcess:
    """The endpoint proxy's own processes (:mod:`endpoint_worker`, where why they are
    argued), ``processes`` of them taking connections from one listening socket made here,
    each answered over a socket pair of its own, each started again when it ends while
    Orchestrate serves. Orchestrate starts one: two measured worse on 2 cores shared with
    other work (each woke for fewer requests at a time: 114-174 µs of CPU per request
    together against 62-121 µs for one, and +2.9-3.0 ms at p50 against +0.07-0.51 ms;
    docs/performance.md)."""

    def __init__(
        self, proxy: EndpointProxy, directory: EndpointDirectory, processes: int = 1
    ) -> None:
        self.proxy = proxy
        self.processes = processes
        self._listener: socket.socket | None = None
        self._children: list[subprocess.Popen[bytes] | None] = [None] * processes
        self._writers: list[asyncio.StreamWriter] = []
        self._supervisors: list[asyncio.Task[None]] = []
        self._decisions: set[asyncio.Task[None]] = set()
        self._closing = False
        #: the forgetting of revoked tokens each process has not yet said it did, by number
        self._forgetting: dict[int, asyncio.Future[None]] = {}
        self._forget_numbers = itertools.count(1)
        directory.on_forget.append(self._forget)
        proxy.on_forget_tokens.append(self._forget_tokens)

    @property
    def pids(self) -> list[int]:
        """The processes serving now."""
        return [child.pid for child in self._children if child is not None]

    async def start(self, host: str, port: int) -> None:
        """Listen on ``host:port`` (here: the port is taken, or refused, before this
        returns; connections wait in its backlog until a process takes them)."""
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        self._listener = socket.create_server(address, family=family, backlog=1024)
        for index in range(self.processes):
            channel = await self._spawn(index)
            self._supervisors.append(asyncio.create_task(self._supervise(index, *channel)))

    async def _spawn(self, index: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Start process ``index``; the channel to it."""
        assert self._listener is not None
        ours, theirs = socket.socketpair()
        settings = {
            "listen_fd": self._listener.fileno(),
            "channel_fd": theirs.fileno(),
            "domain": self.proxy.config.domain,
            "cookie": self.proxy.config.cookie,
            "verify_upstream_tls": self.proxy.config.verify_upstream_tls,
        }
        try:
            command = [sys.executable, "-m", "fuzzball_core.orchestrate.endpoint_worker"]
            # its own session, so its own share of the CPU beside Orchestrate's
            self._children[index] = subprocess.Popen(
                [*command, json.dumps(settings)],
                pass_fds=(self._listener.fileno(), theirs.fileno()),
                start_new_session=True,
            )
        finally:
            theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        self._writers.append(writer)
        return reader, writer

    async def _supervise(
        self, index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Answer process ``index``'s questions; start it again when it ends."""
        delays = Backoff(initial=0.5, maximum=10.0).delays()
        while True:
            await self._answer(reader, writer)
            if self._closing:
                return
            code = await self._ended(self._children[index])
            log.warning("an endpoint proxy process ended (%s); starting it again", code)
            await asyncio.sleep(next(delays))
            self._writers = [kept for kept in self._writers if not kept.is_closing()]
            reader, writer = await self._spawn(index)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            message = json.loads(line)
            if "touch" in message:
                workflow_id, stage_name, idle_timeout = message["touch"]
                self.proxy.keeper.touch(workflow_id, stage_name, float(idle_timeout))
                continue
            if "forgot" in message:
                forgetting = self._forgetting.get(message["forgot"])
                if forgetting is not None and not forgetting.done():
                    forgetting.set_result(None)
                continue
            task = asyncio.create_task(
                self._decide(writer, message["i"], message["e"], message["t"])
            )
            self._decisions.add(task)
            task.add_done_callback(self._decisions.discard)
        writer.close()

    async def _decide(
        self, writer: asyncio.StreamWriter, number: int, endpoint_id: str, token: str
    ) -> None:
        reply: dict[str, object] = {"i": number}
        try:
            upstream, until = await self.proxy.decide(endpoint_id, token)
            reply["u"] = upstream.url
            reply["until"] = until if until != float("inf") else time.monotonic() + READY_TTL
            if upstream.pool:
                reply["pool"] = [upstream.workflow_id, upstream.stage_name, upstream.idle_timeout]
        except FuzzballError as error:
            reply["err"] = error.to_status()
        except Exception:
            log.exception("deciding a request for endpoint %s failed", endpoint_id[:64])
            reply["err"] = Unavailable("the endpoint could not be looked up").to_status()
        _send(writer, reply)

    def _forget(self, endpoint_id: str) -> None:
        for writer in self._writers:
            _send(writer, {"forget": endpoint_id})

    def _forgotten(self, number: int, _: asyncio.Future[None]) -> None:
        self._forgetting.pop(number, None)

    def _forget_tokens(self, tokens: list[str] | None) -> list[asyncio.Future[None]]:
        """Tell every process to forget the decisions it keeps for ``tokens`` (None: all);
        a future each, done when it says it did."""
        waits: list[asyncio.Future[None]] = []
        for writer in self._writers:
            if writer.is_closing():
                continue
            number = next(self._forget_numbers)
            forgetting: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._forgetting[number] = forgetting
            # answered, or given up on by the revoking call past FORGET_WAIT
            forgetting.add_done_callback(functools.partial(self._forgotten, number))
            _send(writer, {"forget_tokens": tokens, "n": number})
            waits.append(forgetting)
        return waits

    @staticmethod
    async def _ended(child: subprocess.Popen[bytes] | None, wait: float = 5.0) -> int | None:
        """The process's exit status once it has ended (killed after ``wait`` seconds)."""
        if child is None:
            return None
        deadline = time.monotonic() + wait
        while child.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if child.poll() is None:
            child.kill()
            await asyncio.sleep(0.05)
        return child.poll()

    async def close(self) -> None:
        """End the processes and stop listening."""
        self._closing = True
        for child in self._children:
            if child is not None and child.poll() is None:
                child.terminate()
        for writer in self._writers:
            writer.close()
        for child in self._children:
            await self._ended(child)
        for supervisor in self._supervisors:
            supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await supervisor
        for task in list(self._decisions):
            task.cancel()
        if self._listener is not None:
            self._listener.close()
            self._listener = None


async def _settle(waits: list[asyncio.Future[None]]) -> None:
    """Wait up to FORGET_WAIT for ``waits``; those not done by then are given up on."""
    if waits:
        _, unanswered = await asyncio.wait(waits, timeout=FORGET_WAIT)
        for wait in unanswered:
            wait.cancel()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, None outside one."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _send(writer: asyncio.StreamWriter, message: dict[str, object]) -> None:
    """A line to a proxy process (dropped when its channel has ended: it is started again
    and asks anew)."""
    if not writer.is_closing():
        writer.write(json.dumps(message).encode() + b"\n")


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
        revocations: Revocations | None = None,
    ) -> None:
        self.config = config
        self.health = health
        #: the revocations the proxy forgets at once (its accounts'), once serving
        self.revocations = revocations
        self._unfollow: Callable[[], None] | None = None
        self.urls = EndpointUrls.of(config.url, config.listen, config.domain, secure=secure)
        engine.context.endpoint_urls = self.urls
        self.directory = EndpointDirectory(engine)
        self.keeper = EndpointKeeper(engine, self.directory, drain=config.drain)
        self.proxy = EndpointProxy(engine, authenticate, config, self.directory, self.keeper)
        self.routes = endpoint_routes(engine, self.urls)
        self._server: asyncio.AbstractServer | None = None
        self.process: ProxyProcess | None = None
        self._keeper: asyncio.Task[None] | None = None

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> None:
        """Start the keeper, and the proxy when it has a listener: over TLS with
        ``ssl_context`` (Orchestrate's own, when it serves TLS), so a token a user presents
        never crosses the network in the clear. Plain HTTP is served by the proxy's own
        process (:class:`ProxyProcess`); TLS here, in Orchestrate's process, whose context
        (and key) is not handed to another process."""
        self._keeper = asyncio.create_task(self.keeper.run(self.health))
        if not self.config.listen:
            return
        if self.revocations is not None:
            self._unfollow = self.proxy.follow(self.revocations)
        host, port = split_listen(self.config.listen)
        if ssl_context is None:
            self.process = ProxyProcess(self.proxy, self.directory)
            await self.process.start(host, port)
        else:
            self._server = await serve(self.proxy.gate, self.proxy.pool, host, port, ssl_context)
        log.info("endpoint proxy serving on %s", self.config.listen)

    async def close(self) -> None:
        """Stop the listener and the keeper."""
        if self._unfollow is not None:
            self._unfollow()
            self._unfollow = None
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        if self._server is not None:
            self._server.close()
            self._server = None
        if self.process is not None:
            await self.process.close()
            self.process = None
        self.proxy.pool.close()
