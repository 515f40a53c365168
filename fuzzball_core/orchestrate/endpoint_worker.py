"""The endpoint proxy's own process: it moves the bytes (:mod:`endpoint_forwarder`) and asks
Orchestrate, over a Unix socket, who may reach which service.

Why a process of its own: every proxied request needs the proxy twice, and inside
Orchestrate it waits for an event loop that also runs the engine's and the keeper's turns,
the node streams and the REST and gRPC servers (a store lookup there holds every request
behind it), and for a share of the CPU that Orchestrate's other work takes too (the kernel
shares the CPU between sessions first: this process has a session of its own). Measured
with ``bench/proxy.py``, run after run with the proxy inside Orchestrate (docs/
performance.md, "Endpoint proxy"): the added p50 stays under 1 ms at every load measured
(+0.07 to +0.51 ms, against +1.5 to +3.7 ms inside Orchestrate at load 13-23), and
Orchestrate spends 1-2 µs per proxied request answering instead of 70-175 µs moving it;
the throughput ratio did not change beyond this machine's noise.

The decisions stay in Orchestrate (the store, the engine's memory, the token's check,
waking pools, the keeper's clock): this process only routes (pure: the path or subdomain
names the endpoint), reads the token, and keeps each decision Orchestrate gave no longer
than Orchestrate says (at most ``READY_TTL``, and never past its own cached
token's or group membership's expiry). When Orchestrate moves an endpoint (a takeover), it
tells this process to forget it at once; when a token is revoked (or its account, its user,
or a group membership of its user ends), it tells this process to forget that token's
decisions, and the revoking call returns once this process has said it did, so the token is
refused at its next request.

The channel: JSON lines. This process sends ``{"i": N, "e": ENDPOINT, "t": TOKEN}`` (a
decision asked) and ``{"touch": [WORKFLOW, STAGE, IDLE]}`` (a request went to a pool's
instance); Orchestrate answers ``{"i": N, "u": URL, "until": T, "pool": [...]}`` (T on
the shared monotonic clock) or ``{"i": N, "err": STATUS}`` (the refusal, a
google.rpc.Status), and sends ``{"forget": ENDPOINT}`` and ``{"forget_tokens": [TOKEN...],
"n": N}`` (``null``: every token's decisions), which this process answers with
``{"forgot": N}`` once it has. The process ends when the channel does (Orchestrate is gone).

Run by Orchestrate as ``python -m fuzzball_core.orchestrate.endpoint_worker SETTINGS``
with the listening socket and the channel passed as descriptors (see
:class:`fuzzball_core.orchestrate.endpoint_proxy.ProxyProcess`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import json
import logging
import socket
import ssl
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import uvloop

from fuzzball_core.errors import FuzzballError, NotFound, Unauthenticated, Unavailable
from fuzzball_core.orchestrate.endpoint_forwarder import (
    Forward,
    ProxyConnection,
    RequestHead,
    ServicePool,
)
from fuzzball_core.vocabulary import WEB_UI_SESSION_COOKIE

log = logging.getLogger("fuzzball.orchestrate.endpoints")

_T = TypeVar("_T")

_PATH_PREFIX = "/endpoints/"
#: decisions kept at most, by (endpoint, token): only recent callers are worth keeping
MAX_DECISIONS = 10_000
#: seconds between two touches of one pool sent to Orchestrate (its idle timeouts are
#: seconds to hours; a touch per request would be a message per request)
TOUCH_EVERY = 0.5


@dataclass(frozen=True)
class Routing:
    """What every request's route and token are read with (``orchestrate.endpoints``):
    pure, so the proxy's process and Orchestrate's read them alike."""

    domain: str
    cookie: str

    def route(self, host_header: str, raw: str) -> tuple[str, str]:
        """(endpoint id, the path to ask the service for, with its query); NotFound when
        the request names no endpoint."""
        host = host_header.rsplit(":", 1)[0].lower() if host_header else ""
        domain = self.domain.lower()
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

    def token(self, head: RequestHead) -> str:
        """The Fuzzball token in FB-Authorization or the cookie ('' without one);
        Unauthenticated when FB-Authorization is not ``Bearer <token>``."""
        header = head.header(b"fb-authorization")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthenticated("FB-Authorization: expected 'Bearer <token>'")
            return token.strip()
        if self.cookie:
            return _cookie(head.header(b"cookie"), self.cookie)
        return ""

    def passed_cookie(self, head: RequestHead) -> str | None:
        """The Cookie header the service gets: the client's without the cookies that hold
        a Fuzzball token, the proxy's and the Web UI session's (None: as sent, holding
        neither)."""
        if head.cookies:
            sent = b"; ".join(head.cookies).decode("latin-1")
            return _without_cookies(sent, (self.cookie, WEB_UI_SESSION_COOKIE))
        return None


def _without_cookies(header: str, names: tuple[str, ...]) -> str | None:
    """A Cookie header without the cookies ``names``; None when it holds none of them."""
    parts = [part.strip() for part in header.split(";") if part.strip()]
    kept = [part for part in parts if part.partition("=")[0].strip() not in names]
    return "; ".join(kept) if len(kept) < len(parts) else None


def _cookie(header: str, name: str) -> str:
    """The value of cookie ``name`` in a Cookie header ('' without it)."""
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key.strip() == name:
            return value.strip().strip('"')
    return ""


class _Reading:
    """What a request head reads as: the decision's key (endpoint, token), the service's
    path and the Cookie header it gets (None: as sent); and the :class:`Forward` last made
    of it with the decision it was made for, given again while that decision is kept (a
    :class:`Forward` made anew for every request cost as much as the rest of the kept
    decision's look-up, and it keeps the service's request line and Host once made)."""

    __slots__ = ("cookie", "decision", "forward", "key", "path")

    def __init__(self, key: tuple[str, str], path: str, cookie: str | None) -> None:
        self.key = key
        self.path = path
        self.cookie = cookie
        self.decision: _Decision | None = None
        self.forward: Forward | None = None

    def to(self, decision: _Decision) -> Forward:
        """Where the head goes when ``decision`` is its endpoint's."""
        forward = self.forward
        if forward is None or forward.url != decision.url:
            forward = self.forward = Forward(decision.url, self.path, self.cookie)
        self.decision = decision
        return forward


