"""A service's readiness probe, run by the node against the service's container.

Semantics follow Kubernetes': the first check after ``initial-delay-seconds``, then one every
``period-seconds`` (default 10), each given ``timeout-seconds`` (default 1); the service is
ready after ``success-threshold`` consecutive successes (default 1). Services share the
host's network, so ``tcp-socket`` connects to and ``http-get`` asks 127.0.0.1 at the port
(2xx and 3xx answers succeed). ``exec`` and ``grpc`` probes are refused at submission.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import httpx

from fuzzball_core.spec.models import Probe

DEFAULT_PERIOD = 10
DEFAULT_TIMEOUT = 1


async def check(probe: Probe) -> bool:
    """One check of ``probe``: True when it succeeds."""
    timeout = probe.timeout_seconds or DEFAULT_TIMEOUT
    if probe.tcp_socket is not None:
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", probe.tcp_socket.port), timeout
            )
        except (OSError, TimeoutError):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True
    if probe.http_get is not None:
        action = probe.http_get
        scheme = (action.scheme or "HTTP").lower()
        url = f"{scheme}://127.0.0.1:{action.port}/{(action.path or '').lstrip('/')}"
        headers = {h.name: h.value for h in action.http_headers or ()}
        try:
            async with httpx.AsyncClient(verify=False, timeout=timeout) as client:
                response = await client.get(url, headers=headers)
        except httpx.HTTPError:
            return False
        return 200 <= response.status_code < 400
    return False  # exec and grpc never reach a node (refused at submission)


async def wait_until_ready(probe: Probe, still_running: Callable[[], bool]) -> bool:
    """Check ``probe`` on its schedule until it is ready (True) or the service stopped."""
    await asyncio.sleep(probe.initial_delay_seconds or 0)
    needed = probe.success_threshold or 1
    passed = 0
    while still_running():
        passed = passed + 1 if await check(probe) else 0
        if passed >= needed:
            return True
        await asyncio.sleep(probe.period_seconds or DEFAULT_PERIOD)
    return False
