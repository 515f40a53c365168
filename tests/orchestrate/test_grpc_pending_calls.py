"""Orchestrate's gRPC server holds a whole cluster's calls arriving at once.

The asyncio server takes one call a turn of its loop; while the loop is busy (a pass, a
batch of arrivals) the calls wait in gRPC core, whose defaults refuse those past 1,000
(CANCELLED, every one past 3,000), and cancel a call still not taken after 30 s. 5,000
nodes calling at once after a flap were refused tens of thousands of times, each trying
again after its backoff; once held, about 1,800 of their Registers still waited past 30 s.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import grpc
import pytest

from fuzzball_core.config import FuzzballConfig
from fuzzball_core.orchestrate.server import grpc_server_options

CALLS = 3_500  # past gRPC core's default hard limit (3,000): some are refused for sure
HELD_FOR = 2.0  # seconds the loop is kept from taking calls
#: calls each holding the loop :data:`EACH_HOLDS` seconds: the last are taken after 33 s,
#: past gRPC core's default 30 s for a call not taken
SLOW_CALLS = 330
EACH_HOLDS = 0.1


def _call_all(port: int, outcome: Counter[str], count: int = CALLS) -> None:
    """``count`` unary calls at once over 20 connections (as many nodes), each call's
    status."""
    channels = [grpc.insecure_channel(f"127.0.0.1:{port}") for _ in range(20)]
    try:
        calls = [
            channels[i % len(channels)].unary_unary("/test.Held/Call").future(b"", timeout=60)
            for i in range(count)
        ]
        for call in calls:
            try:
                call.result()
                outcome["OK"] += 1
            except grpc.RpcError as exc:
                outcome[exc.code().name] += 1
    finally:
        for channel in channels:
            channel.close()


async def _calls_while_the_loop_is_held(
    options: list[tuple[str, int]],
    count: int = CALLS,
    held_for: float = HELD_FOR,
    each_holds: float = 0.0,
) -> Counter[str]:
    async def answer(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        time.sleep(each_holds)  # the loop held by each call, as by its arrival's transaction
        return b""

    server = grpc.aio.server(options=options)
    handler = grpc.unary_unary_rpc_method_handler(answer)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("test.Held", {"Call": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    outcome: Counter[str] = Counter()
    caller = threading.Thread(target=_call_all, args=(port, outcome, count))
    try:
        caller.start()
        await asyncio.sleep(0.05)
        time.sleep(held_for)  # the loop held, as by a long pass: the calls pile up
        while caller.is_alive():
            await asyncio.sleep(0.05)
    finally:
        caller.join()
        await server.stop(None)
    return outcome


def test_a_burst_of_calls_while_the_loop_is_busy_is_answered_not_refused() -> None:
    outcome = asyncio.run(_calls_while_the_loop_is_held(grpc_server_options(FuzzballConfig())))
    assert outcome == Counter({"OK": CALLS})


@pytest.mark.slow
def test_calls_the_loop_takes_only_after_30_seconds_are_answered_not_cancelled() -> None:
    options = grpc_server_options(FuzzballConfig())
    outcome = asyncio.run(_calls_while_the_loop_is_held(options, SLOW_CALLS, 0.0, EACH_HOLDS))
    assert outcome == Counter({"OK": SLOW_CALLS})
