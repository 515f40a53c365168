"""The agent's heartbeat turn (``Agent._upkeep``): what it does besides the heartbeat."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from fuzzball_core.config import parse_config
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.agent import Agent


def test_expired_workflow_directories_are_removed_off_the_event_loop(tmp_path: Path) -> None:
    config = parse_config(
        {
            "data-dir": str(tmp_path),
            "substrate": {"work-dir": str(tmp_path / "node"), "cores": 1, "devices": {}},
        }
    )
    agent = Agent(config, get_registry())
    agent.heartbeat_seconds = 0.01
    threads: list[int] = []

    def expire(now: float) -> list[str]:
        threads.append(threading.get_ident())
        return []

    agent.services.volumes.expire = expire  # type: ignore[method-assign]

    async def one_turn() -> int:
        await agent._upkeep(generation=0)
        return threading.get_ident()

    loop_thread = asyncio.run(one_turn())

    assert len(threads) == 1 and threads[0] != loop_thread
