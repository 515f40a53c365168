"""The node's PMI-1 service with real MPICH ranks: two services play two nodes, their
barriers joined the way Orchestrate joins them, and the ranks must wire up across both."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from support.mpi_image import build_ring

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.fences import FenceRelay
from fuzzball_core.substrate.pmi import PmiService
from fuzzball_core.substrate.ranks import RankLayout


@pytest.fixture(scope="module")
def ring(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tests/fixtures/mpi/ring.c`` built with MPICH's compiler wrapper."""
    program = build_ring(tmp_path_factory.mktemp("mpi"))
    if program is None:
        pytest.skip("MPICH is not installed (apt-get install mpich libmpich-dev)")
    return program


class TwoNodes:
    """Two nodes' PMI services for one run, fenced through Orchestrate's relay."""

    def __init__(self, procs_per_node: int) -> None:
        self.relay = FenceRelay()
        self.relay.watch(7, ["node-a", "node-b"])
        self.node_ids = ["node-a", "node-b"]
        self.waiting: dict[tuple[str, int], asyncio.Future[dict[str, str]]] = {}
        self.aborts: list[str] = []
        self.fences = 0
        self.services = [
            PmiService(
                RankLayout(part, 2, procs_per_node),
                "kvs_7",
                self._fence_for(node_id),
                self.aborts.append,
            )
            for part, node_id in enumerate(self.node_ids)
        ]

    def _fence_for(self, node_id: str):
        async def fence(seq: int, kvs: dict[str, str]) -> dict[str, str]:
            self.fences += 1
            future = asyncio.get_running_loop().create_future()
            self.waiting[(node_id, seq)] = future
            message = node_pb2.Fence(run_id=7, seq=seq, kvs=kvs)
            for target, control in self.relay.relay(node_id, message) or ():
                done = control.fence_done
                self.waiting.pop((target, done.seq)).set_result(dict(done.kvs))
            return await future

        return fence


async def _run_ranks(program: Path, nodes: TwoNodes, *, hostnames: bool = True) -> list[str]:
    ports = [await service.start() for service in nodes.services]
    processes = []
    for service, port in zip(nodes.services, ports, strict=True):
        for rank in service.layout.local_ranks:
            env = {**os.environ, **service.layout.environment(port), "PMI_ID": str(rank)}
            argv = [str(program)]
            if hostnames:  # each node's ranks under its own hostname, as in its container
                host = f"part{service.layout.part}"
                argv = ["unshare", "--uts", "sh", "-c", f'hostname {host} && exec "$0"', *argv]
            processes.append(
                await asyncio.create_subprocess_exec(
                    *argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
                )
            )
    try:
        outputs = await asyncio.wait_for(
            asyncio.gather(*(p.communicate() for p in processes)), timeout=120
        )
    finally:
        for service in nodes.services:
            service.close()
    assert [p.returncode for p in processes] == [0] * len(processes), outputs
    return sorted(out.decode().strip() for out, _ in outputs)


@pytest.mark.root
def test_ranks_on_two_nodes_wire_up_through_the_fenced_services(ring: Path) -> None:
    nodes = TwoNodes(procs_per_node=2)

    lines = asyncio.run(_run_ranks(ring, nodes))

    assert lines == [
        "rank 0 of 4 on part0 sum 10",
        "rank 1 of 4 on part0 sum 10",
        "rank 2 of 4 on part1 sum 10",
        "rank 3 of 4 on part1 sum 10",
    ]
    assert nodes.fences >= 2 and nodes.aborts == []


def test_a_rank_calling_mpi_abort_is_reported() -> None:
    nodes = TwoNodes(procs_per_node=1)

    async def scenario() -> None:
        port = await nodes.services[0].start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"cmd=initack pmiid=0\ncmd=abort exitcode=3\n")
        await writer.drain()
        for _ in range(4):  # initack and the three settings
            await reader.readline()
        for _ in range(100):
            if nodes.aborts:
                break
            await asyncio.sleep(0.01)
        writer.close()
        nodes.services[0].close()

    asyncio.run(scenario())

    assert nodes.aborts == ["rank 0 called MPI_Abort (exit code 3)"]


def test_a_connection_claiming_another_nodes_rank_is_refused() -> None:
    nodes = TwoNodes(procs_per_node=2)

    async def scenario() -> bytes:
        port = await nodes.services[0].start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"cmd=initack pmiid=3\n")  # rank 3 belongs to the second node
        await writer.drain()
        answer = await reader.read()
        writer.close()
        nodes.services[0].close()
        return answer

    assert asyncio.run(scenario()) == b""
    assert nodes.aborts == []
