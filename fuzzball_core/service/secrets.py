"""Secrets: created, listed, changed and deleted per scope, and resolved for workflows.

A secret belongs to a user (scope user), an account (group; ``SECRET_SCOPE_ACCOUNT`` is the
swagger's deprecated name of it and is stored as group), an organization, or the cluster.
Its value is encrypted at rest (:mod:`fuzzball_core.store.secret_box`); reads return only the
swagger's ``*Info`` parts (username, trusted domains, region, endpoint), never a value, and no
error names one. The three API families each see their own scopes:

* ``/secrets``: user and group (the account in use) secrets; read_secrets to read,
  write_secrets to change;
* ``/organization/secrets``: the organization's; read_secrets to read (``private`` ones:
  its owners only), manage_organization to change;
* ``/admin/cluster/secrets``: the cluster's; administer_cluster for both.

A secret outside what the caller's family and identity see is NotFound, exactly as if it did
not exist (another organization's, another user's). A workflow's token (credential
``workflow``) holds read_secrets but never write_secrets.

Workflows refer to secrets as ``secret://SCOPE/NAME[/KEY]`` (SCOPE: user, account, group,
organization, cluster); :meth:`Secrets.resolve` reads one for whoever the workflow runs as,
recording ``secret_read`` in the audit log, and only what that user may read through the API
(a private organization secret: its owners; a cluster secret: cluster administrators). A
reference to any other is "no such secret", exactly as a missing one.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from fuzzball_core.service.audit import AuditLog
from fuzzball_core.service.permissions import permissions_for, require
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import Account, Secret, User, Workflow
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_core.vocabulary import (
    AuditAction,
    CredentialKind,
    Permission,
    SecretScope,
    SecretType,
)

#: the owner id of cluster secrets
CLUSTER_OWNER = "cluster"
#: a secret's name: what ``secret://SCOPE/NAME`` can carry
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
#: a secret reference in a workflow
_REFERENCE = re.compile(r"^secret://([a-z]+)/([^/]+)(?:/([^/]+))?$")
REFERENCE_PREFIX = "secret://"


class Family(StrEnum):
    """Which of the API's three secret routes a call comes through."""

    SECRETS = "secrets"
    ORGANIZATION = "organization"
    CLUSTER = "cluster"


@dataclass(frozen=True)
class _Kind:
    """One secret type's body field, its fields (all strings unless listed) and the ones a
    read may show."""

    type: SecretType
    fields: tuple[str, ...]
    public: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()


#: each type by the field a request body names it with (the swagger's CreateSecretRequest)
KINDS: dict[str, _Kind] = {
    "value": _Kind(SecretType.VALUE, ("value",)),
    "s3": _Kind(
        SecretType.S3,
        ("accessKeyId", "secretAccessKey", "region", "endpoint", "sessionToken"),
        public=("region", "endpoint"),
    ),
    "http": _Kind(
        SecretType.HTTP,
        ("trustedDomains", "username", "password", "token"),
        public=("trustedDomains", "username"),
        lists=("trustedDomains",),
    ),
    "image": _Kind(
        SecretType.IMAGE,
        ("trustedDomains", "username", "password"),
        public=("trustedDomains", "username"),
        lists=("trustedDomains",),
    ),
    "map": _Kind(SecretType.MAP, ("map",)),
    "decryption": _Kind(SecretType.DECRYPTION, ("passphrase", "pem")),
}
_FIELD_OF_TYPE = {kind.type: name for name, kind in KINDS.items()}
#: the body fields an update may set (the swagger's Update*SecretBody: no decryption)
_UPDATABLE = ("value", "s3", "http", "image", "map")

