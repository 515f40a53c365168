"""What a run needs that is never stored with it: its secrets and its workflow's token.

A job's ``env`` may give ``NAME=secret://SCOPE/NAME[/KEY]``, and an image ``secret:
secret://...`` (a private registry's credentials). The workflow's stored definition, its
events and the Assignment a node receives keep the reference only; the node asks for the
values when it starts the run (``NodeAgent.RunSecrets``, with the node token), and they are
resolved then, for the user who submitted the workflow in its account and organization
(:meth:`Secrets.owner_of_workflow`), each read audited as ``secret_read``. Only a live run
(assigned or started) placed on the node asking (:class:`CallingNode`) is answered; any
other is NotFound, the same answer, after the same query, as a run that does not exist: a
node's credential tells nothing of the runs of other nodes, not even that they exist.

Each running workflow has one token of its own (credential ``workflow``: it may submit
child workflows and read secrets, never write them), handed to every job as
``FB_WORKFLOW_TOKEN`` and revoked by the transaction that ends the workflow (tokens a crash
left behind are revoked when Orchestrate starts again, :meth:`RunSecretsService.
revoke_ended`). It is minted in the engine's pass that assigns the workflow's first job or
service run (:meth:`RunSecretsService.assigned`, in that pass's transaction), so the run's
question, as it starts, is answered from memory when the run needs nothing else: no session,
no statement. A run that references secrets, or whose workflow has no token in memory (one
assigned before Orchestrate restarted, or before this service was attached), is answered
from the database, minting the token then if need be. The token's value is kept only in
memory: after a restart a workflow gets a new one.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import FuzzballError, InvalidArgument, NotFound
from fuzzball_core.orchestrate.context import LiveRun
from fuzzball_core.orchestrate.states import LIVE_RUN
from fuzzball_core.orchestrate.transaction import RunFields, Transaction
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.revocations import Revocation
from fuzzball_core.service.secrets import SecretOwner, Secrets, is_reference, parse_reference
from fuzzball_core.spec import ImagePull, StageKind
from fuzzball_core.spec import Stage as PlannedStage
from fuzzball_core.spec.models import INT32_MAX, ImageBuild, Volume
from fuzzball_core.store.models import Account, ApiToken, Run, Stage, Workflow
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
#: Where a pass's session keeps the tokens it minted until it commits (``Session.info``,
#: which ends with the pass's transaction), by workflow id: two runs of a workflow assigned
#: in one pass share one.
_MINTED = "fuzzball.workflow_tokens"


@dataclass(frozen=True)
class CallingNode:
    """The node asking ``RunSecrets``, as its credential and its request identify it: only
    the runs placed on it are answered.

    With the shared node token the node is the one the request names (``node_id``); with a
    provisioned instance's registration token it is the node registered under the name that
    token is good for (and the one the request names, when it names one). Either way a
    caller identifying no node is answered no run."""

    #: the node id the request names (Register's answer); "" when it names none
    node_id: str = ""
    #: the node name a provisioned instance's registration token is good for; None for the
    #: shared node token
    bound_name: str | None = None

    def runs(self, node_ids: Iterable[str], node_names: Mapping[str, str]) -> bool:
        """Whether a run placed on ``node_ids`` is placed on this node (``node_names``: the
        engine's node id -> name)."""
        if not self.node_id and self.bound_name is None:
            return False  # nothing identifies the caller: no run is its own
        return any(
            (not self.node_id or node_id == self.node_id)
            and (self.bound_name is None or node_names.get(node_id) == self.bound_name)
            for node_id in node_ids
        )


def _not_running(run_id: int) -> NotFound:
    """The one answer for a run the caller is not told of: ended, never existed, or placed
    on another node alike."""
    return NotFound(f"run {run_id} is not running")


@dataclass
class _Held:
    """A workflow's token, as this Orchestrate minted it."""

    token: str = field(repr=False)
    #: the stages whose runs need nothing but the token (answered from memory)
    token_only: set[str] = field(default_factory=set)


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


def _unreadable(where: str, reference: str) -> list[tuple[str, str]]:
    try:
        parse_reference(reference)
    except FuzzballError as exc:
        return [(where, exc.message)]
    return []


def _gets_token(definition: Any) -> bool:
    """Whether a stage's runs are given their workflow's token: a job's or a service's are;
    an image pull or build's and a volume egress's get only the secrets they declare."""
    return not isinstance(definition, (ImageBuild, Volume, ImagePull))


def _needs_only_token(definition: Any, ingress: str) -> bool:
    """Whether a job's or service's runs are answered their workflow's token and nothing
    else: no env value, image secret or volume ingress source of it is a secret."""
    if secret_env(getattr(definition, "env", None)):
        return False
    image = getattr(definition, "image", None)
    if image is not None and getattr(image, "secret", None):
        return False
    transfers = json.loads(ingress).values() if ingress else ()
    return not any(transfer.get("secret") for listed in transfers for transfer in listed)


class RunSecretsService:
    """Answers ``RunSecrets`` for the runs of one Orchestrate."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        secrets: Secrets,
        accounts: Accounts,
        definition_of: DefinitionOf,
        ingress_of: IngressOf | None = None,
        live_runs: Mapping[int, LiveRun] | None = None,
        node_names: Mapping[str, str] | None = None,
    ) -> None:
        self.sessions = sessions
        self.secrets = secrets
        self.accounts = accounts
        self.definition_of = definition_of
        self.ingress_of = ingress_of
        #: the engine's live runs (``EngineContext.live_runs``): which run may be answered
        #: from memory, and for which workflow and stage
        self.live_runs: Mapping[int, LiveRun] = {} if live_runs is None else live_runs
        #: the engine's node names by id (``EngineContext.node_names``): which node a
        #: provisioned instance's token speaks for
        self.node_names: Mapping[str, str] = {} if node_names is None else node_names
        self._tokens: dict[str, _Held] = {}
        #: account id -> its owner's user id (:meth:`_account_owner`)
        self._owners: dict[str, str | None] = {}
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
            engine.context.live_runs,
            engine.context.node_names,
        )
        engine.context.assignment_hook = run_secrets.assigned
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

    def assigned(self, tx: Transaction, workflow: Workflow, stage: Stage, run: RunFields) -> str:
        """In the pass assigning ``run`` (``EngineContext.assignment_hook``): mint its
        workflow's token in that pass's transaction if this is the workflow's first job or
        service run to be assigned, and note whether the stage's runs need nothing else.
        Answers the token when they need nothing else, for the assignment to carry (it goes
        out only once the pass committed, as the token is kept; a pass that fails mints and
        sends nothing), else "": the run asks ``RunSecrets`` as it starts."""
        definition = self.definition_of(workflow, stage.name)
        if not _gets_token(definition):
            return ""
        minted: dict[str, _Held] = tx.session.info.setdefault(_MINTED, {})
        with self._lock:
            held = self._tokens.get(workflow.id) or minted.get(workflow.id)
        if held is None:
            token, row = self.accounts.token_row(
                workflow.account_id,
                user_id=workflow.user_id or self._account_owner(tx, workflow.account_id),
                credential=CredentialKind.WORKFLOW,
                workflow_id=workflow.id,
            )
            # written with the pass's other tokens in one INSERT as it commits (an ORM row
            # each, made and flushed, was about 3 % of Orchestrate's samples under 2,000
            # separate workflows)
            tx.insert_at_commit(self.accounts.token_table.__table__, row)
            held = minted[workflow.id] = _Held(token)
            tx.after_commit(functools.partial(self._keep, workflow.id, held))
        if stage.name not in held.token_only:
            ingress = self.ingress_of(workflow, stage.name) if self.ingress_of else ""
            if _needs_only_token(definition, ingress):
                # what the stage declares, not what the pass changed: kept even if it fails
                held.token_only.add(stage.name)
        return held.token if stage.name in held.token_only else ""

    def _account_owner(self, tx: Transaction, account_id: str) -> str | None:
        """Whom a workflow naming no submitter acts for: its account's owner (as
        :meth:`Secrets.owner_of_workflow` has it). Read once per account: an account's owner
        is set when it is made, and an account that ran workflows is never deleted."""
        if account_id not in self._owners:
            account = tx.session.get(Account, account_id)
            if account is None:
                return None  # not kept: nothing is known of it
            self._owners[account_id] = account.owner_user_id
        return self._owners[account_id]

    def _keep(self, workflow_id: str, held: _Held) -> None:
        """Keep a token minted by a pass that committed (unless one was minted meanwhile)."""
        with self._lock:
            self._tokens.setdefault(workflow_id, held)

    def for_run(self, run_id: int, caller: CallingNode) -> node_pb2.RunSecretsResponse:
        """The secrets run ``run_id`` needs now, told to the node ``caller`` only. NotFound
        when it is not live or not placed on ``caller`` (one answer for both); NotFound or
        InvalidArgument naming the field and reference when a secret cannot be read. A live
        run of the caller that needs nothing but its workflow's token, minted in the pass
        that assigned it, is answered from memory."""
        if not 0 < run_id <= INT32_MAX:  # the wire's int64, past the id column's range
            raise _not_running(run_id)
        known = self._token_only_answer(run_id, caller)
        if known is not None:
            return known
        with self.sessions() as session:
            # the run with its workflow and stage in one query, not three; a run of another
            # node is refused after it as well, so that its refusal takes an unknown run's time
            found = session.execute(
                select(Run.status, Run.node_ids, Workflow, Stage)
                .join(Workflow, Workflow.id == Run.workflow_id)
                .join(Stage, Stage.id == Run.stage_id)
                .where(Run.id == run_id)
            ).first()
            if (
                found is None
                or found[0] not in LIVE_RUN
                or not caller.runs(found[1] or (), self.node_names)
            ):
                raise _not_running(run_id)
            _status, _node_ids, workflow, stage = found
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

    def _token_only_answer(
        self, run_id: int, caller: CallingNode
    ) -> node_pb2.RunSecretsResponse | None:
        """The answer of a live run of ``caller`` that needs only its workflow's token, when
        this Orchestrate minted it and knows the run's stage needs nothing else; else None
        (a run of another node included: it is refused as an unknown one is)."""
        live = self.live_runs.get(run_id)
        if live is None or not caller.runs(live.node_ids, self.node_names):
            return None
        with self._lock:
            held = self._tokens.get(live.workflow_id)
        if held is None or live.stage_name not in held.token_only:
            return None
        return node_pb2.RunSecretsResponse(workflow_token=held.token)

    def _token(self, workflow: Workflow, owner: Callable[[], SecretOwner]) -> str:
        with self._lock:
            held = self._tokens.get(workflow.id)
            if held is None:
                held = self._tokens[workflow.id] = _Held(
                    self.accounts.issue_for(
                        workflow.account_id,
                        # the submitter, else the account's owner (as ``owner_of_workflow``)
                        user_id=workflow.user_id or owner().user_id,
                        credential=CredentialKind.WORKFLOW,
                        workflow_id=workflow.id,
                    )
                )
            return held.token

    # -- revocation ----------------------------------------------------------------------------

    def workflow_event(self, event: Mapping[str, Any]) -> None:
        """Forget a workflow's token once it ended (an engine event, after it committed;
        the transaction that ended it revoked its tokens: ``Transaction.commit``), and tell
        the accounts' revocations, so whoever keeps callers (the endpoint proxy) refuses the
        token at its next request rather than once its kept caller expires."""
        if event.get("kind") in _ENDINGS and event.get("workflow_id"):
            workflow_id = str(event["workflow_id"])
            with self._lock:
                self._tokens.pop(workflow_id, None)
            self._announce(workflow_id)

    def revoke(self, workflow_id: str) -> None:
        """Revoke every token of workflow ``workflow_id`` (told once committed)."""
        with self._lock:
            self._tokens.pop(workflow_id, None)
        with self.sessions() as session, session.begin():
            session.execute(
                update(ApiToken)
                .where(ApiToken.workflow_id == workflow_id, ApiToken.revoked_at.is_(None))
                .values(revoked_at=self.accounts.clock())
            )
        self._announce(workflow_id)

    def _announce(self, workflow_id: str) -> None:
        self.accounts.revocations.announce(Revocation(workflow_ids=frozenset({workflow_id})))

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