@dataclass(frozen=True)
class _Decision:
    url: str
    until: float
    #: (workflow id, stage name, idle timeout) of a pool's instance, for the keeper
    pool: tuple[str, str, float] | None


class WorkerGate:
    """The gate of the proxy's process: routes and reads the token itself, asks
    Orchestrate for the rest over ``channel`` and keeps each answer as long as it says."""

    def __init__(
        self, routing: Routing, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.routing = routing
        self._reader = reader
        self._writer = writer
        self._numbers = itertools.count(1)
        self._asked: dict[int, asyncio.Future[_Decision]] = {}
        self._kept: dict[tuple[str, str], _Decision] = {}
        self._touched: dict[tuple[str, str], float] = {}
        self._read: dict[bytes, _Reading] = {}

    def kept(self, head: RequestHead) -> Forward | None:
        """Where ``head`` goes by a decision kept, None when Orchestrate must be asked (a
        FuzzballError is the client's answer): the proxy's connections call this first,
        without a task or a future, which is how nearly every request is decided."""
        # one call per request: the reading, the decision and its Forward looked up here,
        # made by the calls below only when not kept
        read = self._read.get(head.key) or self._reading(head)
        decision = self._kept.get(read.key)
        if decision is None:
            return None
        now = time.monotonic()
        if decision.until <= now:
            return None
        if decision.pool is not None:
            self._touch(decision.pool, now)
        if read.decision is decision:
            return read.forward
        return read.to(decision)

    async def __call__(self, head: RequestHead) -> Forward:
        """Where ``head`` goes (a FuzzballError is the client's answer)."""
        forward = self.kept(head)
        if forward is not None:
            return forward
        read = self._reading(head)
        now = time.monotonic()
        decision = await self._ask(read.key)
        if decision.until > now:
            if len(self._kept) > MAX_DECISIONS:
                self._kept.clear()
            self._kept[read.key] = decision
        return self._forward(decision, read, now)

    def _reading(self, head: RequestHead) -> _Reading:
        """The decision's key (endpoint, token), the service's path and its Cookie header:
        pure functions of the head's Host, target, FB-Authorization and cookies, so read
        once for the heads clients send again and again (a client's requests differ in
        little else) instead of for every request. Refusals (no endpoint, a malformed
        token) are not remembered: read again, they raise again."""
        seen = head.key
        read = self._read.get(seen)
        if read is None:
            endpoint_id, path = self.routing.route(head.header(b"host"), head.target)
            token = self.routing.token(head)
            read = _Reading((endpoint_id, token), path, self.routing.passed_cookie(head))
            if len(self._read) > MAX_DECISIONS:
                self._read.clear()
            self._read[seen] = read
        return read

    def _forward(self, decision: _Decision, read: _Reading, now: float) -> Forward:
        if decision.pool is not None:
            self._touch(decision.pool, now)
        return read.to(decision)

    def _touch(self, pool: tuple[str, str, float], now: float) -> None:
        key = pool[:2]
        if now - self._touched.get(key, float("-inf")) < TOUCH_EVERY:
            return
        if len(self._touched) > MAX_DECISIONS:
            self._touched.clear()
        self._touched[key] = now
        self._send({"touch": list(pool)})

    async def _ask(self, key: tuple[str, str]) -> _Decision:
        number = next(self._numbers)
        future: asyncio.Future[_Decision] = asyncio.get_running_loop().create_future()
        self._asked[number] = future
        try:
            self._send({"i": number, "e": key[0], "t": key[1]})
            return await future
        finally:
            self._asked.pop(number, None)

    def _send(self, message: dict[str, object]) -> None:
        if self._writer.is_closing():
            raise Unavailable("the endpoint proxy lost Orchestrate; try again shortly")
        self._writer.write(json.dumps(message).encode() + b"\n")

    def _forget_tokens(self, tokens: list[str] | None) -> None:
        """Forget the decisions kept for ``tokens`` (None: every decision)."""
        if tokens is None:
            self._kept.clear()
            return
        revoked = set(tokens)
        for key in [key for key in self._kept if key[1] in revoked]:
            del self._kept[key]

    async def _line(self) -> bytes:
        """Orchestrate's next line, b'' once the channel ended: closed, or reset by an
        Orchestrate killed with this process's last question unread."""
        try:
            return await self._reader.readline()
        except ConnectionError:
            return b""

    async def run(self) -> None:
        """Read Orchestrate's answers until the channel ends."""
        while line := await self._line():
            message = json.loads(line)
            if "forget" in message:
                gone = message["forget"]
                for key in [key for key in self._kept if key[0] == gone]:
                    del self._kept[key]
                continue
            if "forget_tokens" in message:
                self._forget_tokens(message["forget_tokens"])
                self._send({"forgot": message["n"]})
                continue
            future = self._asked.get(message["i"])
            if future is None or future.done():
                continue
            if "err" in message:
                future.set_exception(FuzzballError.from_status(message["err"]))
            else:
                pool = message.get("pool")
                future.set_result(
                    _Decision(
                        url=message["u"],
                        until=float(message["until"]),
                        pool=(pool[0], pool[1], float(pool[2])) if pool else None,
                    )
                )
        lost = Unavailable("the endpoint proxy lost Orchestrate; try again shortly")
        for future in self._asked.values():
            if not future.done():
                future.set_exception(lost)


async def _serve(settings: dict[str, object]) -> None:
    listener = socket.socket(fileno=int(str(settings["listen_fd"])))
    channel = socket.socket(fileno=int(str(settings["channel_fd"])))
    reader, writer = await asyncio.open_unix_connection(sock=channel)
    gate = WorkerGate(Routing(str(settings["domain"]), str(settings["cookie"])), reader, writer)
    pool = ServicePool(ssl.create_default_context() if settings["verify_upstream_tls"] else False)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: ProxyConnection(gate, pool, secure=False, kept=gate.kept), sock=listener
    )
    # what the process made to start (modules, classes, functions: some 20,000 objects) is never
    # garbage: the collector's full passes, which requests' objects set off, skip it
    gc.freeze()
    try:
        await gate.run()  # Orchestrate gone: so is its proxy
    finally:
        server.close()
        pool.close()


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """Run ``main`` on the proxy process's event loop: uvloop's (libuv), not asyncio's own.
    Every proxied request wakes this loop for the client's bytes and the service's; with
    asyncio's selector loop each wake-up, read and write runs Python code of the loop's
    (``_run_once``, ``_read_ready``, ``Handle._run``), which uvloop runs in C
    (docs/performance.md, "Endpoint proxy", fourth round). The forwarder's protocols are
    the same on either loop (tests/endpoints/test_forwarding.py runs them on both: the TLS
    listener that stays in Orchestrate runs on asyncio's)."""
    return uvloop.run(main)


def main(argv: list[str]) -> None:
    """The process's entry: ``SETTINGS`` (JSON: the listening socket's and the channel's
    descriptors, ``domain``, ``cookie``, ``verify_upstream_tls``)."""
    logging.basicConfig(level=logging.WARNING, format="endpoint proxy: %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        run(_serve(json.loads(argv[1])))


if __name__ == "__main__":
    main(sys.argv)
