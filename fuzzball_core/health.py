"""A process's health: named conditions, the loops that keep them, ``/healthz`` and ``/readyz``.

Every long-running loop of a Fuzzball process (Orchestrate's engine, which also keeps the
nodes' leases; Substrate's heartbeats; Federate's member polling; provisioner and monitoring
loops when they come) runs through :func:`keep_running`: whatever one turn raises is logged
with its traceback and the loop's name, the loop's :class:`Condition` turns false with the
error, and the next turn comes after :class:`~fuzzball_core.backoff.Backoff`'s delay. A turn
that passes makes the condition true again, so a database that was locked or a disk that was
full shows as a failing condition for as long as it lasts, and never ends the loop.

A process serves its conditions (:func:`health_routes`): ``GET /healthz`` answers 200 while
the process is alive enough to answer at all, ``GET /readyz`` answers 200 when every
*required* condition holds and 503 otherwise; both without a token, both a JSON body listing
the conditions. Probes (:meth:`Health.probe`) are checked afresh on every ``/readyz``
(Orchestrate's store: a ``SELECT 1``), in a worker thread, within :data:`PROBE_TIMEOUT`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from fuzzball_core.backoff import Backoff

log = logging.getLogger(__name__)

#: Seconds a readiness probe may take before it counts as failed.
PROBE_TIMEOUT = 5.0
#: The paths every process serves its health on.
HEALTH_PATHS = ("/healthz", "/readyz")


@dataclass
class Condition:
    """One thing a process needs: whether it holds now, why not, and since when."""

    name: str
    ok: bool = False
    message: str = "not checked yet"
    #: wall-clock time of the last change between holding and not holding
    since: float = field(default_factory=time.time)
    #: failed turns (or probes) in a row; 0 while it holds
    failures: int = 0
    #: whether ``/readyz`` needs it (informational conditions are listed but not needed)
    required: bool = True

    def as_json(self) -> dict[str, Any]:
        """The condition as ``/readyz`` lists it."""
        return {
            "name": self.name,
            "ok": self.ok,
            "message": self.message,
            "since": self.since,
            "failures": self.failures,
            "required": self.required,
        }


class Health:
    """The conditions of one process, set by its loops and checked by its probes."""

    def __init__(self, process: str) -> None:
        self.process = process
        self._conditions: dict[str, Condition] = {}
        self._probes: dict[str, Callable[[], str]] = {}

    def declare(
        self, name: str, message: str = "not checked yet", *, required: bool = True
    ) -> None:
        """Add a condition that does not hold yet (a loop that has not passed once)."""
        self._conditions[name] = Condition(name, message=message, required=required)

    def probe(self, name: str, check: Callable[[], str]) -> None:
        """Add a condition checked on every ``/readyz``: ``check()`` returns what holds, or
        raises saying what does not."""
        self._probes[name] = check
        self.declare(name)

    def passed(self, name: str, message: str = "ok") -> None:
        """``name`` holds."""
        condition = self._condition(name)
        if not condition.ok:
            condition.since = time.time()
        condition.ok, condition.message, condition.failures = True, message, 0

    def failed(self, name: str, message: str) -> None:
        """``name`` does not hold, because of ``message``."""
        condition = self._condition(name)
        if condition.ok:
            condition.since = time.time()
        condition.ok, condition.message = False, message
        condition.failures += 1

    def remove(self, name: str) -> None:
        """Forget a condition (a member that left the configuration)."""
        self._conditions.pop(name, None)
        self._probes.pop(name, None)

    def get(self, name: str) -> Condition:
        """The condition ``name`` (KeyError when it was never declared)."""
        return self._conditions[name]

    def conditions(self) -> list[Condition]:
        """Every condition, in the order they were declared."""
        return list(self._conditions.values())

    def ready(self) -> bool:
        """Whether every required condition holds."""
        return all(c.ok for c in self._conditions.values() if c.required)

    def report(self) -> dict[str, Any]:
        """The JSON body of ``/healthz`` and ``/readyz``."""
        return {
            "process": self.process,
            "ready": self.ready(),
            "conditions": [c.as_json() for c in self.conditions()],
        }

    async def check_probes(self) -> None:
        """Run every probe once (in worker threads, each within :data:`PROBE_TIMEOUT`)."""

        async def run(name: str, check: Callable[[], str]) -> None:
            try:
                said = await asyncio.wait_for(asyncio.to_thread(check), PROBE_TIMEOUT)
            except TimeoutError:
                self.failed(name, f"no answer within {PROBE_TIMEOUT:g}s")
            except Exception as exc:
                self.failed(name, describe(exc))
            else:
                self.passed(name, said or "ok")

        await asyncio.gather(*(run(name, check) for name, check in self._probes.items()))

    def _condition(self, name: str) -> Condition:
        condition = self._conditions.get(name)
        if condition is None:
            condition = self._conditions[name] = Condition(name)
        return condition


def describe(error: BaseException) -> str:
    """A one-line account of ``error`` for a condition's message and the log."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


async def keep_running(
    name: str,
    turn: Callable[[], Awaitable[None]],
    *,
    health: Health,
    retry: Backoff,
    logger: logging.Logger = log,
    on_failure: Callable[[BaseException], None] | None = None,
) -> None:
    """Call ``turn()`` again and again until cancelled; no exception ends the loop.

    ``turn`` does one pass and any waiting between passes. A pass that raises is logged with
    its traceback under ``name``, fails the condition ``name`` of ``health`` (declared here
    when it was not), is handed to ``on_failure`` (counting, undoing), and the next pass
    comes after the next delay of ``retry``; a pass that returns makes the condition hold
    and starts the delays over.
    """
    if name not in {c.name for c in health.conditions()}:
        health.declare(name, "no pass yet")
    delays: Iterator[float] | None = None
    while True:
        try:
            await turn()
        except Exception as exc:
            if on_failure is not None:
                on_failure(exc)
            failures = health.get(name).failures + 1
            logger.exception("%s failed (%d in a row); retrying", name, failures)
            health.failed(name, describe(exc))
            if delays is None:
                delays = retry.delays()
            # an endless schedule never runs out; a bounded one repeats its longest delay
            delay = next(delays, None)
            if delay is None:
                delays = None
                delay = retry.maximum
            await asyncio.sleep(delay)
        else:
            health.passed(name)
            delays = None


class HealthRoutes:
    """``GET /healthz`` and ``GET /readyz`` over one process's :class:`Health` (methods, so
    that the layers above can declare them in their OpenAPI documents)."""

    def __init__(self, health: Health) -> None:
        self.health = health

    async def healthz(self, _request: web.Request) -> web.Response:
        """Alive: the event loop answers; the conditions are listed for whoever looks."""
        return web.json_response({**self.health.report(), "alive": True})

    async def readyz(self, _request: web.Request) -> web.Response:
        """200 when every required condition holds (probes checked afresh), 503 otherwise."""
        await self.health.check_probes()
        body = self.health.report()
        return web.json_response(body, status=200 if body["ready"] else 503)

    def add(self, app: web.Application) -> None:
        """Add both routes to ``app``."""
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)


def health_routes(health: Health) -> Callable[[web.Application], None]:
    """A function adding ``/healthz`` and ``/readyz`` over ``health`` to an aiohttp app.

    The caller must let :data:`HEALTH_PATHS` through without a token (an orchestrator's
    liveness probe has none).
    """
    return HealthRoutes(health).add
