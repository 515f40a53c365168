"""Members joining and leaving a running Federate, and this Federate joining another.

``register`` takes a ``ClusterRegistrationConfiguration`` (made by the member's
``GET /v3/admin/cluster/registration/configuration:generate``), checks every field, reaches
the member with its token (asking for its nodes, which the member's ``federate`` account may
do), stores it in ``federate_clusters`` (the token sealed with the data directory's secret
keys) and adds it to the live :class:`~fuzzball_federation.members.Members`: the next routing
decision sees it, no restart. ``leave`` takes it out again, unless federated workflows still
run there: then the member is put to draining (no new work) and the refusal says so; it leaves
by itself once they have ended (:meth:`Registrations.finish_draining`, from the poll loop).
Registering a draining member again (the same id and name) takes it back: it takes work again,
with the new registration's address, token and labels. A member that leaves is asked, with
its token and as this Federate itself, to revoke that token (``DELETE /v3/admin/cluster/{id}``
with its own id: :meth:`Registrations.end` is that route's member side here), which also
drops this Federate's forwarding key there. One that cannot be reached leaves all the same,
and the end of its registration is kept in the store (``federate_pending_registration_ends``,
the token sealed) and asked again by the poll loop (:meth:`Registrations.retry_ends`) until
the member answers: its administrator has nothing to do, as a Kubernetes controller keeps
retrying a finalizer's clean-up. A member that answers but refuses (older than the route,
another id there) is told once in a warning saying how its administrator ends it.

``generate`` is the member side when this Federate joins another (kind
``CLUSTER_KIND_FEDERATE``): a fresh ``federate`` account here and its token (shown once), this
Federate's public key as the JWK, and, given the other Federate's name and JWK, that Federate
recorded as trusted (``federate_trusted_federates``), so its forwarded identities are accepted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.client import address_url
from fuzzball_core.config import FederateMemberConfig
from fuzzball_core.errors import (
    AlreadyExists,
    FailedPrecondition,
    FuzzballError,
    Internal,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.forwarded_identity import (
    TrustedFederate,
    TrustedFederates,
    key_from_jwk,
    public_jwk,
)
from fuzzball_core.service.registration_keys import forget_keys_of, forget_lapsed_keys
from fuzzball_core.service.views import Principal
from fuzzball_core.spec.names import printable
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_core.vocabulary import AccountKind
from fuzzball_federation.forwarding import acting_for
from fuzzball_federation.members import (
    FEDERATE,
    ORCHESTRATE,
    REGISTERED,
    Member,
    Members,
)
from fuzzball_federation.models import (
    FederatedWorkflow,
    FederateTrust,
    PendingRegistrationEnd,
    RegisteredCluster,
)
from fuzzball_federation.offers import (
    EGRESS_PRICE_LABEL,
    EGRESS_RATE_LABEL,
    PRICE_LABEL,
    price_label,
)

log = logging.getLogger("fuzzball.federate")

#: the fields of a ClusterRegistrationConfiguration (JSON spelling) a registration reads
CONFIG_FIELDS = (
    "id",
    "kind",
    "apiToken",
    "jwkPublicKey",
    "apiEndpoint",
    "openapiEndpoint",
    "name",
)
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_NAME_LIMIT = 200
#: a label's name, as configured members' labels are spelled
_LABEL = re.compile(r"[a-z0-9][a-z0-9._/-]{0,62}")
_ENDPOINT_LIMIT = 1000
#: a member's workflow statuses that mean it has ended
ENDED = frozenset({"STAGE_STATUS_FINISHED", "STAGE_STATUS_FAILED", "STAGE_STATUS_CANCELED"})
#: seconds before a registration left unended is asked again, doubling after each failed
#: try up to END_RETRY_MAX: a member down for a day is asked about every 5 minutes, one back
#: within a minute is ended within a poll or two
END_RETRY_FIRST = 10.0
END_RETRY_MAX = 300.0
#: what a member that could not end a registration answered that is worth asking again (it
#: could not be reached, or failed for now); anything else it answered is its last word
RETRIED = (Unavailable, Internal, ResourceExhausted)


def key_id(key: Ed25519PrivateKey) -> str:
    """This Federate's cluster id: a UUID from its signing key's public half, so it is the
    same on every start and changes only with the key (``federate-identity.key``)."""
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return str(uuid.UUID(bytes=hashlib.sha256(raw).digest()[:16], version=4))


def read_registration(body: Any) -> dict[str, str]:
    """A ``RegisterClusterRequest`` body, each field checked: the configuration's fields by
    their JSON names, kind as its enum name. InvalidArgument names the first field wrong."""
    if not isinstance(body, dict):
        raise InvalidArgument("request body: expected a JSON object")
    unknown = sorted(set(body) - {"config", "labels"})
    if unknown:
        raise InvalidArgument(f"{unknown[0]}: not a field of RegisterClusterRequest")
    config = body.get("config")
    if not isinstance(config, dict):
        raise InvalidArgument("config: expected the ClusterRegistrationConfiguration object")
    return read_configuration(config, prefix="config.")


def read_labels(body: dict[str, Any]) -> dict[str, str]:
    """The member's ``labels`` of a registration body (an extension of
    RegisterClusterRequest: what ``federate.clusters[].labels`` says of a configured member,
    such as its ``price-per-hour`` for the router), each checked; none when it has none."""
    labels = body.get("labels") or {}
    if not isinstance(labels, dict):
        raise InvalidArgument("labels: expected an object of names to strings")
    for key, value in labels.items():
        if not _LABEL.fullmatch(key):
            raise InvalidArgument(f"labels: {printable(key)!r} is not a label name")
        if not isinstance(value, str) or len(value) > _NAME_LIMIT or not value.isprintable():
            raise InvalidArgument(f"labels.{key}: expected a printable string")
    for label in (PRICE_LABEL, EGRESS_PRICE_LABEL, EGRESS_RATE_LABEL):
        try:
            price_label(labels, label, 0.0)
        except ValueError as exc:
            raise InvalidArgument(f"labels.{label}: {exc}") from None
    return dict(labels)


def read_configuration(config: dict[str, Any], *, prefix: str = "") -> dict[str, str]:
    """A ``ClusterRegistrationConfiguration`` (JSON mapping) checked field by field."""
    spelled = {
        **{name: name for name in CONFIG_FIELDS},
        "api_token": "apiToken",
        "jwk_public_key": "jwkPublicKey",
        "api_endpoint": "apiEndpoint",
        "openapi_endpoint": "openapiEndpoint",
    }
    fields: dict[str, str] = {}
    for key, value in config.items():
        name = spelled.get(key)
        if name is None:
            raise InvalidArgument(f"{prefix}{key}: not a field of ClusterRegistrationConfiguration")
        if not isinstance(value, str):
            raise InvalidArgument(f"{prefix}{name}: expected a string")
        fields[name] = value
    for required in ("id", "name", "apiEndpoint", "apiToken"):
        if not fields.get(required):
            raise InvalidArgument(f"{prefix}{required}: required")
    if not _ID.fullmatch(fields["id"]):
        raise InvalidArgument(
            f"{prefix}id: at most 64 letters, digits, '.', '_' or '-', starting with a letter"
            " or digit"
        )
    name = fields["name"]
    if len(name) > _NAME_LIMIT or not name.isprintable() or name != name.strip():
        raise InvalidArgument(
            f"{prefix}name: at most {_NAME_LIMIT} printable characters, no surrounding spaces"
        )
    kind = fields.get("kind") or ORCHESTRATE
    if kind not in (ORCHESTRATE, FEDERATE):
        raise InvalidArgument(
            f"{prefix}kind: {printable(kind)!r} is not {ORCHESTRATE} or {FEDERATE}"
        )
    fields["kind"] = kind
    for endpoint in ("apiEndpoint", "openapiEndpoint"):
        value = fields.get(endpoint, "")
        if value and (
            len(value) > _ENDPOINT_LIMIT or not value.isprintable() or not _http_address(value)
        ):
            raise InvalidArgument(f"{prefix}{endpoint}: expected an http(s) address")
    jwk = fields.get("jwkPublicKey", "")
    if jwk:
        try:
            parsed = json.loads(jwk)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("kty"), str):
            raise InvalidArgument(f"{prefix}jwkPublicKey: expected a JWK (a JSON object with kty)")
    if len(fields["apiToken"]) > 4096 or not fields["apiToken"].isprintable():
        raise InvalidArgument(f"{prefix}apiToken: not a token")
    return fields


class Registrations:
    """Members that join and leave by registration, kept in Federate's store."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        members: Members,
        box: SecretBox,
        *,
        timeout: float,
        name: str,
        key: Ed25519PrivateKey,
        accounts: Accounts,
        trusted: TrustedFederates,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions
        self.members = members
        self.box = box
        self.timeout = timeout
        #: this Federate's own name and key (what it lists itself as)
        self.name = name
        self.key = key
        self.id = key_id(key)
        self.accounts = accounts
        self.trusted = trusted
        self.clock = clock
        #: held while a member leaves or rejoins, so a draining member registered again is
        #: not taken out by the poll loop's finish_draining at the same moment
        self._changing = threading.Lock()

    # -- at start -------------------------------------------------------------------------------

    def load(self) -> None:
        """Add the stored members and trust the stored Federates (at start, after the
        configured members, whose names and ids they may not take); a Federate whose
        registration here has no live token left is dropped instead."""
        forget_lapsed_keys(self.accounts, FederateTrust, self.trusted)
        with self.sessions() as session:
            rows = list(session.scalars(select(RegisteredCluster)))
            trusts = list(session.scalars(select(FederateTrust)))
        for row in rows:
            try:
                self.members.add(self._member(row, self.box.decrypt(row.token_sealed).decode()))
            except (AlreadyExists, FuzzballError) as exc:
                log.warning("registered cluster %s not loaded: %s", row.name, exc.message)
        for trust in trusts:
            key = key_from_jwk(trust.public_jwk)
            self.trusted.trust(TrustedFederate(trust.name, key, trust.account_id))

    def _member(self, row: RegisteredCluster, token: str) -> Member:
        config = FederateMemberConfig(
            name=row.name, address=row.api_endpoint, token=token, labels=dict(row.labels or {})
        )
        return Member(
            config,
            timeout=self.timeout,
            id=row.id,
            kind=row.kind,
            source=REGISTERED,
            draining=row.draining,
            jwk_public_key=row.jwk_public_key,
            openapi_endpoint=row.openapi_endpoint,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    # -- joining --------------------------------------------------------------------------------

    def register(self, fields: dict[str, str], labels: dict[str, str] | None = None) -> Member:
        """Register the member ``fields`` (from :func:`read_registration`) describes, with
        its ``labels`` (:func:`read_labels`): reach it, store it, route to it from now on."""
        name, cluster_id = fields["name"], fields["id"]
        if name == self.name or cluster_id == self.id:
            raise AlreadyExists(f"config: {name!r} ({cluster_id}) is this Federate itself")
        for member in self.members.snapshot():
            same = (member.name, member.id) == (name, cluster_id)
            if same and member.draining and member.source == REGISTERED:
                return self._rejoin(member, fields, labels)
            if member.name == name:
                raise AlreadyExists(f"config.name: a member named {name!r} already exists")
            if member.id == cluster_id:
                raise AlreadyExists(f"config.id: a member with id {cluster_id!r} already exists")
        now = self.clock()
        row = self._row(fields, labels, created=now, updated=now)
        member = self._member(row, fields["apiToken"])
        self._reach(member)
        row.token_sealed = self.box.encrypt(fields["apiToken"].encode())
        with self.sessions() as session, session.begin():
            session.add(row)
            self._keep_registration(session, cluster_id, fields["apiToken"])
        self.members.add(member)
        log.info("cluster %s (%s) joined at %s", name, cluster_id, member.config.address)
        return member

    def _keep_registration(self, session: Session, cluster_id: str, token: str) -> None:
        """A member registered (again) with ``token``: an end of that registration still
        pending from when it left unreachable is dropped (it is this registration now)."""
        for pending in session.scalars(
            select(PendingRegistrationEnd).where(PendingRegistrationEnd.cluster_id == cluster_id)
        ):
            if self.box.decrypt(pending.token_sealed).decode() == token:
                session.delete(pending)
                log.info(
                    "cluster %s registered again with the registration it left: it is not"
                    " ended there",
                    pending.name,
                )

    @staticmethod
    def _row(
        fields: dict[str, str], labels: dict[str, str] | None, *, created: float, updated: float
    ) -> RegisteredCluster:
        """The store's row of the registration ``fields`` (its token not sealed yet)."""
        return RegisteredCluster(
            id=fields["id"],
            name=fields["name"],
            kind=fields["kind"],
            api_endpoint=fields["apiEndpoint"],
            openapi_endpoint=fields.get("openapiEndpoint", ""),
            token_sealed="",
            jwk_public_key=fields.get("jwkPublicKey", ""),
            labels=dict(labels or {}),
            draining=False,
            created_at=created,
            updated_at=updated,
        )

    def _rejoin(
        self, member: Member, fields: dict[str, str], labels: dict[str, str] | None
    ) -> Member:
        """The draining ``member`` registered again: reached with the new registration, it
        takes work again with its address, token and labels; the token it had, when another,
        is revoked on it (as when it leaves)."""
        row = self._row(fields, labels, created=member.created_at, updated=self.clock())
        fresh = self._member(row, fields["apiToken"])
        self._reach(fresh)
        before = Member(member.config, timeout=self.timeout, id=member.id, source=REGISTERED)
        with self._changing:
            with self.sessions() as session, session.begin():
                stored = session.get(RegisteredCluster, member.id)
                if stored is None or not member.draining:
                    raise FailedPrecondition(
                        f"cluster {member.name} left or was taken back meanwhile; register it again"
                    )
                for column in ("kind", "api_endpoint", "openapi_endpoint", "jwk_public_key"):
                    setattr(stored, column, getattr(row, column))
                stored.labels, stored.draining = row.labels, False
                stored.updated_at = row.updated_at
                stored.token_sealed = self.box.encrypt(fields["apiToken"].encode())
                self._keep_registration(session, member.id, fields["apiToken"])
            member.take_registration(fresh)
        log.info("cluster %s (%s) is taking work again: registered anew", member.name, member.id)
        if before.config.token != fields["apiToken"]:
            self._end_registration(before)
        return member

    @staticmethod
    def _reach(member: Member) -> None:
        """Ask the member for its nodes with its token: it must answer and take the token."""
        try:
            member.client().list_nodes()
        except Unauthenticated:
            raise InvalidArgument(
                f"config.apiToken: cluster {member.name} refused it (expired, revoked, or"
                " not one of its tokens)"
            ) from None
        except FuzzballError as exc:
            raise FailedPrecondition(
                f"config.apiEndpoint: cluster {member.name} cannot be reached there"
                f" ({printable(exc.message)})"
            ) from None
        finally:
            member.close()

    # -- leaving --------------------------------------------------------------------------------

    def running(self, member: Member) -> list[str]:
        """The federated workflows still running on ``member`` (federated ids); none when
        it cannot be asked (its work then shows as unknown, not as running)."""
        with self.sessions() as session:
            rows = list(
                session.scalars(
                    select(FederatedWorkflow).where(FederatedWorkflow.cluster == member.name)
                )
            )
        if not rows:
            return []
        try:
            listed = member.client().list_workflows()
        except FuzzballError as exc:
            log.warning("cluster %s: its workflows cannot be listed: %s", member.name, exc)
            return []
        status = {w.id: pb.WorkflowStatus.Name(w.status) for w in listed}
        return [row.id for row in rows if status.get(row.remote_id, "") not in (*ENDED, "")]

    def leave(self, cluster_id: str) -> str:
        """Take the member ``cluster_id`` out of the federation; its id. FailedPrecondition
        when it comes from the configuration, or when federated workflows still run there
        (then it is draining: no new work, and it leaves once they end)."""
        if cluster_id == self.id:
            raise FailedPrecondition(f"cluster {cluster_id!r} is this Federate itself")
        member = self.members.by_id(cluster_id)
        if member.source != REGISTERED:
            raise FailedPrecondition(
                f"cluster {member.name} is in federate.clusters of the configuration: remove"
                " it there and restart Federate"
            )
        running = self.running(member)
        if running:
            self._set_draining(member)
            shown = ", ".join(running[:5]) + (", ..." if len(running) > 5 else "")
            raise FailedPrecondition(
                f"cluster {member.name} still runs {len(running)} federated workflow(s)"
                f" ({shown}): it is now draining (no new work) and leaves by itself once they"
                " have ended; registering it again takes it back"
            )
        with self._changing:
            left = self._forget(member)
        if left:
            self._end_registration(member)
        return member.id

    def _set_draining(self, member: Member) -> None:
        if member.draining:
            return
        member.draining = True
        member.updated_at = self.clock()
        with self.sessions() as session, session.begin():
            row = session.get(RegisteredCluster, member.id)
            if row is not None:
                row.draining, row.updated_at = True, member.updated_at
        log.info("cluster %s is draining", member.name)

    def _forget(self, member: Member) -> bool:
        """Take ``member`` out of the store and the live members; whether this call did (two
        leaves at once: the other one did). Hold ``_changing``."""
        with self.sessions() as session, session.begin():
            row = session.get(RegisteredCluster, member.id)
            if row is not None:
                session.delete(row)
        try:
            self.members.remove(member.name)
        except NotFound:
            return False
        log.info("cluster %s (%s) left", member.name, member.id)
        return True

    def _end_registration(self, member: Member) -> None:
        """Ask ``member`` (gone from the live members) to end the registration it gave this
        Federate: ``DELETE /v3/admin/cluster/{its id}`` with that registration's token, as
        this Federate itself; the member revokes the token and drops this Federate's key.
        When it cannot be reached (or fails for now) the end is kept and asked again by the
        poll loop (:meth:`retry_ends`); when it refuses (older than this route), the warning
        says how its administrator ends it."""
        try:
            error = self._ask_end(member)
        finally:
            member.close()
        if error is None:
            return
        if isinstance(error, RETRIED):
            now = self.clock()
            with self.sessions() as session, session.begin():
                session.add(
                    PendingRegistrationEnd(
                        cluster_id=member.id,
                        name=member.name,
                        api_endpoint=member.config.address,
                        token_sealed=self.box.encrypt(member.config.token.encode()),
                        left_at=now,
                        attempts=1,
                        next_attempt_at=now + END_RETRY_FIRST,
                        last_error=printable(error.message),
                    )
                )
            log.warning(
                "cluster %s left, but could not be reached to end its registration there (%s):"
                " this Federate asks it again as it polls its members (every %g s at first, at"
                " most %g s apart) until it answers; until then the token it gave this"
                " Federate stays valid there and this Federate's key trusted, unless the"
                " member's administrator ends it at once (on the member:"
                " `fuzzball-orchestrate revoke-token --account NAME`, NAME the"
                " federate-... account its registration made)",
                member.name,
                printable(error.message),
                END_RETRY_FIRST,
                END_RETRY_MAX,
            )
            return
        self._refused(member.name, error)

    @staticmethod
    def _ask_end(member: Member) -> FuzzballError | None:
        """Ask ``member`` to end its registration: None once it did (or had: its token is
        revoked already), else what it answered."""
        try:
            with acting_for(None):
                member.client().call_json("DELETE", f"/admin/cluster/{member.id}")
        except Unauthenticated:
            log.info("cluster %s: its token for this Federate was revoked already", member.name)
        except FuzzballError as exc:
            return exc
        return None

    @staticmethod
    def _refused(name: str, error: FuzzballError) -> None:
        log.warning(
            "cluster %s left, but the token it gave this Federate could not be revoked there"
            " (%s): it stays valid until it expires, and this Federate's key trusted"
            " there, unless the member's administrator revokes it (on the member:"
            " `fuzzball-orchestrate revoke-token --account NAME`, NAME the"
            " federate-... account its registration made)",
            name,
            printable(error.message),
        )

    def retry_ends(self) -> list[str]:
        """Ask again each member that left unreachable, and is due, to end its registration
        (a turn of the poll loop); the names of those whose registration ended now. One still
        unreachable is asked again later (:data:`END_RETRY_FIRST` doubling up to
        :data:`END_RETRY_MAX`). Blocking: run it in a thread."""
        now = self.clock()
        with self.sessions() as session:
            due = list(
                session.scalars(
                    select(PendingRegistrationEnd)
                    .where(PendingRegistrationEnd.next_attempt_at <= now)
                    .order_by(PendingRegistrationEnd.id)
                )
            )
        ended = []
        for pending in due:
            config = FederateMemberConfig(
                name=pending.name,
                address=pending.api_endpoint,
                token=self.box.decrypt(pending.token_sealed).decode(),
            )
            member = Member(config, timeout=self.timeout, id=pending.cluster_id, source=REGISTERED)
            try:
                error = self._ask_end(member)
            finally:
                member.close()
            with self.sessions() as session, session.begin():
                row = session.get(PendingRegistrationEnd, pending.id)
                if row is None:
                    continue  # registered again meanwhile with this registration
                if error is not None and isinstance(error, RETRIED):
                    row.attempts += 1
                    row.last_error = printable(error.message)
                    delay = min(END_RETRY_FIRST * 2 ** (row.attempts - 1), END_RETRY_MAX)
                    row.next_attempt_at = self.clock() + delay
                    continue
                session.delete(row)
            if error is None:
                log.info(
                    "cluster %s, which left %.0f s ago unreachable, ended its registration"
                    " now: the token it gave this Federate is revoked and this Federate's"
                    " key no longer trusted there",
                    pending.name,
                    now - pending.left_at,
                )
                ended.append(pending.name)
            else:
                self._refused(pending.name, error)
        return ended

    def pending_ends(self) -> list[PendingRegistrationEnd]:
        """The registrations still to be ended on members that left unreachable (no token:
        each row's is sealed)."""
        with self.sessions() as session:
            return list(
                session.scalars(select(PendingRegistrationEnd).order_by(PendingRegistrationEnd.id))
            )

    def finish_draining(self) -> list[str]:
        """Let every draining member whose federated workflows have ended leave (a turn of
        the poll loop); the names of those that left. Blocking: run it in a thread."""
        left = []
        for member in self.members.snapshot():
            if member.draining and member.source == REGISTERED and not self.running(member):
                with self._changing:  # registered again meanwhile: it stays
                    gone = member.draining and self._forget(member)
                if gone:
                    self._end_registration(member)
                    left.append(member.name)
        return left

    # -- this Federate leaving another ------------------------------------------------------

    def end(self, who: Principal, token: str) -> str:
        """The Federate this one is a member of leaves it (``DELETE /v3/admin/cluster/{this
        Federate's id}`` with the registration's token): the token is revoked; this
        Federate's id."""
        self.accounts.end_registration(who, token)
        forget_keys_of(self.sessions, FederateTrust, [who.account_id], self.trusted)
        log.info("account %s's registration ended: its Federate left this one", who.name)
        return self.id

    # -- this Federate joining another ------------------------------------------------------

    def generate(
        self,
        api_endpoint: str,
        *,
        federate_name: str = "",
        federate_jwk: str = "",
    ) -> pb.ClusterRegistrationConfiguration:
        """What another Federate needs to register this one as its member: a fresh
        ``federate`` account here and its token (shown once), and this Federate's public key;
        given that Federate's name and JWK, that Federate is trusted from now on."""
        if bool(federate_name) != bool(federate_jwk):
            raise InvalidArgument("federateName and federateJwk: give both or neither")
        key = None
        if federate_jwk:
            if len(federate_name) > _NAME_LIMIT or not federate_name.isprintable():
                raise InvalidArgument(f"federateName: at most {_NAME_LIMIT} printable characters")
            try:
                key = key_from_jwk(federate_jwk)
            except ValueError as exc:
                raise InvalidArgument(f"federateJwk: {exc}") from None
        forget_lapsed_keys(self.accounts, FederateTrust, self.trusted)
        account = f"federate-{federate_name or 'registration'}-{secrets.token_hex(4)}"
        made, token = self.accounts.create(account[:200], kind=AccountKind.FEDERATE)
        if key is not None:
            self._record_trust(federate_name, federate_jwk, key, made.account_id)
        log.info("registration generated: account %s for a Federate", account)
        return pb.ClusterRegistrationConfiguration(
            id=self.id,
            kind=pb.CLUSTER_KIND_FEDERATE,
            api_token=token,
            jwk_public_key=public_jwk(self.key),
            api_endpoint=api_endpoint,
            openapi_endpoint=f"{api_endpoint}/v3/openapi.json",
            name=self.name,
        )

    def _record_trust(self, name: str, jwk: str, key: Any, account_id: str) -> None:
        """Trust Federate ``name``'s ``key`` until the registration of ``account_id`` ends."""
        with self.sessions() as session, session.begin():
            row = session.get(FederateTrust, name)
            if row is None:
                session.add(
                    FederateTrust(
                        name=name, public_jwk=jwk, created_at=self.clock(), account_id=account_id
                    )
                )
            else:
                row.public_jwk, row.account_id = jwk, account_id
        self.trusted.trust(TrustedFederate(name, key, account_id))


def _http_address(value: str) -> bool:
    """Whether ``value`` is host:port or an http(s) URL (as a context's address is)."""
    try:
        address_url(value)
    except InvalidArgument:
        return False
    return True
