"""The bundled node_exporter: Debian's prometheus-node-exporter, started and supervised by
Substrate (a real one, on a loopback port)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support.cluster import free_port

from fuzzball_core.health import Health
from fuzzball_core.substrate import node_exporter
from fuzzball_core.substrate.node_exporter import NodeExporter

pytestmark = pytest.mark.skipif(
    node_exporter.find_binary() is None, reason="needs Debian's prometheus-node-exporter"
)


async def _metrics(listen: str) -> str:
    async with httpx.AsyncClient(timeout=2) as client:
        for _ in range(100):
            try:
                reply = await client.get(f"http://{listen}/metrics")
                if reply.status_code == 200:
                    return reply.text
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"no node_exporter answered on {listen}")


def test_substrate_starts_a_node_exporter_that_serves_the_machines_metrics() -> None:
    async def scenario() -> str:
        listen = f"127.0.0.1:{free_port()}"
        exporter = NodeExporter(listen, Health("substrate"))
        assert exporter.start()
        try:
            return await _metrics(listen)
        finally:
            await exporter.stop()

    assert "node_load1 " in asyncio.run(scenario())


def test_a_node_exporter_that_exits_is_started_again() -> None:
    async def scenario() -> tuple[int, int, bool]:
        listen = f"127.0.0.1:{free_port()}"
        health = Health("substrate")
        exporter = NodeExporter(listen, health)
        exporter.start()
        try:
            await _metrics(listen)
            assert exporter.process is not None
            first = exporter.process.pid
            exporter.process.kill()
            for _ in range(100):  # the restart comes after the backoff's first delay (1 s)
                await asyncio.sleep(0.1)
                if exporter.process.pid != first and exporter.process.returncode is None:
                    break
            await _metrics(listen)
            return first, exporter.process.pid, health.get("node_exporter").ok
        finally:
            await exporter.stop()

    first, second, ok = asyncio.run(scenario())
    assert second != first and ok


def test_no_listen_address_starts_nothing() -> None:
    async def scenario() -> bool:
        return NodeExporter("", Health("substrate")).start()

    assert asyncio.run(scenario()) is False


def test_a_node_without_the_binary_runs_none_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> bool:
        exporter = NodeExporter("127.0.0.1:1", Health("substrate"))
        exporter.binary = None
        return exporter.start()

    assert asyncio.run(scenario()) is False
    assert "prometheus-node-exporter" in caplog.text


def test_the_node_exporter_ends_with_a_substrate_that_is_killed(tmp_path: Path) -> None:
    listen = f"127.0.0.1:{free_port()}"
    pid_file = tmp_path / "exporter.pid"
    # a stand-in for Substrate: starts the exporter, writes its pid, then waits to be killed
    script = (
        "import asyncio, sys\n"
        "from fuzzball_core.health import Health\n"
        "from fuzzball_core.substrate.node_exporter import NodeExporter\n"
        "async def main():\n"
        f"    e = NodeExporter({listen!r}, Health('substrate'))\n"
        "    e.start()\n"
        "    while e.process is None:\n"
        "        await asyncio.sleep(0.05)\n"
        f"    open({str(pid_file)!r}, 'w').write(str(e.process.pid))\n"
        "    await asyncio.sleep(60)\n"
        "asyncio.run(main())\n"
    )
    agent = subprocess.Popen([sys.executable, "-c", script])
    try:
        for _ in range(100):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.1)
        exporter_pid = int(pid_file.read_text())
    finally:
        agent.kill()
        agent.wait()
    for _ in range(100):
        if not Path(f"/proc/{exporter_pid}").exists() or _zombie(exporter_pid):
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{exporter_pid}").exists() or _zombie(exporter_pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True
