"""What a run needs that is never stored with it: its secrets and its workflow's token.

A job's ``env`` may give ``NAME=secret://SCOPE/NAME[/KEY]``, and an image ``secret:
secret://...`` (a private registry's credentials). The workflow's stored definition, its
events and the Assignment a node receives keep the reference only; the node asks for the
values when it starts the run (``NodeAgent.RunSecrets``, with the node token), and they are
resolved then, for the user who submitted the workflow in its account and organization
(:meth:`Secrets.owner_of_workflow`), each read audited as ``secret_read``. Only a live run
(assigned or started) is answered; any other is NotFound.

Each running workflow has one token of its own (credential ``workflow``: it may submit
child workflows and read secrets, never write them), minted when its first run asks, handed
to every job as ``FB_WORKFLOW_TOKEN`` and revoked when the workflow ends
(:meth:`RunSecretsService.workflow_event`; tokens a crash left behind are revoked when
Orchestrate starts again, :meth:`RunSecretsService.revoke_ended`). The token's value is
kept only in memory: after a restart a workflow gets a new one.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import FuzzballError, InvalidArgument, NotFound
from fuzzball_core.orchestrate.states import LIVE_RUN
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.secrets import SecretOwner, Secrets, is_reference, parse_reference
from fuzzball_core.spec import ImagePull, StageKind
from fuzzball_core.spec import Stage as PlannedStage
from fuzzball_core.spec.models import ImageBuild, Volume
from fuzzball_core.store.models import ApiToken, Run, Stage, Workflow
from fuzzball_core.vocabulary import CredentialKind, EventKind, Status

if TYPE_CHECKING:
    from fuzzball_core.orchestrate.engine import Engine

#: a volume transfer end in S3 (its secret is an s3 secret)
S3_SCHEME = "s3://"
#: the job's environment variable carrying its workflow's token
WORKFLOW_TOKEN_ENV = "FB_WORKFLOW_TOKEN"
#: the events after which a workflow's token is revoked
_ENDINGS = frozenset(
    {EventKind.WORKFLOW_FINISHED, EventKind.WORKFLOW_FAILED, EventKind.WORKFLOW_CANCELED}
)
_ENDED = (Status.FINISHED, Status.FAILED, Status.CANCELED)

#: a stage's definition in its workflow's plan (the engine's plans: a Job, Service or
#: ImagePull)
DefinitionOf = Callable[[Workflow, str], Any]
#: a job stage's ``volume_ingress_json`` (the engine's plans)
IngressOf = Callable[[Workflow, str], str]


def registry_host(uri: str) -> str:
    """The registry an image URI is pulled from (``docker://alpine`` is docker.io's)."""
    reference = uri.partition("://")[2] if "://" in uri else uri
    first, _, rest = reference.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def secret_env(env: list[str] | None) -> dict[str, str]:
    """The entries of a job's ``env`` (``NAME=VALUE``) whose value is a secret reference."""
    found = {}
    for entry in env or ():
        name, _, value = str(entry).partition("=")
        if is_reference(value):
            found[name] = value
    return found


def reference_problems(stage: PlannedStage) -> list[tuple[str, str]]:
    """(field, why) for each secret reference of a job, service or volume egress that is
    not one (``secret://SCOPE/NAME[/KEY]``), refused at submission rather than when it
    starts."""
    definition = stage.definition
    problems = []
    if stage.kind is StageKind.FILE:  # a volume's egress: its destinations' s3 secrets
        for index, transfer in enumerate(definition.egress or ()):
            if transfer.destination.secret:
                where = f"{stage.id}[{index}].destination.secret"
                problems.extend(_unreadable(where, str(transfer.destination.secret)))
        return problems
    for index, entry in enumerate(getattr(definition, "env", None) or ()):
        value = str(entry).partition("=")[2]
        if is_reference(value):
            problems.extend(_unreadable(f"{stage.id}.env[{index}]", value))
    image = getattr(definition, "image", None)
    if image is not None and image.secret:
        problems.extend(_unreadable(f"{stage.id}.image.secret", str(image.secret)))
    return problems


def _unreadable(field: str, reference: str) -> list[tuple[str, str]]:
    try:
        parse_reference(reference)
    except FuzzballError as exc:
        return [(field, exc.message)]
    return []


class RunSecretsService:
    """Answers ``RunSecrets`` for the runs of one Orchestrate."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        secrets: Secrets,
        accounts: Accounts,
        definition_of: DefinitionOf,
        ingress_of: IngressOf | None = None,
    ) -> None:
        self.sessions = sessions
        self.secrets = secrets
        self.accounts = accounts
        self.definition_of = definition_of
        self.ingress_of = ingress_of
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()

    @classmethod
    def attach(cls, engine: Engine, accounts: Accounts, secrets: Secrets) -> RunSecretsService:
        """The service for ``engine``'s runs, wired in: workflows' tokens revoked as they end
        (and those a crash left, now), and image pins reading ``image.secret`` for the
        submitter."""
        run_secrets = cls(
            engine.sessions,
            secrets,
            accounts,
            lambda workflow, stage: (
                engine.context.plans.entry(workflow).plan.stages[stage].definition
            ),
            engine.context.plans.ingress,
        )
        previous = engine.context.event_hook

        def hook(event: dict[str, Any]) -> None:
            run_secrets.workflow_event(event)
            if previous is not None:
                previous(event)

        engine.context.event_hook = hook
        engine.images.credentials_for = lambda who, reference, where, uri: secrets.credentials(
            Secrets.owner_of(who), reference, where=where, host=registry_host(uri)
        )
        run_secrets.revoke_ended()
        return run_secrets

    def for_run(self, run_id: int) -> node_pb2.RunSecretsResponse:
        """The secrets run ``run_id`` needs now. NotFound when it is not live; NotFound or
        InvalidArgument naming the field and reference when a secret cannot be read."""
        with self.sessions() as session:
            # the run with its workflow and stage in one query, not three
            found = session.execute(
                select(Run.status, Workflow, Stage)
                .join(Workflow, Workflow.id == Run.workflow_id)
                .join(Stage, Stage.id == Run.stage_id)
                .where(Run.id == run_id)
            ).first()
            if found is None or found[0] not in LIVE_RUN:
                raise NotFound(f"run {run_id} is not running")
            _status, workflow, stage = found
            definition = self.definition_of(workflow, stage.name)
            ingress = self.ingress_of(workflow, stage.name) if self.ingress_of else ""
        # whom references resolve for, read only when one is (most runs reference none)
        owner = functools.cache(lambda: self.secrets.owner_of_workflow(workflow.id))
        reply = node_pb2.RunSecretsResponse()
        if isinstance(definition, ImageBuild):
            base = definition.from_
            if base.secret:
                where = f"{stage.name}.from.secret"
                reply.image_credentials.update(
                    self._credentials(owner(), str(base.secret), where, str(base.uri))
                )
            return reply
        if isinstance(definition, Volume):  # a volume's egress stage (volumes.NAME.egress)
            self._egress(reply, stage.name, definition, owner())
            return reply
        if isinstance(definition, ImagePull):
            if definition.secret:
                where = f"{stage.name}.secret"
                reply.image_credentials.update(
                    self._credentials(owner(), definition.secret, where, definition.uri)
                )
            return reply
        for name, reference in secret_env(getattr(definition, "env", None)).items():
            reply.env[name] = self.secrets.resolve(
                owner(), reference, where=f"{stage.name}.env.{name}"
            )
        image = getattr(definition, "image", None)
        if image is not None and getattr(image, "secret", None):
            where = f"{stage.name}.image.secret"
            reply.image_credentials.update(
                self._credentials(owner(), str(image.secret), where, str(image.uri))
            )
        for volume, transfers in (json.loads(ingress) if ingress else {}).items():
            for index, transfer in enumerate(transfers):
                if not transfer.get("secret"):
                    continue
                where = f"volumes.{volume}.ingress[{index}].source.secret"
                if str(transfer["source"]).startswith(S3_SCHEME):
                    self._s3(reply, f"{volume}/{index}", owner(), str(transfer["secret"]), where)
                    continue
                reply.ingress_authorization[f"{volume}/{index}"] = self.secrets.authorization(
                    owner(),
                    str(transfer["secret"]),
                    host=urlsplit(str(transfer["source"])).netloc.rpartition("@")[2],
                    where=where,
                )
        reply.workflow_token = self._token(workflow, owner)
        return reply

    def _egress(
        self,
        reply: node_pb2.RunSecretsResponse,
        stage_name: str,
        volume: Volume,
        owner: SecretOwner,
    ) -> None:
        """Put the s3 secret of each of ``volume``'s egress destinations with one in
        ``reply.transfer_s3`` by ``VOLUME/egress/INDEX``."""
        name = stage_name.removeprefix("volumes.").removesuffix(".egress")
        for index, transfer in enumerate(volume.egress or ()):
            secret = transfer.destination.secret
            if secret:
                where = f"volumes.{name}.egress[{index}].destination.secret"
                self._s3(reply, f"{name}/egress/{index}", owner, str(secret), where)

    def _s3(
        self,
        reply: node_pb2.RunSecretsResponse,
        key: str,
        owner: SecretOwner,
        reference: str,
        where: str,
    ) -> None:
        """Put ``reference``'s s3 secret in ``reply.transfer_s3[key]``."""
        if not is_reference(reference):
            raise InvalidArgument(f"{where}: expected a secret://SCOPE/NAME reference")
        found = self.secrets.s3_credentials(owner, reference, where=where)
        reply.transfer_s3[key].CopyFrom(
            node_pb2.S3Credentials(
                access_key_id=found.get("accessKeyId", ""),
                secret_access_key=found.get("secretAccessKey", ""),
                region=found.get("region", ""),
                endpoint=found.get("endpoint", ""),
                session_token=found.get("sessionToken", ""),
            )
        )

    def _credentials(
        self, owner: SecretOwner, reference: str, where: str, uri: str
    ) -> Mapping[str, str]:
        if not is_reference(reference):
            raise InvalidArgument(f"{where}: expected a secret://SCOPE/NAME reference")
        return self.secrets.credentials(owner, reference, where=where, host=registry_host(uri))

    def _token(self, workflow: Workflow, owner: Callable[[], SecretOwner]) -> str:
        with self._lock:
            token = self._tokens.get(workflow.id)
            if token is None:
                token = self.accounts.issue_for(
                    workflow.account_id,
                    # the submitter, else the account's owner (as ``owner_of_workflow``)
                    user_id=workflow.user_id or owner().user_id,
                    credential=CredentialKind.WORKFLOW,
                    workflow_id=workflow.id,
                )
                self._tokens[workflow.id] = token
            return token

    # -- revocation ----------------------------------------------------------------------------

    def workflow_event(self, event: Mapping[str, Any]) -> None:
        """Forget a workflow's token once it ended (an engine event, after it committed;
        the transaction that ended it revoked its tokens: ``Transaction.commit``)."""
        if event.get("kind") in _ENDINGS and event.get("workflow_id"):
            with self._lock:
                self._tokens.pop(str(event["workflow_id"]), None)

    def revoke(self, workflow_id: str) -> None:
        """Revoke every token of workflow ``workflow_id``."""
        with self._lock:
            self._tokens.pop(workflow_id, None)
        with self.sessions() as session, session.begin():
            session.execute(
                update(ApiToken)
                .where(ApiToken.workflow_id == workflow_id, ApiToken.revoked_at.is_(None))
                .values(revoked_at=self.accounts.clock())
            )

    def revoke_ended(self) -> int:
        """Revoke the live tokens of workflows that ended (a crash kept their end's event
        from revoking them); how many workflows had some."""
        with self.sessions() as session:
            ended = session.scalars(
                select(ApiToken.workflow_id)
                .join(Workflow, Workflow.id == ApiToken.workflow_id)
                .where(ApiToken.revoked_at.is_(None), Workflow.status.in_(_ENDED))
                .distinct()
            ).all()
        for workflow_id in ended:
            if workflow_id is not None:
                self.revoke(workflow_id)
        return len(ended)
