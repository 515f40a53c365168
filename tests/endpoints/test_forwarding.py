"""The endpoint proxy's forwarding (fuzzball_core/orchestrate/endpoint_forwarder.py) between
real clients and a real aiohttp service on loopback, with a gate that sends every request
to that service: connections kept to the service, large answers moved by splice(2), HEAD,
chunked bodies, pipelining, and services that end answers by closing or write bare LFs.
Every test runs on both event loops the forwarder serves from: uvloop's (the proxy's own
process) and asyncio's (the TLS listener that stays in Orchestrate), and both ways a
request is decided: by awaiting the gate (in a task), and by a decision the proxy's
process keeps (at once, from the parser's callbacks)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from support.ports import free_port

from fuzzball_core.orchestrate import endpoint_forwarder, endpoint_worker
from fuzzball_core.orchestrate.endpoint_forwarder import (
    MAX_FIELD,
    MAX_HEAD,
    SPLICE_MIN,
    Forward,
    RequestHead,
    ServicePool,
    serve,
)

Scenario = Callable[[str, dict[str, Any]], Awaitable[Any]]

#: what runs each test's coroutine: set by :func:`_event_loop` for each loop
_runner: Callable[[Coroutine[Any, Any, Any]], Any] = asyncio.run


@pytest.fixture(autouse=True, params=["asyncio", "uvloop"])
def _event_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = endpoint_worker.run if request.param == "uvloop" else asyncio.run
    monkeypatch.setattr(sys.modules[__name__], "_runner", runner)


#: the gate's decisions are kept (given without waiting): set by :func:`_decisions`
_decisions_kept = False


@pytest.fixture(autouse=True, params=["asked", "kept"])
def _decisions(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "_decisions_kept", request.param == "kept")


def _service_app(seen: dict[str, Any]) -> web.Application:
    """Small answers, large ones, bodies echoed; which connections asked (``peers``)."""

    async def hello(request: web.Request) -> web.Response:
        seen.setdefault("peers", set()).add(request.transport.get_extra_info("peername"))
        return web.Response(text="hello")

    async def large(request: web.Request) -> web.StreamResponse:
        size = int(request.match_info["size"])
        response = web.StreamResponse()
        response.content_length = size
        await response.prepare(request)
        pattern = bytes(range(256)) * 4096  # 1 MiB that is not all zeros
        sent = 0
        while sent < size:
            piece = pattern[: min(len(pattern), size - sent)]
            await response.write(piece)
            sent += len(piece)
            if seen.get("cut_at") is not None and sent >= seen["cut_at"]:
                assert request.transport is not None
                request.transport.close()
                return response
        return response

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        return web.Response(body=body, headers={"X-Received": str(len(body))})

    async def headers(request: web.Request) -> web.Response:
        return web.json_response(dict(request.headers))

    async def cookies(request: web.Request) -> web.Response:
        return web.json_response(request.headers.getall("Cookie", []))

    async def line(request: web.Request) -> web.Response:
        version = request.version
        return web.Response(text=f"<{request.method} HTTP/{version.major}.{version.minor}>")

    app = web.Application(client_max_size=64 << 20)
    app.router.add_get("/", hello)
    app.router.add_route("HEAD", "/head", hello)
    app.router.add_get("/large/{size}", large)
    app.router.add_post("/echo", echo)
    app.router.add_get("/headers", headers)
    app.router.add_get("/cookies", cookies)
    app.router.add_route("*", "/line", line)
    return app


def _run(scenario: Scenario, *, keepalive_timeout: float = 75.0) -> Any:
    """Start the service and the forwarder (path ``/x`` leads to the service) and run
    ``scenario(proxy base URL, seen)``."""

    async def main() -> Any:
        seen: dict[str, Any] = {}
        service_port, proxy_port = free_port(), free_port()
        runner = web.AppRunner(_service_app(seen), keepalive_timeout=keepalive_timeout)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", service_port).start()

        # kept decisions give one Forward per kind of head again and again, as the
        # proxy's process does; awaited ones a new Forward each time, as Orchestrate's
        forwards: dict[str, Forward] = {}

        def decided(head: RequestHead) -> Forward:
            path = head.target.removeprefix("/x") or "/"
            forward = forwards.get(path)
            if forward is None:
                forward = Forward(url=f"http://127.0.0.1:{service_port}", path=path, cookie=None)
                if _decisions_kept:
                    forwards[path] = forward
            return forward

        async def gate(head: RequestHead) -> Forward:
            return decided(head)

        pool = ServicePool(False)
        kept = decided if _decisions_kept else None
        server = await serve(gate, pool, "127.0.0.1", proxy_port, kept=kept)
        try:
            return await scenario(f"http://127.0.0.1:{proxy_port}/x", seen)
        finally:
            server.close()
            pool.close()
            await runner.cleanup()

    return _runner(main())


def _pattern(size: int) -> bytes:
    whole = bytes(range(256)) * 4096
    return (whole * (size // len(whole) + 1))[:size]


def test_small_requests_share_one_kept_connection_to_the_service() -> None:
    async def scenario(base: str, seen: dict[str, Any]) -> list[str]:
        async with aiohttp.ClientSession() as session:
            texts = []
            for _ in range(5):
                async with session.get(base + "/") as answer:
                    texts.append(await answer.text())
        assert len(seen["peers"]) == 1
        return texts

    assert _run(scenario) == ["hello"] * 5


def test_a_kept_connection_the_service_closed_is_replaced_without_an_error() -> None:
    async def scenario(base: str, seen: dict[str, Any]) -> list[int]:
        statuses = []
        async with aiohttp.ClientSession() as session:
            for _ in range(2):
                async with session.get(base + "/") as answer:
                    statuses.append(answer.status)
                await asyncio.sleep(0.5)  # past the service's keep-alive timeout
        return statuses

    assert _run(scenario, keepalive_timeout=0.1) == [200, 200]


def test_a_large_answer_arrives_whole_and_the_connection_serves_again() -> None:
    size = 3 * SPLICE_MIN + 12345

    async def scenario(base: str, seen: dict[str, Any]) -> tuple[bytes, str]:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/large/{size}") as answer:
                body = await answer.read()
            async with session.get(base + "/") as answer:
                after = await answer.text()
        return body, after

    body, after = _run(scenario)
    assert body == _pattern(size)
    assert after == "hello"


@pytest.fixture
def spliced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The byte count of every splice the forwarder makes (each still made)."""
    moved_counts: list[int] = []
    real = endpoint_forwarder.os.splice

    def counting(*args: Any, **kwargs: Any) -> int:
        moved = real(*args, **kwargs)
        moved_counts.append(moved)
        return moved

    monkeypatch.setattr(endpoint_forwarder.os, "splice", counting)
    return moved_counts