#: ``secret://WORD/...`` scope words and the scope each one reads
_SCOPE_WORDS: dict[str, SecretScope] = {
    "user": SecretScope.USER,
    "account": SecretScope.GROUP,
    "group": SecretScope.GROUP,
    "organization": SecretScope.ORGANIZATION,
    "cluster": SecretScope.CLUSTER,
}
_WORD_OF_SCOPE = {
    SecretScope.USER: "user",
    SecretScope.GROUP: "group",
    SecretScope.ORGANIZATION: "organization",
    SecretScope.CLUSTER: "cluster",
}
_FAMILY_SCOPES = {
    Family.SECRETS: (SecretScope.USER, SecretScope.GROUP),
    Family.ORGANIZATION: (SecretScope.ORGANIZATION,),
    Family.CLUSTER: (SecretScope.CLUSTER,),
}
_FAMILY_ROUTE = {
    Family.SECRETS: "/v3/secrets",
    Family.ORGANIZATION: "/v3/organization/secrets",
    Family.CLUSTER: "/v3/admin/cluster/secrets",
}


@dataclass(frozen=True)
class SecretView:
    """What a read shows of a secret: never its value."""

    id: str
    name: str
    scope: str
    type: str
    reference: str
    private: bool
    #: the type's public parts (``s3``: region, endpoint; ``http``/``image``: username,
    #: trustedDomains), under the body field of its type
    info: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True)
class SecretOwner:
    """Whom ``secret://`` references resolve for: a user acting in an account of an
    organization (a workflow's submitter, or an API caller)."""

    account_id: str
    user_id: str | None
    organization_id: str | None
    #: who the audit log names as reading (``workflow ID``, a user's email)
    actor: str
    #: what the user may do through the API (their role's, their account kind's, a cluster
    #: administrator's): which secrets beyond their own they may read. Empty: nothing beyond
    #: their user and account secrets and their organization's public ones
    permissions: frozenset[str] = frozenset()


def scope_of(text: str) -> SecretScope:
    """The scope a body's ``scope`` names (``SECRET_SCOPE_ACCOUNT`` is group's old name)."""
    if text == SecretScope.ACCOUNT:
        return SecretScope.GROUP
    try:
        return SecretScope(text)
    except ValueError:
        names = ", ".join(s.value for s in SecretScope)
        raise InvalidArgument(f"scope: {text!r} is not a secret scope ({names})") from None


def is_reference(value: str) -> bool:
    """Whether ``value`` is a ``secret://`` reference (to be resolved, never used as is)."""
    return value.startswith(REFERENCE_PREFIX)


def parse_reference(reference: str) -> tuple[SecretScope, str, str | None]:
    """``secret://SCOPE/NAME[/KEY]`` as (scope, name, key); InvalidArgument naming the form."""
    found = _REFERENCE.match(reference)
    if found is None or found.group(1) not in _SCOPE_WORDS:
        words = ", ".join(_SCOPE_WORDS)
        # what is not a reference may be a value given by mistake: never repeat it
        shown = repr(reference) if is_reference(reference) else "the value"
        raise InvalidArgument(
            f"{shown} is not a secret reference: secret://SCOPE/NAME[/KEY], SCOPE one of {words}"
        )
    return _SCOPE_WORDS[found.group(1)], found.group(2), found.group(3)


