"""Orchestrate's gRPC server holds a whole cluster's calls arriving at once.

The asyncio server takes one call a turn of its loop; while the loop is busy (a pass, a
batch of arrivals) the calls wait in gRPC core, whose defaults refuse those past 1,000
(CANCELLED, every one past 3,000). 5,000 nodes calling at once after a flap were refused
tens of thousands of times, each trying again after its backoff.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import grpc

from fuzzball_core.config import FuzzballConfig
from fuzzball_core.orchestrate.server import grpc_server_options

CALLS = 3_500  # past gRPC core's default hard limit (3,000): some are refused for sure
HELD_FOR = 2.0  # seconds the loop is kept from taking calls


def _call_all(port: int, outcome: Counter[str]) -> None:
    """CALLS unary calls at once over 20 connections (as many nodes), each call's status."""
    channels = [grpc.insecure_channel(f"127.0.0.1:{port}") for _ in range(20)]
    try:
        calls = [
            channels[i % len(channels)].unary_unary("/test.Held/Call").future(b"", timeout=60)
            for i in range(CALLS)
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


async def _calls_while_the_loop_is_held(options: list[tuple[str, int]]) -> Counter[str]:
    async def answer(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b""

    server = grpc.aio.server(options=options)
    handler = grpc.unary_unary_rpc_method_handler(answer)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("test.Held", {"Call": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    outcome: Counter[str] = Counter()
    caller = threading.Thread(target=_call_all, args=(port, outcome))
    try:
        caller.start()
        await asyncio.sleep(0.05)
        time.sleep(HELD_FOR)  # the loop held, as by a long pass: the calls pile up
        while caller.is_alive():
            await asyncio.sleep(0.05)
    finally:
        caller.join()
        await server.stop(None)
    return outcome


def test_a_burst_of_calls_while_the_loop_is_busy_is_answered_not_refused() -> None:
    outcome = asyncio.run(_calls_while_the_loop_is_held(grpc_server_options(FuzzballConfig())))
    assert outcome == Counter({"OK": CALLS})
