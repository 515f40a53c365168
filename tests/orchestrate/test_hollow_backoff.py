"""A hollow node backs off between failed reconnects as the agent does: only a session that
stayed up starts its backoff over, so after a flap a node whose Registers keep failing
waits longer each time instead of trying again every 0.2 s (at 5,000 nodes the fleets
spent about a core on such tries while the first 2,000 nodes came back, on the two cores
Orchestrate shares with them)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from types import SimpleNamespace

import grpc
import support.hollow
from support.hollow import HollowNode, HollowStats

from fuzzball_core.api.v1 import node_pb2


class RecordingBackoff:
    """A backoff of tiny doubling delays that records every delay any of its schedules gives."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def delays(self) -> Iterator[float]:
        delay = 0.001
        while True:
            self.waits.append(delay)
            yield delay
            delay = min(delay * 2, 0.008)


def unavailable() -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "down"
    )


class FlappingStub:
    """Orchestrate as a node sees it through a flap: a Register and a stream that is welcomed,
    stays up a minute (the clock jumps) and is dropped, then Registers that fail at once."""

    def __init__(self, clock: SimpleNamespace, stop: asyncio.Event, tries: int) -> None:
        self.clock, self.stop, self.tries = clock, stop, tries
        self.registers = 0

    async def Register(self, request, metadata):
        self.registers += 1
        if self.registers == 1:
            return node_pb2.RegisterResponse(node_id="node-1", lease_seconds=15)
        if self.registers >= self.tries:
            self.stop.set()
        raise unavailable()

    def Connect(self, requests, metadata):
        clock = self.clock

        class Call:
            async def __aiter__(self):
                yield node_pb2.ControlMessage(welcome=node_pb2.Welcome(lease_seconds=15))
                clock.offset += 60  # the stream stayed up a minute, then the flap
                raise unavailable()

            def cancel(self) -> None:
                pass

        return Call()


def test_failed_reconnects_after_a_flap_back_off_instead_of_starting_over(monkeypatch):
    clock = SimpleNamespace(offset=0.0)
    fake_time = SimpleNamespace(monotonic=lambda: time.monotonic() + clock.offset, time=time.time)
    backoff = RecordingBackoff()
    monkeypatch.setattr(support.hollow, "time", fake_time)
    monkeypatch.setattr(support.hollow, "RECONNECT_BACKOFF", backoff)

    async def main() -> None:
        stop = asyncio.Event()
        node = HollowNode(FlappingStub(clock, stop, tries=5), "n1", "token", HollowStats())
        await asyncio.wait_for(node.run(stop), 10)

    asyncio.run(main())
    # the minute-long stream starts the backoff over once; the failed tries after it grow it
    assert backoff.waits[:4] == [0.001, 0.002, 0.004, 0.008]
