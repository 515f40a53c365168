"""Progress of a run's volume transfers, reported to Orchestrate on the run's ``progress``
stream (as image steps are), where each report becomes a ``volume_transfer`` event.

Each report is one JSON document naming the transfer by its field
(``volumes.data.ingress[0]``) and its URL as errors may show it (no credentials, no query):
``{"transfer", "url", "done", "total"}`` while bytes move (at most two a second per transfer;
``total`` is null when the source does not say), and the same with ``seconds`` once it ended.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

#: a run's log sink, ``sink(run_id, stream, data)`` (``drivers.base.LogSink``; not imported
#: from there: the drivers import the ingress that reports here)
LogSink = Callable[[int, str, bytes], None]

#: the stream transfer progress goes out on (shared with image progress)
PROGRESS_STREAM = "progress"
#: Seconds between two progress reports of one transfer.
PROGRESS_INTERVAL = 0.5


class TransferReporter(Protocol):
    """Where a node's transfers report their progress."""

    def moving(self, transfer: str, url: str, done: int, total: int | None) -> None:
        """Bytes moved so far (called often, from any thread)."""

    def ended(self, transfer: str, url: str, done: int, seconds: float) -> None:
        """The transfer ended: ``done`` bytes in ``seconds``."""


class SinkProgress:
    """Reports one run's transfers through its log sink, from any thread."""

    def __init__(self, run_id: int, sink: LogSink, loop: asyncio.AbstractEventLoop) -> None:
        self._run_id = run_id
        self._sink = sink
        self._loop = loop
        self._sent: dict[str, float] = {}
        self._lock = threading.Lock()

    def moving(self, transfer: str, url: str, done: int, total: int | None) -> None:
        """Report bytes moved, throttled to :data:`PROGRESS_INTERVAL` per transfer."""
        now = time.monotonic()
        with self._lock:
            last = self._sent.get(transfer)
            if last is not None and now - last < PROGRESS_INTERVAL:
                return
            self._sent[transfer] = now
        self._send({"transfer": transfer, "url": url, "done": done, "total": total})

    def ended(self, transfer: str, url: str, done: int, seconds: float) -> None:
        """Report the transfer's end (never throttled)."""
        document = {"transfer": transfer, "url": url, "done": done, "total": done}
        self._send({**document, "seconds": round(seconds, 3)})

    def _send(self, document: dict[str, Any]) -> None:
        data = json.dumps(document).encode()
        self._loop.call_soon_threadsafe(self._sink, self._run_id, PROGRESS_STREAM, data)
