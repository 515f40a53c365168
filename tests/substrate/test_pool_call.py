"""The hop of a container's start to the node's thread pool and back (``pool_call``): what
``run_in_executor`` did, with the loop's future set from the pool's thread."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from fuzzball_core.substrate.drivers.containers import pool_call


def test_the_result_is_made_on_a_pool_thread_and_answered_on_the_loop() -> None:
    async def main() -> tuple[str, str]:
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(1, thread_name_prefix="pool") as pool:
            return await pool_call(loop, pool, lambda x: x + threading.current_thread().name, "on ")

    result = asyncio.run(main())
    assert result.startswith("on pool")


def test_an_exception_of_the_call_is_raised_by_its_future() -> None:
    def fail(message: str) -> None:
        raise ValueError(message)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(1) as pool:
            await pool_call(loop, pool, fail, "no start")

    with pytest.raises(ValueError, match="no start"):
        asyncio.run(main())


def test_a_call_cancelled_before_the_pool_began_it_is_not_made() -> None:
    made: list[str] = []
    busy = threading.Event()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(1)
        try:
            pool.submit(busy.wait)  # the only thread is taken until the future is cancelled
            future = pool_call(loop, pool, made.append, "started")
            future.cancel()
        finally:
            busy.set()
            pool.shutdown(wait=True)
        await asyncio.sleep(0)
        assert future.cancelled()

    asyncio.run(main())
    assert made == []
