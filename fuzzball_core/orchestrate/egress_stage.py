"""Volume egress stages (``volumes.NAME.egress``): a volume's files sent out once every job
and service mounting it has ended.

The plan makes one stage per volume with an ``egress`` (kind ``file``), waiting ``on-end``
for each step mounting the volume: a failed or skipped job still has its results sent, as
they are often what is wanted from a failed run. A service's stage ends as soon as the jobs
are done and its container is told to stop, so the stage waits further, here, until no run
of a step mounting the volume is open (:func:`still_writing`): egress never races a service
still writing. A workflow stopped by its user cancels its egress with every other stage:
nothing is sent.

The stage's run is placed like a job mounting the volume (:func:`run_definition`, one
core), so it lands where the volume's data is: a node-local volume's node, or the node the
workflow's jobs used a per-workflow volume nodes do not share on. Its payload
(:func:`payload`, kind ``volume-egress``) names the volume and its transfers; the node
sends them with ``fuzzball_core.substrate.egress.send_egress``, the credentials of each
destination's s3 secret coming from ``RunSecrets`` as ``VOLUME/egress/INDEX``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from sqlalchemy import select

from fuzzball_core.orchestrate.capabilities import VOLUME_FILE_SCHEME
from fuzzball_core.orchestrate.states import OPEN_RUN
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.spec import Plan, StageKind
from fuzzball_core.spec.models import Job, Volume
from fuzzball_core.store.models import Run, Stage

#: the payload kind of an egress stage's run (``job_json``'s ``kind``), as Substrate reads it
EGRESS = "volume-egress"
#: where the egress run's synthetic job mounts its volume (never run: it only places it)
_MOUNT = "/volume"


def run_definition(volume: str) -> Job:
    """The job an egress stage's run stands for when scheduling: one core, mounting
    ``volume``, so that placement keeps it with the volume's data."""
    return Job.model_validate(
        {
            "image": {"uri": "docker://volume-egress"},
            "command": ["true"],
            "mounts": {_MOUNT: {"volume": volume}},
        }
    )


def payload(volume: str, definition: Volume) -> str:
    """The ``job_json`` of volume ``volume``'s egress run: ``{kind, volume, transfers:
    [{source: PATH in the volume, destination, secret?, retries?}]}`` (secrets as references
    only: their values reach the node when the run starts)."""
    transfers = []
    for transfer in definition.egress or ():
        entry: dict[str, str | int] = {
            "source": transfer.source.uri.removeprefix(VOLUME_FILE_SCHEME),
            "destination": transfer.destination.uri,
        }
        if transfer.destination.secret:
            entry["secret"] = transfer.destination.secret
        retry = transfer.policy.retry if transfer.policy is not None else None
        if retry is not None and retry.attempts:
            entry["retries"] = retry.attempts
        transfers.append(entry)
    document = {"kind": EGRESS, "volume": volume, "transfers": transfers}
    return json.dumps(document, separators=(",", ":"))


def volume_of(stage_name: str) -> str:
    """The volume an egress stage (``volumes.NAME.egress``) sends from."""
    return stage_name.removeprefix("volumes.").removesuffix(".egress")


def still_writing(
    tx: Transaction, workflow_id: str, plan: Plan, stage_name: str, stages: Mapping[str, Stage]
) -> bool:
    """Whether a run of a step mounting the egress stage's volume is still open (a service's
    container told to stop and not yet gone): its egress waits for it to end."""
    writers = [
        stages[edge.source].id
        for edge in plan.dependencies_of(stage_name)
        if plan.stages[edge.source].kind in (StageKind.JOB, StageKind.SERVICE)
        and edge.source in stages
    ]
    if not writers:
        return False
    open_run = tx.session.scalar(
        select(Run.id)
        .where(
            Run.workflow_id == workflow_id,
            Run.stage_id.in_(writers),
            Run.status.in_(OPEN_RUN),
        )
        .limit(1)
    )
    return open_run is not None