class Secrets:
    """The secrets of one Orchestrate store, locked by ``box``."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        box: SecretBox,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions
        self.box = box
        self.clock = clock
        self.audit = AuditLog(sessions, clock)

    # -- the API ------------------------------------------------------------------------------

    def create(self, who: Principal, family: Family, body: Mapping[str, Any]) -> str:
        """Create the secret ``body`` (a CreateSecretRequest) describes; its id."""
        self._may_write(who, family)
        name = _name(body.get("name"))
        scope = self._scope_for(family, body.get("scope"))
        private = body.get("private", False)
        if not isinstance(private, bool):
            raise InvalidArgument("private: expected a boolean")
        if private and scope != SecretScope.ORGANIZATION:
            raise InvalidArgument("private: only organization secrets can be private")
        kind_name, payload = _payload(
            body, allowed=tuple(KINDS), extra=("name", "scope", "private")
        )
        owner = self._owner_id(who, scope)
        now = self.clock()
        with self.sessions() as session, session.begin():
            taken = session.scalars(
                select(Secret.id).where(
                    Secret.scope == scope, Secret.owner_id == owner, Secret.name == name
                )
            ).first()
            if taken is not None:
                raise AlreadyExists(f"a {_WORD_OF_SCOPE[scope]} secret named {name!r} exists")
            secret = Secret(
                id=str(uuid.uuid4()),
                organization_id=None if scope == SecretScope.CLUSTER else who.organization_id,
                scope=scope.value,
                owner_id=owner,
                name=name,
                type=KINDS[kind_name].type.value,
                private=private,
                info=_info(kind_name, payload),
                ciphertext=self.box.encrypt(json.dumps(payload).encode()),
                created_by=who.user_id or who.account_id,
                created_at=now,
                updated_at=now,
            )
            session.add(secret)
            self._audit(session, AuditAction.SECRET_CREATED, who, secret)
            return secret.id

    def list(self, who: Principal, family: Family) -> list[SecretView]:
        """The secrets of ``family`` the caller sees, by scope and name."""
        self._may_read(who, family)
        with self.sessions() as session:
            rows = session.scalars(
                self._visible(who, family).order_by(Secret.scope, Secret.name)
            ).all()
            return [_view(row) for row in rows]

    def get(self, who: Principal, family: Family, secret_id: str) -> SecretView:
        """One secret the caller sees (NotFound otherwise)."""
        self._may_read(who, family)
        with self.sessions() as session:
            return _view(self._find(session, who, family, secret_id))

    def update(
        self, who: Principal, family: Family, secret_id: str, body: Mapping[str, Any]
    ) -> str:
        """Replace the secret's value with ``body``'s (an Update*SecretBody of its type)."""
        with self.sessions() as session, session.begin():
            self._may_read(who, family)
            row = self._find(session, who, family, secret_id)
            self._may_write(who, family)
            kind_name, payload = _payload(body, allowed=_UPDATABLE, extra=())
            if KINDS[kind_name].type != row.type:
                raise InvalidArgument(
                    f"{kind_name}: secret {row.name!r} is of type {row.type}; send"
                    f" {_FIELD_OF_TYPE.get(SecretType(row.type), 'its type')!r} to update it"
                )
            now = self.clock()
            row.ciphertext = self.box.encrypt(json.dumps(payload).encode())
            row.info = _info(kind_name, payload)
            row.updated_at = now
            self._audit(session, AuditAction.SECRET_UPDATED, who, row)
            return row.id

    def delete(self, who: Principal, family: Family, secret_id: str) -> str:
        """Delete one secret the caller sees; its id."""
        with self.sessions() as session, session.begin():
            self._may_read(who, family)
            row = self._find(session, who, family, secret_id)
            self._may_write(who, family)
            self._audit(session, AuditAction.SECRET_DELETED, who, row)
            session.delete(row)
            return secret_id

    def rotate_key(self) -> int:
        """A new primary key, every sealed value (secrets, central configuration revisions)
        re-encrypted with it; how many were."""
        count = self.box.rotate(self.sessions)
        self.audit.record(
            AuditAction.SECRET_KEY_ROTATED,
            actor="fuzzball-orchestrate secrets rotate-key",
            target="the secret key",
            detail={"secrets": count},
        )
        return count

    def _audit(self, session: Session, action: AuditAction, who: Principal, secret: Secret) -> None:
        """The audit entry of a change to ``secret`` (never its value)."""
        self.audit.record(
            action,
            organization_id=secret.organization_id or who.organization_id,
            actor=who.email or who.name,
            actor_id=who.user_id or who.account_id,
            target=f"secret {secret.id} ({secret.scope} {secret.name})",
            source=who.source,
            session=session,
        )

    # -- workflows ------------------------------------------------------------------------------

    def owner_of_workflow(self, workflow_id: str) -> SecretOwner:
        """Whom workflow ``workflow_id``'s references resolve for: its submitter, in its
        account and organization, with what they may read now (their role and cluster
        administration as they are when the run asks, not as they were at submission)."""
        with self.sessions() as session:
            workflow = session.get(Workflow, workflow_id)
            if workflow is None:
                raise NotFound(f"workflow {workflow_id} not found")
            account = session.get(Account, workflow.account_id)
            user_id = getattr(workflow, "user_id", None) or (
                account.owner_user_id if account is not None else None
            )
            user = session.get(User, user_id) if user_id is not None else None
            organization_id = account.organization_id if account is not None else None
            if organization_id is None and user is not None:
                organization_id = user.organization_id
            permissions = (
                permissions_for(
                    account.kind,
                    role=user.role if user is not None else None,
                    cluster_admin=bool(
                        account.is_admin or (user is not None and user.cluster_admin)
                    ),
                )
                if account is not None
                else frozenset()
            )
        return SecretOwner(
            workflow.account_id,
            user_id,
            organization_id,
            actor=f"workflow {workflow_id}",
            permissions=permissions,
        )

    @staticmethod
    def owner_of(who: Principal) -> SecretOwner:
        """Whom a caller's references resolve for: the caller. A workflow's token reads what
        its user may (as the workflow it runs in does), not only what the token may do."""
        actor = f"workflow {who.workflow_id}" if who.workflow_id else (who.email or who.name)
        permissions = (
            permissions_for(who.kind, role=who.role, cluster_admin=who.is_admin)
            if who.credential == CredentialKind.WORKFLOW
            else who.permissions or frozenset()
        )
        return SecretOwner(
            who.account_id, who.user_id, who.organization_id, actor=actor, permissions=permissions
        )

    def resolve(self, owner: SecretOwner, reference: str, *, where: str = "") -> str:
        """The value ``reference`` names for ``owner``: a value secret's value, or the KEY of
        a map (its key) or of another type (its field: ``username``, ``secretAccessKey``...).
        NotFound or InvalidArgument naming ``where`` and the reference, never a value."""
        scope, name, key = parse_reference(reference)
        kind_name, payload = self._read(owner, scope, name, reference, where)
        prefix = f"{where}: " if where else ""
        if kind_name == "value":
            if key is not None:
                raise InvalidArgument(f"{prefix}{reference}: a value secret has no keys")
            return str(payload.get("value", ""))
        source = payload.get("map", {}) if kind_name == "map" else payload
        if key is None:
            raise InvalidArgument(
                f"{prefix}{reference}: a {kind_name} secret needs a key"
                f" (secret://SCOPE/NAME/KEY; keys: {', '.join(sorted(source))})"
            )
        if key not in source or isinstance(source[key], list):
            raise NotFound(f"{prefix}{reference}: the secret has no key {key!r}")
        return str(source[key])

    def credentials(
        self, owner: SecretOwner, reference: str, *, where: str = "", host: str | None = None
    ) -> dict[str, str]:
        """A registry's or web server's credentials (an image or http secret, or a value
        secret as a bearer token) for ``owner``: ``username``/``password`` and/or ``token``.
        With ``host``, a secret listing ``trustedDomains`` is refused for any other host."""
        scope, name, key = parse_reference(reference)
        prefix = f"{where}: " if where else ""
        if key is not None:
            raise InvalidArgument(f"{prefix}{reference}: name the secret without a key here")
        kind_name, payload = self._read(owner, scope, name, reference, where)
        domains = payload.get("trustedDomains") or []
        if host is not None and domains and not _trusted(host, domains):
            raise PermissionDenied(
                f"{prefix}{reference}: {host} is not one of the secret's trusted domains"
            )
        if kind_name == "value":
            return {"token": str(payload.get("value", ""))}
        if kind_name not in ("image", "http"):
            raise InvalidArgument(
                f"{prefix}{reference}: a {kind_name} secret holds no credentials"
                " (use an image, http or value secret)"
            )
        return {k: str(payload[k]) for k in ("username", "password", "token") if payload.get(k)}

    def authorization(
        self, owner: SecretOwner, reference: str, *, host: str, where: str = ""
    ) -> str:
        """The ``Authorization`` header ``reference``'s credentials make for ``host``:
        ``Bearer`` a token (a value secret's value, an http secret's token), else ``Basic``
        username and password."""
        found = self.credentials(owner, reference, where=where, host=host)
        if found.get("token"):
            return f"Bearer {found['token']}"
        if "username" in found or "password" in found:
            pair = f"{found.get('username', '')}:{found.get('password', '')}"
            return "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        prefix = f"{where}: " if where else ""
        raise InvalidArgument(f"{prefix}{reference}: the secret holds no token or password")

    def s3_credentials(
        self, owner: SecretOwner, reference: str, *, where: str = ""
    ) -> dict[str, str]:
        """An s3 secret's fields for ``owner`` (``accessKeyId``, ``secretAccessKey``,
        ``region``, ``endpoint``, ``sessionToken``; the ones it sets). InvalidArgument naming
        ``where`` when ``reference`` names a key or a secret of another type."""
        scope, name, key = parse_reference(reference)
        prefix = f"{where}: " if where else ""
        if key is not None:
            raise InvalidArgument(f"{prefix}{reference}: name the secret without a key here")
        kind_name, payload = self._read(owner, scope, name, reference, where)
        if kind_name != "s3":
            raise InvalidArgument(
                f"{prefix}{reference}: a {kind_name} secret holds no S3 credentials"
                " (use an s3 secret)"
            )
        return {k: str(payload[k]) for k in KINDS["s3"].fields if payload.get(k)}

    def _read(
        self, owner: SecretOwner, scope: SecretScope, name: str, reference: str, where: str
    ) -> tuple[str, dict[str, Any]]:
        prefix = f"{where}: " if where else ""
        owner_id = {
            SecretScope.USER: owner.user_id,
            SecretScope.GROUP: owner.account_id,
            SecretScope.ORGANIZATION: owner.organization_id,
            SecretScope.CLUSTER: CLUSTER_OWNER,
        }[scope]
        with self.sessions() as session, session.begin():
            row = (
                session.scalars(
                    select(Secret).where(
                        Secret.scope == scope, Secret.owner_id == owner_id, Secret.name == name
                    )
                ).first()
                if owner_id is not None
                else None
            )
            if row is None or not _may_resolve(owner, row):
                # one refused reads exactly as one missing: its existence is not revealed
                raise NotFound(f"{prefix}{reference}: no such secret")
            payload = json.loads(self.box.decrypt(row.ciphertext))
            self.audit.record(
                AuditAction.SECRET_READ,
                organization_id=owner.organization_id,
                actor=owner.actor,
                actor_id=owner.user_id or owner.account_id,
                target=f"secret {row.id} ({reference})",
                detail={"field": where} if where else {},
                session=session,
            )
            return _FIELD_OF_TYPE[SecretType(row.type)], payload

    # -- who sees what --------------------------------------------------------------------------

    @staticmethod
    def _may_read(who: Principal, family: Family) -> None:
        if family == Family.CLUSTER:
            require(who, Permission.ADMINISTER_CLUSTER, "read cluster secrets")
        else:
            require(who, Permission.READ_SECRETS, "read secrets")

    @staticmethod
    def _may_write(who: Principal, family: Family) -> None:
        if family == Family.CLUSTER:
            require(who, Permission.ADMINISTER_CLUSTER, "change cluster secrets")
        elif family == Family.ORGANIZATION:
            require(who, Permission.MANAGE_ORGANIZATION, "change organization secrets")
        else:
            require(who, Permission.WRITE_SECRETS, "change secrets")

    @staticmethod
    def _scope_for(family: Family, sent: Any) -> SecretScope:
        allowed = _FAMILY_SCOPES[family]
        if sent in (None, "", "SECRET_SCOPE_UNSPECIFIED"):
            if len(allowed) == 1:
                return allowed[0]
            raise InvalidArgument(
                "scope: required (SECRET_SCOPE_USER, SECRET_SCOPE_GROUP or SECRET_SCOPE_ACCOUNT)"
            )
        if not isinstance(sent, str):
            raise InvalidArgument("scope: expected a SecretScope name")
        scope = scope_of(sent)
        if scope not in allowed:
            right = next(f for f, scopes in _FAMILY_SCOPES.items() if scope in scopes)
            raise InvalidArgument(
                f"scope: {sent} secrets are created through {_FAMILY_ROUTE[right]}"
            )
        return scope

    @staticmethod
    def _owner_id(who: Principal, scope: SecretScope) -> str:
        if scope == SecretScope.USER:
            if who.user_id is None:
                raise FailedPrecondition(
                    f"scope: user secrets need a user's token; account {who.name}'s has no user"
                )
            return who.user_id
        if scope == SecretScope.GROUP:
            return who.account_id
        if scope == SecretScope.ORGANIZATION:
            if who.organization_id is None:
                raise FailedPrecondition(f"scope: account {who.name} belongs to no organization")
            return who.organization_id
        return CLUSTER_OWNER

    @staticmethod
    def _visible(who: Principal, family: Family) -> Any:
        """The select of the secrets ``who`` sees through ``family``."""
        query = select(Secret)
        if family == Family.CLUSTER:
            return query.where(Secret.scope == SecretScope.CLUSTER)
        if family == Family.ORGANIZATION:
            if who.organization_id is None:
                return query.where(Secret.id.is_(None))  # nothing
            query = query.where(
                Secret.scope == SecretScope.ORGANIZATION,
                Secret.owner_id == who.organization_id,
            )
            if not who.may(Permission.MANAGE_ORGANIZATION):
                query = query.where(Secret.private.is_(False))
            return query
        mine = (Secret.scope == SecretScope.GROUP) & (Secret.owner_id == who.account_id)
        if who.user_id is not None:
            mine = mine | ((Secret.scope == SecretScope.USER) & (Secret.owner_id == who.user_id))
        return query.where(mine)

    def _find(self, session: Session, who: Principal, family: Family, secret_id: str) -> Secret:
        row = session.scalars(self._visible(who, family).where(Secret.id == secret_id)).first()
        if row is None:
            raise NotFound(f"secret {secret_id} not found")
        return row


# -- bodies -------------------------------------------------------------------------------------


def _may_resolve(owner: SecretOwner, row: Secret) -> bool:
    """Whether ``owner`` may read ``row`` through a workflow: what the API lets them read (a
    private organization secret: its owners, ``manage_organization``; a cluster secret:
    cluster administrators, ``administer_cluster``). User and group secrets are found only
    under the owner's own user and account."""
    if row.scope == SecretScope.CLUSTER:
        return Permission.ADMINISTER_CLUSTER in owner.permissions
    if row.scope == SecretScope.ORGANIZATION and row.private:
        return Permission.MANAGE_ORGANIZATION in owner.permissions
    return True


