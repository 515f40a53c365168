"""Progress of an image stage's run, reported to Orchestrate on the run's ``progress`` stream.

Each report is one JSON document: ``{"step", "done", "total"}`` while bytes move (at most a
few per second per step), or a write-back's ``status`` note, which always goes out.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from fuzzball_core.substrate.drivers.base import LogSink

#: the stream image progress goes out on
PROGRESS_STREAM = "progress"
#: Seconds between two progress reports of one image step.
PROGRESS_INTERVAL = 0.5
#: the report of an image that is ready (as the backends' last step says it)
DONE = {"step": "done", "done": 1, "total": 1}


class ImageProgress:
    """Reports one run's image steps through the log sink, from any thread."""

    def __init__(self, run_id: int, sink: LogSink, loop: asyncio.AbstractEventLoop) -> None:
        self._run_id = run_id
        self._sink = sink
        self._loop = loop
        self._sent: dict[str, float] = {}

    def step(self, step: str, done: int, total: int) -> None:
        """Report a step's progress, throttled until it is complete."""
        now = time.monotonic()
        last = self._sent.get(step)
        if done < total and last is not None and now - last < PROGRESS_INTERVAL:
            return
        self._sent[step] = now
        self._send({"step": step, "done": done, "total": total})

    def document(self, document: dict[str, Any]) -> None:
        """Report a progress document as is: throttled while bytes move, always otherwise."""
        if "status" in document:
            self._send(document)
        else:
            self.step(str(document["step"]), int(document["done"]), int(document["total"]))

    def done_on_loop(self) -> None:
        """Report the image ready, from the event loop's own thread: handed to the sink at
        once, so that it goes out with whatever the loop sends on this turn."""
        self._sink(self._run_id, PROGRESS_STREAM, json.dumps(DONE).encode())

    def _send(self, document: dict[str, Any]) -> None:
        data = json.dumps(document).encode()
        self._loop.call_soon_threadsafe(self._sink, self._run_id, PROGRESS_STREAM, data)
