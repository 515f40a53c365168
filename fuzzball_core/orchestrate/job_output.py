"""Storing what jobs print, within ``orchestrate.logs``' limits.

Each run of a job may keep ``max-bytes-per-job`` of output, and all the runs of a workflow
together ``max-bytes-per-workflow``. Output past either limit is counted, not stored: the
run's log gets one line where it was cut, naming the limit, and that line is rewritten with
the bytes and lines dropped since as more output arrives, so a read after the job ended
shows the final count. The counts live in ``log_usage`` (one row per run, one per workflow
with ``run_id`` 0) and change in the engine's transaction together with the chunks, so a
failed pass takes back both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Protocol, cast

from sqlalchemy import Table, insert, select

from fuzzball_core.config import LogsConfig
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.store.models import LogChunk, LogUsage

#: ``log_usage.run_id`` of a workflow's total.
WORKFLOW_TOTAL = 0

#: The settings that cut output, as the marker line names them.
PER_JOB = "orchestrate.logs.max-bytes-per-job"
PER_WORKFLOW = "orchestrate.logs.max-bytes-per-workflow"

#: Where a transaction's session keeps the usage rows it loaded or made (``Session.info``):
#: rows made in this pass are not in the identity map until a flush, so ``get`` cannot find
#: them, and this also holds every row strongly for the pass.
_CACHE = "fuzzball.log_usage"
#: The log tables, for the Core INSERTs of a pass's chunks and new usage rows.
_CHUNKS = cast(Table, LogChunk.__table__)
_USAGE = cast(Table, LogUsage.__table__)


class Printer(NamedTuple):
    """The run whose output is stored, as its chunks name it: from its row, or from what the
    engine knows of a live run (a live task's output is stored without reading its row)."""

    workflow_id: str
    run_id: int
    task_id: int | None
    stage_name: str


class Usage(Protocol):
    """A usage row as :func:`store` reads and changes it: a :class:`LogUsage` row read from
    the store, or one made in this pass (:class:`_NewUsage`)."""

    workflow_id: str
    run_id: int
    stored_bytes: int
    dropped_bytes: int
    dropped_lines: int
    mid_line: bool
    cut_by: str
    marker_seq: int | None


class _NewUsage:
    """A usage row first made in this pass, inserted as the transaction commits with the
    values it has then: its ``__dict__`` is the row :meth:`Transaction.insert_at_commit`
    holds. An ORM row made and flushed for each run's first output cost more than storing
    the output (hollow nodes' one line a task)."""

    def __init__(self, workflow_id: str, run_id: int) -> None:
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.stored_bytes = 0
        self.dropped_bytes = 0
        self.dropped_lines = 0
        self.mid_line = False
        self.cut_by = ""
        self.marker_seq: int | None = None


def preload(tx: Transaction, runs: Iterable[tuple[str, int]]) -> None:
    """Load the usage rows of these runs (workflow id, run id) and of their workflows in one
    query, those the pass has not read or made yet."""
    cache = _cache(tx)
    wanted = set(runs)
    wanted |= {(workflow_id, WORKFLOW_TOTAL) for workflow_id, _ in wanted}
    wanted -= cache.keys()
    if not wanted:
        return
    query = select(LogUsage).where(
        LogUsage.workflow_id.in_({w for w, _ in wanted}),
        LogUsage.run_id.in_({r for _, r in wanted}),
    )
    # past the waiting writes: the usage rows written in this pass are the cache's, not
    # read again, and no run write changes a usage row
    for row in tx.read_past_writes(query).scalars():
        cache[(row.workflow_id, row.run_id)] = row
    for key in wanted:
        # known to have no row yet: the first output makes one without asking again
        cache.setdefault(key, None)


def store(tx: Transaction, limits: LogsConfig, run: Printer, stream: str, data: bytes) -> None:
    """Store ``data``, which ``run`` printed on ``stream``, as far as the limits allow."""
    if not data:
        return
    job = _usage(tx, run.workflow_id, run.run_id)
    workflow = _usage(tx, run.workflow_id, WORKFLOW_TOTAL)
    marker: LogChunk | None
    if job.marker_seq is None:
        room_for_job = limits.max_bytes_per_job - job.stored_bytes
        room_for_workflow = limits.max_bytes_per_workflow - workflow.stored_bytes
        room = max(0, min(room_for_job, room_for_workflow))
        kept = data if len(data) <= room else _cut(data, room)
        if kept:
            _add_chunk(tx, run, stream, kept.decode("utf-8", errors="replace"))
            job.stored_bytes += len(kept)
            workflow.stored_bytes += len(kept)
            job.mid_line = not kept.endswith(b"\n")
        if len(kept) == len(data):
            return
        job.cut_by = PER_JOB if room_for_job <= room_for_workflow else PER_WORKFLOW
        # the marker starts on a line of its own
        marker = _add_marker(tx, run, stream, "\n" if job.mid_line else "")
        job.marker_seq = marker.seq
        data = data[len(kept) :]
    else:
        # once cut, a run's log stays cut: what follows the marker is only counted
        marker = tx.session.get(LogChunk, job.marker_seq)
    _count_dropped(job, workflow, data)
    if marker is not None:
        opening = "\n" if marker.data.startswith("\n") else ""
        marker.data = opening + marker_text(job, limits)


def marker_text(usage: Usage, limits: LogsConfig) -> str:
    """The line that stands where a run's output was cut."""
    limit = limits.max_bytes_per_job if usage.cut_by == PER_JOB else limits.max_bytes_per_workflow
    lines = "line" if usage.dropped_lines == 1 else "lines"
    return (
        f"[fuzzball] output cut here: {usage.cut_by} ({limit} bytes) reached;"
        f" {usage.dropped_bytes} bytes ({usage.dropped_lines} {lines}) more were counted,"
        " not stored\n"
    )


def _cut(data: bytes, room: int) -> bytes:
    """What fits in ``room`` bytes: up to the last whole line that fits, or ``room`` bytes
    when not even one line does."""
    head = data[:room]
    end = head.rfind(b"\n")
    return head[: end + 1] if end >= 0 else head


def _count_dropped(job: Usage, workflow: Usage, dropped: bytes) -> None:
    """Count ``dropped`` as the run's and the workflow's."""
    # a line is counted where it starts: at the first dropped byte unless a line was left
    # open before it, and after every newline that is not the last byte
    starts = dropped[:-1].count(b"\n") + (0 if job.mid_line else 1)
    job.dropped_bytes += len(dropped)
    job.dropped_lines += starts
    job.mid_line = not dropped.endswith(b"\n")
    workflow.dropped_bytes += len(dropped)
    workflow.dropped_lines += starts


def _chunk(tx: Transaction, run: Printer, stream: str, text: str) -> dict[str, object]:
    return {
        "time": tx.now,
        "workflow_id": run.workflow_id,
        "stage_name": run.stage_name,
        "task_id": run.task_id,
        "stream": stream,
        "data": text,
    }


def _add_chunk(tx: Transaction, run: Printer, stream: str, text: str) -> None:
    """Store a chunk with the pass's others, in one INSERT as the transaction commits."""
    tx.insert_at_commit(_CHUNKS, _chunk(tx, run, stream, text))


def _add_marker(tx: Transaction, run: Printer, stream: str, text: str) -> LogChunk:
    """Store a cut run's marker now, as a row the pass can rewrite, after the chunks the
    pass stored before it (a workflow's log is read in the order of its chunks' seq)."""
    waiting = tx.inserts.pop(_CHUNKS, None)
    if waiting:
        tx.session.connection().execute(insert(_CHUNKS), waiting)
    marker = LogChunk(**_chunk(tx, run, stream, text))
    tx.session.add(marker)
    tx.session.flush()  # its seq, to rewrite it as more is dropped
    return marker


def _usage(tx: Transaction, workflow_id: str, run_id: int) -> Usage:
    cache = _cache(tx)
    key = (workflow_id, run_id)
    row = cache.get(key)
    if row is None:
        row = tx.session.get(LogUsage, key) if key not in cache else None
        if row is None:
            row = _NewUsage(workflow_id, run_id)
            tx.insert_at_commit(_USAGE, row.__dict__)
        cache[key] = row
    return row


def _cache(tx: Transaction) -> dict[tuple[str, int], Usage | None]:
    """The usage rows the pass loaded or made by (workflow, run); None for a key
    :func:`preload` found no row for."""
    cache: dict[tuple[str, int], Usage | None] = tx.session.info.setdefault(_CACHE, {})
    return cache