def _trusted(host: str, domains: list[str]) -> bool:
    """Whether ``host`` is one of ``domains`` or below one (``r.example.org`` is below
    ``example.org``); a domain may carry a port (``127.0.0.1:5000``)."""
    host = host.lower()
    bare = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    for domain in (d.lower().lstrip(".") for d in domains):
        if host == domain or bare == domain or bare.endswith(f".{domain}"):
            return True
    return False


def _name(sent: Any) -> str:
    if sent is None or sent == "":
        raise InvalidArgument("name: required")
    if not isinstance(sent, str):
        raise InvalidArgument("name: expected a string")
    if not _NAME.match(sent):
        raise InvalidArgument(
            "name: letters, digits, '.', '_' and '-', starting with a letter or digit,"
            " at most 200 characters"
        )
    return sent


def _payload(
    body: Mapping[str, Any], *, allowed: tuple[str, ...], extra: tuple[str, ...]
) -> tuple[str, dict[str, Any]]:
    """The one secret field of ``body`` (value, s3, ...) and its checked content. Errors name
    fields, never what they hold."""
    if not isinstance(body, Mapping):
        raise InvalidArgument("request body: expected a JSON object")
    unknown = sorted(set(body) - set(allowed) - set(extra))
    if unknown:
        raise InvalidArgument(f"{unknown[0]}: unknown field (expected one of {', '.join(allowed)})")
    given = [name for name in allowed if body.get(name) is not None]
    if len(given) != 1:
        raise InvalidArgument(
            f"request body: exactly one of {', '.join(allowed)} is required"
            + (f" (got {', '.join(given)})" if given else "")
        )
    kind_name = given[0]
    content = body[kind_name]
    if not isinstance(content, Mapping):
        raise InvalidArgument(f"{kind_name}: expected a JSON object")
    kind = KINDS[kind_name]
    checked: dict[str, Any] = {}
    for key, item in content.items():
        path = f"{kind_name}.{key}"
        if key not in kind.fields:
            raise InvalidArgument(f"{path}: unknown field (expected {', '.join(kind.fields)})")
        if key in kind.lists:
            if not isinstance(item, list) or not all(isinstance(i, str) for i in item):
                raise InvalidArgument(f"{path}: expected a list of strings")
        elif kind_name == "map":
            if not isinstance(item, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in item.items()
            ):
                raise InvalidArgument(f"{path}: expected an object of strings")
            item = dict(item)
        elif not isinstance(item, str):
            raise InvalidArgument(f"{path}: expected a string")
        checked[key] = item
    if kind_name == "value" and "value" not in checked:
        raise InvalidArgument("value.value: required")
    if kind_name == "map" and not checked.get("map"):
        raise InvalidArgument("map.map: required (at least one key)")
    _check_credentials(kind_name, checked)
    return kind_name, checked


