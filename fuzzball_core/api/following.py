"""Reading and following a workflow's output, shared by the gRPC and REST transports.

The service answers one page at a time (``after_seq``, ``limit``, ``tail``); a read of any
length goes on page by page from the last chunk's seq until an empty page. A client that
pages itself gets a page token: the seq of the last chunk it was sent, as text, which it
passes back unchanged. Following is reading every page there is, then polling until the
workflow is terminal. The status is read *before* each round of reads of new output, so once
a terminal status has been seen, the reads that follow it hold everything the workflow ever
wrote.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from fuzzball_core.errors import InvalidArgument, NotFound
from fuzzball_core.service.contract import LOG_PAGE, OrchestrateService
from fuzzball_core.service.views import LogChunkView, Principal
from fuzzball_core.vocabulary import TERMINAL_STATUSES

#: Seconds between two polls of a followed workflow.
POLL_INTERVAL = 0.2

#: The REST reply header of a log page that is not the last: the token of the next page.
NEXT_PAGE_TOKEN = "Next-Page-Token"

#: The largest seq a page token may carry (seqs are 64-bit integers in every store).
_MAX_SEQ = 2**63 - 1

_STAGE_PREFIXES = ("jobs.", "services.", "images.", "volumes.")


@dataclass(frozen=True)
class LogQuery:
    """Which output a read is about: the workflow's, or one stage's, or one task's."""

    workflow_id: str
    stage_name: str | None = None
    task_id: int | None = None


@dataclass(frozen=True)
class LogPage:
    """One page of a log and the token of the next (empty when the log ends here)."""

    chunks: list[LogChunkView]
    next_page_token: str = ""


def resolve_stage_name(
    service: OrchestrateService, who: Principal, workflow_id: str, name: str | None
) -> str | None:
    """The stored stage name for ``name`` (``hello`` finds ``jobs.hello``); ``None`` for all.

    ``NotFound`` names the workflow and the stage when the workflow has no such stage.
    """
    if not name:
        return None
    stages = {s.name for s in service.get_workflow(who, workflow_id).stages}
    candidates = [name] if name.startswith(_STAGE_PREFIXES) else []
    candidates += [prefix + name for prefix in _STAGE_PREFIXES]
    for candidate in candidates:
        if candidate in stages:
            return candidate
    raise NotFound(f"name: workflow {workflow_id!r} has no job or service named {name!r}")


def page_token(after_seq: int) -> str:
    """The token of the page that follows the chunk ``after_seq`` (none for the first)."""
    return str(after_seq) if after_seq > 0 else ""


def page_token_seq(token: str, field: str) -> int:
    """The seq a page token carries (0 for no token); ``InvalidArgument`` naming ``field``
    for anything this server did not hand out."""
    if not token:
        return 0
    if not token.isascii() or not token.isdigit() or int(token) > _MAX_SEQ:
        raise InvalidArgument(f"{field}: not a page token this server handed out: {token!r:.40}")
    return int(token)


def page_size(requested: int, field: str) -> int:
    """The chunks a page holds: what was asked for, at most :data:`LOG_PAGE`; 0 means the
    most. ``InvalidArgument`` naming ``field`` when negative."""
    if requested < 0:
        raise InvalidArgument(f"{field}: must not be negative, got {requested}")
    return min(requested, LOG_PAGE) or LOG_PAGE


def read_page(
    service: OrchestrateService,
    who: Principal,
    query: LogQuery,
    *,
    after_seq: int = 0,
    size: int = LOG_PAGE,
    tail: int | None = None,
) -> LogPage:
    """One page of output after ``after_seq`` (the last ``tail`` chunks' first page when
    given), with the token of the next page when there is more."""
    chunks = _service_page(service, who, query, after_seq, size, _tail(tail))
    if not chunks:
        return LogPage([])
    last = chunks[-1].seq
    # a page cut short by its byte budget is no sign of the end: only a look past it tells
    more = bool(_service_page(service, who, query, last, 1, None))
    return LogPage(chunks, page_token(last) if more else "")


def read_all(
    service: OrchestrateService,
    who: Principal,
    query: LogQuery,
    *,
    after_seq: int = 0,
    tail: int | None = None,
) -> Iterator[list[LogChunkView]]:
    """Every page of output after ``after_seq`` (of the last ``tail`` chunks when given),
    read one after another until the end."""
    tail = _tail(tail)
    while chunks := _service_page(service, who, query, after_seq, LOG_PAGE, tail):
        yield chunks
        after_seq, tail = chunks[-1].seq, None


async def follow_logs(
    service: OrchestrateService,
    who: Principal,
    query: LogQuery,
    *,
    after_seq: int = 0,
    tail: int | None = None,
    poll_interval: float = POLL_INTERVAL,
) -> AsyncIterator[LogChunkView]:
    """Yield the output so far (its last ``tail`` chunks when given), then new output as it
    arrives, until the workflow ends."""
    while True:
        terminal = service.get_workflow(who, query.workflow_id).status in TERMINAL_STATUSES
        for chunks in read_all(service, who, query, after_seq=after_seq, tail=tail):
            for chunk in chunks:
                yield chunk
            after_seq = chunks[-1].seq
        tail = None
        if terminal:
            return
        await asyncio.sleep(poll_interval)


def _tail(tail: int | None) -> int | None:
    # a negative tail asks for no tail, as it always has
    return tail if tail is not None and tail >= 0 else None


def _service_page(
    service: OrchestrateService,
    who: Principal,
    query: LogQuery,
    after_seq: int,
    size: int,
    tail: int | None,
) -> list[LogChunkView]:
    return service.read_logs(
        who,
        query.workflow_id,
        stage_name=query.stage_name,
        task_id=query.task_id,
        after_seq=after_seq,
        limit=size,
        tail=tail,
    )