def test_a_large_answer_moves_by_splice_between_plain_connections(spliced: list[int]) -> None:
    size = 4 * SPLICE_MIN

    async def scenario(base: str, seen: dict[str, Any]) -> int:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{base}/large/{size}") as answer,
        ):
            return len(await answer.read())

    assert _run(scenario) == size
    assert sum(spliced) >= 2 * (size - SPLICE_MIN)  # into the pipe and out of it


def test_a_service_cutting_a_large_answer_cuts_the_clients_too() -> None:
    size = 8 * SPLICE_MIN

    async def scenario(base: str, seen: dict[str, Any]) -> str:
        seen["cut_at"] = 3 * SPLICE_MIN
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{base}/large/{size}") as answer,
        ):
            try:
                await answer.read()
            except aiohttp.ClientPayloadError:
                return "cut"
            return "whole"

    assert _run(scenario) == "cut"


def test_a_head_answer_is_followed_by_the_next_answer_on_the_same_connection() -> None:
    async def scenario(base: str, seen: dict[str, Any]) -> tuple[int, str | None, str]:
        async with aiohttp.ClientSession() as session:
            async with session.head(base + "/head") as answer:
                status, length = answer.status, answer.headers.get("Content-Length")
            async with session.get(base + "/") as answer:
                return status, length, await answer.text()

    assert _run(scenario) == (200, "5", "hello")


def test_a_chunked_request_body_reaches_the_service_whole() -> None:
    parts = [bytes([n]) * 70_000 for n in range(10)]

    async def scenario(base: str, seen: dict[str, Any]) -> tuple[str, bytes]:
        async def body() -> Any:
            for part in parts:
                yield part

        async with (
            aiohttp.ClientSession() as session,
            session.post(base + "/echo", data=body()) as answer,
        ):
            return answer.headers["X-Received"], await answer.read()

    assert _run(scenario) == (str(sum(map(len, parts))), b"".join(parts))


def test_pipelined_requests_are_answered_in_order() -> None:
    async def scenario(base: str, seen: dict[str, Any]) -> bytes:
        port = int(base.rsplit(":", 1)[1].split("/")[0])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        ask = b"GET /x/ HTTP/1.1\r\nHost: a\r\n\r\nGET /x/head HTTP/1.1\r\nHost: a\r\n\r\n"
        writer.write(ask + b"GET /x/ HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        received = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        return received

    received = _run(scenario)
    assert received.count(b"HTTP/1.1 200 OK") == 2  # /x/head is not a GET route: 405
    assert received.index(b"405") > received.index(b"hello")
    assert received.endswith(b"hello")


def test_the_service_gets_the_path_below_the_endpoint_without_the_token_or_hop_headers() -> None:
    async def scenario(base: str, seen: dict[str, Any]) -> dict[str, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                base + "/headers",
                headers={
                    "FB-Authorization": "Bearer secret-token",
                    "Connection": "keep-alive, X-Hop",
                    "X-Hop": "this hop only",
                    "X-Forwarded-For": "spoofed",
                    "Authorization": "Basic c2VydmljZQ==",
                },
            ) as answer,
        ):
            return dict(await answer.json())

    sent = _run(scenario)
    assert "FB-Authorization" not in sent
    assert "X-Hop" not in sent
    assert sent["Authorization"] == "Basic c2VydmljZQ=="
    assert sent["X-Forwarded-For"] == "127.0.0.1"
    assert sent["X-Forwarded-Proto"] == "http"