#: what each credential type holds at the least, as alternatives of fields all given: a
#: create or update (which replaces the content whole) without them would keep a secret that
#: authenticates nothing, as a partial update once silently did
_REQUIRED: dict[str, tuple[tuple[str, ...], ...]] = {
    "s3": (("accessKeyId", "secretAccessKey"),),
    "http": (("username", "password"), ("token",)),
    "image": (("username", "password"),),
    "decryption": (("passphrase",), ("pem",)),
}


def _check_credentials(kind_name: str, checked: Mapping[str, Any]) -> None:
    alternatives = _REQUIRED.get(kind_name)
    if not alternatives or any(all(checked.get(f) for f in fields) for fields in alternatives):
        return
    wanted = " or ".join(
        " and ".join(f"{kind_name}.{f}" for f in fields) for fields in alternatives
    )
    raise InvalidArgument(
        f"{kind_name}: {wanted} required (an update replaces the secret's content whole)"
    )


def _info(kind_name: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    public = {k: payload[k] for k in KINDS[kind_name].public if payload.get(k)}
    return {kind_name: public} if KINDS[kind_name].public else {}


def _view(row: Secret) -> SecretView:
    scope = SecretScope(row.scope)
    return SecretView(
        id=row.id,
        name=row.name,
        scope=scope.value,
        type=row.type,
        reference=f"{REFERENCE_PREFIX}{_WORD_OF_SCOPE.get(scope, 'group')}/{row.name}",
        private=bool(row.private),
        info=dict(row.info or {}),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
