"""The bundled node_exporter: Debian's ``prometheus-node-exporter``, started and supervised by
Substrate on port 9100 (``FuzzballConfig.node_exporter_listen``), so every node serves the
machine's own metrics (load, CPU, disks, memory: the Node Resources dashboard's lsload
indices) beside Substrate's ``fuzzball_node_*``.

Supervision is :func:`~fuzzball_core.health.keep_running`'s: an exporter that exits is logged
and started again after the backoff's delay, and the ``node_exporter`` condition (listed in
``/readyz``, not required) says whether it runs. A node without the binary runs none and says
so once.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import shutil
import signal

from fuzzball_core.backoff import Backoff
from fuzzball_core.health import Health, keep_running

log = logging.getLogger("fuzzball.substrate.node_exporter")

#: Debian's binary names it ``prometheus-node-exporter``; upstream's ``node_exporter``
BINARIES = ("prometheus-node-exporter", "node_exporter")
CONDITION = "node_exporter"
#: delays between restarts of an exporter that keeps exiting
RESTART = Backoff(initial=1.0, factor=2.0, maximum=60.0)


#: prctl's option: the signal a child gets when the thread that started it dies
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: end with Substrate, even when Substrate is SIGKILLed, so no
    exporter outlives its agent (and keeps its port)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def find_binary() -> str | None:
    """The node_exporter on ``PATH``, or None."""
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return None


class NodeExporter:
    """One supervised node_exporter listening on ``listen`` (``""``: none)."""

    def __init__(self, listen: str, health: Health, binary: str | None = None) -> None:
        self.listen = listen
        self.health = health
        self.binary = binary if binary is not None else find_binary()
        self.process: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> bool:
        """Start supervising; False (logged) when there is nothing to run."""
        if not self.listen:
            return False
        if self.binary is None:
            log.warning(
                "no node_exporter on this node (install Debian's prometheus-node-exporter):"
                " only fuzzball_node_* metrics are served"
            )
            return False
        self.health.declare(CONDITION, "not started yet", required=False)
        self._task = asyncio.create_task(
            keep_running(CONDITION, self._run_once, health=self.health, retry=RESTART, logger=log)
        )
        return True

    def _arguments(self) -> list[str]:
        assert self.binary is not None
        return [
            self.binary,
            f"--web.listen-address={self.listen}",
            # the lsload indices' login sessions (ls); systemd-less nodes simply report none
            "--collector.logind",
        ]

    async def _run_once(self) -> None:
        """Run the exporter until it exits; raise so that the loop restarts it."""
        self.process = await asyncio.create_subprocess_exec(
            *self._arguments(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        self.health.passed(CONDITION, f"node_exporter (pid {self.process.pid}) on {self.listen}")
        _, errors = await self.process.communicate()
        last = errors.decode(errors="replace").strip().splitlines()[-1:] if errors else []
        raise RuntimeError(
            f"node_exporter on {self.listen} exited with {self.process.returncode}"
            + (f": {last[0]}" if last else "")
        )

    async def stop(self) -> None:
        """Stop supervising and the exporter with it."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        process = self.process
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 5)
            except TimeoutError:
                process.kill()
                await process.wait()