def test_a_request_head_over_the_limit_is_431() -> None:
    async def scenario(base: str, seen: dict[str, Any]) -> int:
        headers = {f"X-Filler-{n}": "f" * 8000 for n in range(MAX_HEAD // 8000 + 2)}
        async with (
            aiohttp.ClientSession() as session,
            session.get(base + "/", headers=headers) as answer,
        ):
            return answer.status

    assert _run(scenario) == 431


@contextlib.asynccontextmanager
async def _proxy_to(
    answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[int]:
    """A raw TCP service answering with ``answer`` and a proxy in front of it; the proxy's
    port (both closed after)."""
    service = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = service.sockets[0].getsockname()[1]
    pool = ServicePool(False)

    async def gate(head: RequestHead) -> Forward:
        return Forward(url=f"http://127.0.0.1:{port}", path="/", cookie=None)

    proxy = await serve(gate, pool, "127.0.0.1", 0)
    try:
        yield proxy.sockets[0].getsockname()[1]
    finally:
        proxy.close()
        service.close()
        pool.close()


def test_an_answer_with_bare_lf_lines_ending_by_close_reaches_the_client_whole() -> None:
    async def scenario(base: str, seen: dict[str, Any]) -> tuple[int, str]:
        # a busybox-httpd-like service: bare LFs, no length, the end of the answer is the
        # end of its connection
        async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\n\nuser=alice\n")
            await writer.drain()
            writer.close()

        async with (
            _proxy_to(answer_once) as proxy_port,
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{proxy_port}/") as answer,
        ):
            return answer.status, await asyncio.wait_for(answer.text(), 30)

    assert _run(scenario) == (200, "user=alice\n")


def test_a_large_answer_whose_head_comes_in_pieces_is_spliced_and_the_next_one_follows(
    spliced: list[int],
) -> None:
    # the answer's length is read by a second parser from the reads so far, once its head
    # is whole: here the head comes in two reads, the second with the body's start
    size = 2 * SPLICE_MIN + 7

    async def scenario(base: str, seen: dict[str, Any]) -> tuple[int, str]:
        async def answer_twice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Ty")
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.write(b"pe: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % size)
            writer.write(_pattern(size))
            await writer.drain()
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nafter")
            await writer.drain()
            await reader.read()
            writer.close()

        async with _proxy_to(answer_twice) as proxy_port, aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{proxy_port}/") as answer:
                body = await asyncio.wait_for(answer.read(), 30)
            assert body == _pattern(size)
            async with session.get(f"http://127.0.0.1:{proxy_port}/") as answer:
                return answer.status, await asyncio.wait_for(answer.text(), 30)

    assert _run(scenario) == (200, "after")
    assert sum(spliced) >= 2 * SPLICE_MIN  # most of the body, into the pipe and out of it


# -- the request head read in C (csrc/request_head.c): reads that cut heads anywhere, several
# requests in one read, heads llhttp refuses


async def _exchange(base: str, pieces: list[bytes]) -> bytes:
    """Send ``pieces`` to the proxy, each a read of its own (a pause between them), and
    return all it answers until it closes the connection."""
    port = int(base.rsplit(":", 1)[1].split("/")[0])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for piece in pieces:
        writer.write(piece)
        await writer.drain()
        await asyncio.sleep(0.05)
    received = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    return received


def _json_body(answer: bytes) -> dict[str, str]:
    return dict(json.loads(answer.partition(b"\r\n\r\n")[2]))


def test_a_head_cut_across_reads_anywhere_reaches_the_service_whole() -> None:
    head = (
        b"GET /x/headers HTTP/1.1\r\nHost: proxy.example\r\n"
        b"FB-Authorization: Bearer secret-token\r\nConnection: close, X-Hop\r\n"
        b"X-Hop: this hop only\r\nAuthorization: Basic c2VydmljZQ==\r\n"
        b"X-Long: " + b"v" * 3000 + b"\r\n\r\n"
    )
    # cut inside the target, a name, the token's value, a CRLF and the long value
    cuts = [7, 40, 60, 95, 200, len(head) - 1000, len(head) - 1]
    pieces = [head[a:b] for a, b in zip([0, *cuts], [*cuts, len(head)], strict=True)]

    sent = _json_body(_run(lambda base, seen: _exchange(base, pieces)))
    assert "FB-Authorization" not in sent
    assert "X-Hop" not in sent
    assert sent["Authorization"] == "Basic c2VydmljZQ=="
    assert sent["X-Long"] == "v" * 3000
    assert sent["X-Forwarded-Host"] == "proxy.example"


def test_requests_with_bodies_in_one_read_are_answered_in_order() -> None:
    one_read = (
        b"POST /x/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nfirst"
        b"POST /x/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nsec\r\n3\r\nond\r\n0\r\n\r\n"
        b"GET /x/ HTTP/1.1\r\nHost: a\r\n\r\n"
        b"POST /x/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nConnection: close\r\n\r\nlast."
    )

    received = _run(lambda base, seen: _exchange(base, [one_read]))
    assert received.count(b"HTTP/1.1 200 OK") == 4
    bodies = [received.index(word) for word in (b"first", b"second", b"hello", b"last.")]
    assert bodies == sorted(bodies)


def test_a_body_cut_across_reads_reaches_the_service_whole() -> None:
    pieces = [
        b"POST /x/echo HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 12\r\n\r\nhel",
        b"lo, ",
        b"world",
    ]

    received = _run(lambda base, seen: _exchange(base, pieces))
    assert received.endswith(b"\r\n\r\nhello, world")
    assert b"X-Received: 12" in received


def test_a_folded_header_line_is_refused_with_400() -> None:
    # obs-fold (RFC 9112 5.2): a proxy must refuse it or unfold it; llhttp refuses it
    folded = b"GET /x/headers HTTP/1.1\r\nHost: a\r\nX-Folded: one\r\n  two\r\n\r\n"

    received = _run(lambda base, seen: _exchange(base, [folded]))
    assert received.startswith(b"HTTP/1.1 400 ")
    assert b"Connection: close" in received


def test_a_header_name_with_a_space_is_refused_with_400() -> None:
    bad = b"GET /x/ HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n"

    received = _run(lambda base, seen: _exchange(base, [bad]))
    assert received.startswith(b"HTTP/1.1 400 ")


def test_a_header_line_over_the_field_limit_is_431() -> None:
    async def scenario(base: str, seen: dict[str, Any]) -> int:
        async with (
            aiohttp.ClientSession() as session,
            session.get(base + "/", headers={"X-Filler": "f" * (MAX_FIELD + 1)}) as answer,
        ):
            return answer.status

    assert _run(scenario) == 431


def test_the_service_gets_each_cookie_header_the_client_sent() -> None:
    ask = (
        b"GET /x/cookies HTTP/1.1\r\nHost: a\r\nCookie: a=1\r\nX-Between: y\r\n"
        b"Cookie: b=2\r\nConnection: close\r\n\r\n"
    )

    received = _run(lambda base, seen: _exchange(base, [ask]))
    assert json.loads(received.partition(b"\r\n\r\n")[2]) == ["a=1", "b=2"]


def test_the_service_gets_each_requests_method_and_version_to_the_same_place() -> None:
    # one kind of head after another to one Forward (its request line is kept by method)
    one_read = (
        b"GET /x/line HTTP/1.1\r\nHost: a\r\n\r\n"
        b"POST /x/line HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"
        b"GET /x/line HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n"
        b"GET /x/line HTTP/1.1\r\nHost: a\r\n\r\n"
        b"DELETE /x/line HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
    )

    received = _run(lambda base, seen: _exchange(base, [one_read]))
    assert re.findall(rb"<([^>]*)>", received) == [
        b"GET HTTP/1.1",
        b"POST HTTP/1.1",
        b"GET HTTP/1.0",
        b"GET HTTP/1.1",
        b"DELETE HTTP/1.1",
    ]


def test_a_head_near_the_size_limit_reaches_the_service_whole() -> None:
    # the key and the tail come from C as one string cut at a length the event carries:
    # lengths in the tens of thousands, a long target and a long token in the key
    fields = {f"X-Big-{n}": chr(ord("a") + n) * 7000 for n in range(8)}
    head = (
        b"GET /x/headers?" + b"q" * 4000 + b" HTTP/1.1\r\nHost: a\r\n"
        b"FB-Authorization: Bearer "
        + b"t" * 3000
        + b"\r\nConnection: close\r\n"
        + b"".join(f"{name}: {value}\r\n".encode() for name, value in fields.items())
        + b"\r\n"
    )
    assert MAX_HEAD - 4000 < len(head) < MAX_HEAD

    sent = _json_body(_run(lambda base, seen: _exchange(base, [head])))
    assert {name: sent.get(name) for name in fields} == fields
    assert "FB-Authorization" not in sent
    assert sent["X-Forwarded-Host"] == "a"
