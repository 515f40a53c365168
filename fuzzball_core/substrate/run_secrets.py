"""Asking Orchestrate for a run's secrets as the run starts (``NodeAgent.RunSecrets``).

The Assignment carries only ``secret://`` references; their values (the job's env, the
image's registry credentials) and the workflow's own token come from this call, made when
the run starts, and live only in the starting driver's memory and the container's
environment: never in the node's state, logs or reports.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import grpc

from fuzzball_core.api.v1 import node_pb2, node_pb2_grpc
from fuzzball_core.errors import FuzzballError, Unavailable
from fuzzball_core.substrate.s3_transfer import S3Credentials

#: the job's environment variable carrying its workflow's token
WORKFLOW_TOKEN_ENV = "FB_WORKFLOW_TOKEN"


@dataclass(frozen=True)
class RunSecrets:
    """A run's resolved secrets."""

    #: env NAME -> value, for each entry of the job's env that is a secret reference
    env: dict[str, str] = field(default_factory=dict)
    #: the image.secret's credentials: username, password and/or token
    image_credentials: dict[str, str] = field(default_factory=dict)
    workflow_token: str = ""
    #: the Authorization header of each volume ingress source with a secret, by
    #: ``VOLUME/INDEX``
    ingress_authorization: dict[str, str] = field(default_factory=dict)
    #: the s3 secret of each volume transfer from or to ``s3://``, by ``VOLUME/INDEX``
    #: (ingress) or ``VOLUME/egress/INDEX``
    transfer_s3: dict[str, S3Credentials] = field(default_factory=dict, repr=False)

    @property
    def token_only(self) -> bool:
        """Whether these carry the workflow's token (the same for all its runs) and nothing
        else."""
        extra = self.env or self.image_credentials or self.ingress_authorization
        return bool(self.workflow_token) and not extra and not self.transfer_s3

    def environment(self) -> dict[str, str]:
        """What the container's environment gets: the resolved entries and the token."""
        env = dict(self.env)
        if self.workflow_token:
            env[WORKFLOW_TOKEN_ENV] = self.workflow_token
        return env


#: fetches run ``run_id``'s secrets (raising a FuzzballError that names the field)
FetchRunSecrets = Callable[[int], Awaitable[RunSecrets]]


class WorkflowTokens:
    """The token of each workflow with runs on this node, asked for once per workflow.

    A run that references no secret gets nothing from ``RunSecrets`` but its workflow's
    token, which Orchestrate keeps one of per workflow: the runs of a task array share one
    answer instead of one round trip each (runs that start together wait on the same call).
    A failed call, or an answer without a token, is not kept; a workflow's token is dropped
    once the node knows no run of it (:meth:`keep_only`), so it lives no longer than the
    runs it was fetched for. Only job and service runs share it (an image or egress stage's
    run is answered without a token).
    """

    def __init__(self) -> None:
        self._asked: dict[str, asyncio.Future[RunSecrets]] = {}

    async def get(self, workflow_id: str, fetch: Callable[[], Awaitable[RunSecrets]]) -> RunSecrets:
        """The workflow's token (as :class:`RunSecrets`), ``fetch()`` called by its first run."""
        asked = self._asked.get(workflow_id)
        if asked is None:
            asked = self._asked[workflow_id] = asyncio.ensure_future(fetch())
            asked.add_done_callback(lambda done: self._settle(workflow_id, done))
        return RunSecrets(workflow_token=(await asyncio.shield(asked)).workflow_token)

    def _settle(self, workflow_id: str, done: asyncio.Future[RunSecrets]) -> None:
        # an error, or an answer carrying more than the token, is never handed to another run
        kept = not done.cancelled() and done.exception() is None and done.result().token_only
        if not kept and self._asked.get(workflow_id) is done:
            del self._asked[workflow_id]

    def keep_only(self, workflow_ids: Collection[str]) -> None:
        """Forget the tokens of workflows not in ``workflow_ids`` (none of their runs is
        known here any more)."""
        for workflow_id in [w for w in self._asked if w not in workflow_ids]:
            del self._asked[workflow_id]


class RunSecretsClient:
    """Calls ``RunSecrets`` on Orchestrate's node API with the node token, naming this node
    (Orchestrate answers about the runs placed on it only)."""

    def __init__(
        self,
        stub: node_pb2_grpc.NodeAgentStub,
        metadata: Sequence[tuple[str, str]],
        node_id: Callable[[], str],
    ) -> None:
        self.stub = stub
        self.metadata = tuple(metadata)
        #: this node's id as its last Register answered it
        self.node_id = node_id

    async def fetch(self, run_id: int) -> RunSecrets:
        """Run ``run_id``'s secrets; Orchestrate's refusal as its FuzzballError."""
        try:
            reply = await self.stub.RunSecrets(
                node_pb2.RunSecretsRequest(run_id=run_id, node_id=self.node_id()),
                metadata=self.metadata,
                timeout=60.0,
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise Unavailable(
                    f"Orchestrate could not be asked for the run's secrets: {exc.details()}"
                ) from None
            status = {"code": exc.code().value[0], "message": exc.details() or ""}
            raise FuzzballError.from_status(status) from None
        return RunSecrets(
            dict(reply.env),
            dict(reply.image_credentials),
            reply.workflow_token,
            dict(reply.ingress_authorization),
            {
                key: S3Credentials(
                    access_key_id=found.access_key_id,
                    secret_access_key=found.secret_access_key,
                    region=found.region,
                    endpoint=found.endpoint,
                    session_token=found.session_token,
                )
                for key, found in reply.transfer_s3.items()
            },
        )


def references_secrets(
    env: Sequence[str] | None,
    image_secret: str | None,
    ingress: Mapping[str, Sequence[Mapping[str, str]]] | None = None,
) -> bool:
    """Whether a job needs its secrets to start: an env value, its image's secret or a
    volume ingress source's secret is a ``secret://`` reference."""
    if image_secret:
        return True
    if any(t.get("secret") for transfers in (ingress or {}).values() for t in transfers):
        return True
    return any(str(entry).partition("=")[2].startswith("secret://") for entry in env or ())
