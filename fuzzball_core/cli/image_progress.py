"""Image stages' progress in the CLI, read from a workflow's events.

Orchestrate records what a node reports while it pulls, converts or writes back an image as
``image_progress`` events (``{"step", "done", "total"}``) and the write-back's turns as
``image_write_back_*`` / ``image_written_back`` events. On a terminal each stage's step
becomes a rich progress bar; anywhere else (a pipe, a file, tests) each event is one plain
line, its message.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TextIO

import click
from google.protobuf import json_format
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TransferSpeedColumn,
)

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.spec.names import printable
from fuzzball_core.vocabulary import IMAGE_EVENT_KINDS, EventKind

IMAGE_STAGE_PREFIX = "images."


def is_image_event(event: pb.WorkflowEvent) -> bool:
    """Whether ``event`` reports an image stage's progress."""
    return event.kind in IMAGE_EVENT_KINDS


class ImageProgress:
    """Shows image events as they come: bars on a terminal, lines otherwise.

    Use as a context manager; :meth:`echo` prints a line above the bars (plain lines go to
    the same stream), so status lines and progress never garble each other.
    """

    def __init__(self, *, err: bool = False, terminal: bool | None = None) -> None:
        self.err = err
        stream: TextIO = sys.stderr if err else sys.stdout
        self.terminal = stream.isatty() if terminal is None else terminal
        self._bars: Progress | None = None
        self._tasks: dict[tuple[str, str], TaskID] = {}
        self._last_line: str | None = None
        if self.terminal:
            self._bars = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=Console(file=stream),
                transient=False,
            )

    def __enter__(self) -> ImageProgress:
        if self._bars is not None:
            self._bars.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._bars is not None:
            self._bars.stop()

    def echo(self, text: str) -> None:
        """Print ``text`` as its own line, escaped (it holds a server's words)."""
        text = printable(text)
        if self._bars is not None:
            self._bars.console.print(text, markup=False, highlight=False)
        else:
            click.echo(text, err=self.err)

    def bars(self) -> dict[tuple[str, str], tuple[float, float | None]]:
        """Each bar shown so far, by (stage, step): how much of how much is done."""
        if self._bars is None:
            return {}
        return {
            key: (self._bars.tasks[task].completed, self._bars.tasks[task].total)
            for key, task in self._tasks.items()
        }

    def feed(self, events: Iterable[pb.WorkflowEvent]) -> None:
        """Show every image event of ``events`` (others are ignored)."""
        for event in events:
            if is_image_event(event):
                self._show(event)

    def _show(self, event: pb.WorkflowEvent) -> None:
        if self._bars is None:
            line = event.message
            if line != self._last_line:  # a throttled step may repeat its last report
                self._last_line = line
                click.echo(printable(line), err=self.err)
            return
        data = json_format.MessageToDict(event.data)
        stage = event.stage_name
        if event.kind != EventKind.IMAGE_PROGRESS or "step" not in data:
            self.echo(event.message)
            return
        step = str(data["step"])
        done, total = int(data.get("done", 0)), int(data.get("total", 0))
        if step == "done":
            for (owner, _), task in self._tasks.items():
                if owner == stage:
                    bar = self._bars.tasks[task]
                    self._bars.update(task, completed=bar.total or bar.completed)
            return
        key = (stage, step)
        if key not in self._tasks:
            label = step if len(step) <= 30 else step[:30] + "…"
            self._tasks[key] = self._bars.add_task(f"{stage} {label}", total=total or None)
        self._bars.update(self._tasks[key], completed=done, total=total or None)
