"""Reading and following a workflow's output, shared by the gRPC and REST transports.

The service answers plain reads with ``after_seq``; following is polling until the workflow
is terminal. The status is read *before* each read of new output, so once a terminal status
has been seen, the read that follows it holds everything the workflow ever wrote.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from fuzzball_core.errors import NotFound
from fuzzball_core.service.contract import OrchestrateService
from fuzzball_core.service.views import LogChunkView, Principal
from fuzzball_core.vocabulary import TERMINAL_STATUSES

#: Seconds between two polls of a followed workflow.
POLL_INTERVAL = 0.2

_STAGE_PREFIXES = ("jobs.", "services.", "images.", "volumes.")


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


def read_logs(
    service: OrchestrateService,
    who: Principal,
    workflow_id: str,
    *,
    stage_name: str | None,
    task_id: int | None,
    after_seq: int = 0,
    tail: int | None = None,
) -> list[LogChunkView]:
    """The output recorded so far (only the last ``tail`` chunks when given)."""
    chunks = service.read_logs(
        who, workflow_id, stage_name=stage_name, task_id=task_id, after_seq=after_seq
    )
    if tail is not None and tail >= 0:
        chunks = chunks[len(chunks) - tail :] if tail else []
    return chunks


async def follow_logs(
    service: OrchestrateService,
    who: Principal,
    workflow_id: str,
    *,
    stage_name: str | None,
    task_id: int | None,
    tail: int | None = None,
    poll_interval: float = POLL_INTERVAL,
) -> AsyncIterator[LogChunkView]:
    """Yield the output so far, then new output as it arrives, until the workflow ends."""
    after_seq = 0
    first = True
    while True:
        terminal = service.get_workflow(who, workflow_id).status in TERMINAL_STATUSES
        chunks = service.read_logs(
            who, workflow_id, stage_name=stage_name, task_id=task_id, after_seq=after_seq
        )
        if first and tail is not None and tail >= 0:
            after_seq = chunks[-1].seq if chunks else 0
            chunks = chunks[len(chunks) - tail :] if tail else []
        first = False
        for chunk in chunks:
            after_seq = max(after_seq, chunk.seq)
            yield chunk
        if terminal:
            return
        await asyncio.sleep(poll_interval)
