"""The node's metrics endpoint: ``GET /metrics`` in Prometheus's text format.

Samples come from the ``fuzzball_node_collect_metrics`` hook (the builtin procfs plugin and
any site plugin) and from the agent itself (its running jobs, its connection to Orchestrate,
a failed device plugin), so the monitoring stack can place holds on what it sees.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping

from aiohttp import web

log = logging.getLogger(__name__)

_SAMPLE_NAME = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?")


def exposition(samples: Mapping[str, float]) -> str:
    """Render ``name{labels} -> value`` samples as Prometheus text, one TYPE line per name.

    Samples whose name is not a valid metric name are dropped with a warning (a plugin's bug
    must not break the whole scrape).
    """
    lines: list[str] = []
    typed: set[str] = set()
    for key in sorted(samples):
        match = _SAMPLE_NAME.fullmatch(key)
        value = samples[key]
        if match is None or not isinstance(value, int | float):
            log.warning("dropping metric sample %r: not a valid Prometheus sample", key)
            continue
        name = match.group(1)
        if name not in typed:
            typed.add(name)
            lines.append(f"# TYPE {name} gauge")
        text = "NaN" if math.isnan(value) else repr(float(value))
        lines.append(f"{key} {text}")
    return "\n".join(lines) + "\n"


class MetricsServer:
    """Serves ``collect()``'s samples on ``listen`` (``host:port``; empty disables it)."""

    def __init__(self, listen: str, collect: Callable[[], Mapping[str, float]]) -> None:
        self.listen = listen
        self._collect = collect
        self._runner: web.AppRunner | None = None

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(
            text=exposition(self._collect()), content_type="text/plain", charset="utf-8"
        )

    async def start(self) -> bool:
        """Start serving; False (with a warning naming the address) when it cannot bind."""
        if not self.listen:
            return False
        host, _, port = self.listen.rpartition(":")
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, host or "127.0.0.1", int(port)).start()
        except OSError as exc:
            log.warning(
                "node metrics are not served: cannot listen on %s (%s)",
                self.listen,
                exc.strerror or exc,
            )
            await self._runner.cleanup()
            self._runner = None
            return False
        log.info("node metrics on http://%s/metrics", self.listen)
        return True

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
