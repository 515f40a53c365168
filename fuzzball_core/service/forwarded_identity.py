"""Who a Federate acts for, told to its member clusters and checked there.

A Federate calls its members with the token of its account on each; without more, every
Federate user would act on a member with that account's rights (any Federate user could
cordon member nodes). So the Federate signs, for every call it makes on a caller's behalf,
a short-lived JWT naming that caller (subject, name, email, organization, kind and
permissions) with its own Ed25519 key, and sends it in :data:`HEADER`. A member that trusts
the Federate (its public key in ``orchestrate.trusted-federates``) verifies it and acts as the
caller: with the permissions both the caller and the Federate's account hold, audited under
the caller's name, and (on an Orchestrate) in an account kept for that caller
(:mod:`~fuzzball_core.service.forwarded_accounts`), so two callers share nothing there. A key
a registration recorded (rather than the configuration) is honoured only with a live token
of that registration's account. A member that trusts no Federate refuses a forwarded identity
instead of ignoring it.

The key is the Federate's own: made on first start in its data directory (owner-only, 0600),
its public half printed by ``fuzzball-federate identity-key`` for the members' configuration.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fuzzball_core.config import ConfigError
from fuzzball_core.errors import Unauthenticated
from fuzzball_core.service.views import Principal
from fuzzball_core.store.private_files import open_private
from fuzzball_core.vocabulary import AccountKind, Permission

#: the request header carrying the signed identity
HEADER = "X-Fuzzball-Forwarded-Identity"
#: how long an assertion is good for: one call, with room for clocks a little apart
LIFETIME = 60.0
_ALGORITHM = "EdDSA"
_LEEWAY = 10.0
_KNOWN_PERMISSIONS = frozenset(p.value for p in Permission)
_KINDS = frozenset(k.value for k in AccountKind)
#: the namespace of the ids of the accounts members keep for forwarded callers
_FORWARDED_ACCOUNTS = uuid.UUID("6f1f2a52-3c8e-4d5b-9a57-0e8f6f4c2b11")
#: the namespace of the ids of the groups members keep for a Federate's organizations
_FORWARDED_GROUPS = uuid.UUID("0b9d5c1e-7a43-4f2e-8d61-3c5a9e2f4b70")


def load_or_create_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 key kept at ``path`` (PEM), made there (0600) when there is none."""
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{path}: not an Ed25519 private key")
        return key
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with open_private(path) as out:
        out.write(pem)
    return key


def public_key_pem(key: Ed25519PrivateKey) -> str:
    """The public half of ``key`` as PEM, for a member's ``trusted-federates``."""
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def public_jwk(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """The public half of ``key`` as a JWK (RFC 8037: ``kty`` OKP, ``crv`` Ed25519), JSON:
    how a Federate's key travels in a cluster registration."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    x = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    return json.dumps({"kty": "OKP", "crv": "Ed25519", "x": x, "use": "sig", "alg": _ALGORITHM})


def key_from_jwk(text: str) -> Ed25519PublicKey:
    """The Ed25519 public key of a JWK (JSON text); ValueError saying what is wrong."""
    try:
        jwk = json.loads(text)
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise ValueError('not an Ed25519 JWK (expected "kty": "OKP", "crv": "Ed25519")')
    x = jwk.get("x")
    if not isinstance(x, str):
        raise ValueError('the JWK has no "x"')
    try:
        raw = base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise ValueError('the JWK\'s "x" is not an Ed25519 public key') from None


class IdentitySigner:
    """Signs assertions naming a caller, as the Federate ``issuer``."""

    def __init__(
        self,
        key: Ed25519PrivateKey,
        issuer: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.key = key
        self.issuer = issuer
        self.clock = clock

    def assertion(self, who: Principal, audience: str) -> str:
        """A JWT naming ``who`` for the member ``audience``, good for :data:`LIFETIME`."""
        now = self.clock()
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": audience,
            "sub": who.user_id or who.account_id,
            "name": who.name,
            "kind": str(who.kind),
            "permissions": sorted(who.permissions or ()),
            "iat": int(now),
            "exp": int(now + LIFETIME),
        }
        if who.email:
            claims["email"] = who.email
        if who.organization_id:
            claims["org"] = who.organization_id
        return jwt.encode(claims, self.key, algorithm=_ALGORITHM)


@dataclass(frozen=True)
class TrustedFederate:
    """A Federate a member accepts forwarded identities from: with any bearer when
    ``account_id`` is None (the configuration's ``orchestrate.trusted-federates``, the
    administrator's own), else only from a caller holding a token of that ``federate``
    account (the registration that recorded the key: every recorded key names one)."""

    name: str
    public_key: Ed25519PublicKey
    account_id: str | None = None

    @classmethod
    def from_pem(cls, name: str, pem: bytes) -> TrustedFederate:
        key = serialization.load_pem_public_key(pem)
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError(f"trusted federate {name}: not an Ed25519 public key")
        return cls(name, key)


@dataclass(frozen=True)
class ForwardedCaller:
    """A caller a trusted Federate vouches for, as its signed identity names them: the
    ``federate`` (issuer), the ``subject`` (its account or user id there) and the
    Federate's ``organization`` for them, if it has any; ``permissions`` are only those
    both the caller and ``bearer`` (the Federate's account here) hold."""

    bearer: Principal
    federate: str
    subject: str
    organization: str | None
    name: str
    email: str | None
    kind: AccountKind
    permissions: frozenset[str]

    @property
    def account_id(self) -> str:
        """The id of the account a member keeps for this caller: one per caller of each
        Federate account (never another's, whatever the claims of another caller say)."""
        key = "\x1f".join(
            (self.bearer.account_id, self.federate, self.organization or "", self.subject)
        )
        return str(uuid.uuid5(_FORWARDED_ACCOUNTS, key))

    @property
    def group_id(self) -> str | None:
        """The id of the group a member keeps for this caller's :attr:`organization` (on
        the Federate, of this Federate account): the owner of its ``fuzzball://group/...``
        images there, shared by that organization's callers and by nobody else. None for a
        caller of no organization, whose group is its account alone."""
        if not self.organization:
            return None
        key = "\x1f".join((self.bearer.account_id, self.federate, self.organization))
        return str(uuid.uuid5(_FORWARDED_GROUPS, key))

    @property
    def display_name(self) -> str:
        """``alice@lab.test via federate``: the caller as audits and holds name them."""
        return f"{self.email or self.name} via {self.federate}"

    def principal(self, account_id: str) -> Principal:
        """The caller acting in ``account_id``: the account the member keeps for it, or
        the Federate's own (``bearer``'s)."""
        return Principal(
            account_id,
            self.display_name,
            Permission.READ_CLUSTER in self.permissions,
            self.kind,
            email=self.email,
            organization_id=self.bearer.organization_id,
            credential=self.bearer.credential,
            permissions=self.permissions,
            forwarded_by=None if account_id == self.bearer.account_id else self.bearer.account_id,
        )


class TrustedFederates:
    """The Federates a member trusts, and what a forwarded identity makes of a caller."""

    def __init__(
        self,
        federates: Iterable[TrustedFederate],
        *,
        audience: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._by_name = {federate.name: federate for federate in federates}
        #: the Federates trusted from the start (the configuration's): a registration's
        #: ending does not take them back
        self._configured = dict(self._by_name)
        self.audience = audience
        self.clock = clock

    @classmethod
    def from_files(cls, files: Mapping[str, Path]) -> TrustedFederates:
        """Trust each Federate by name with the public key (PEM) in its file; ConfigError
        naming ``orchestrate.trusted-federates.NAME`` for a file unreadable or holding no
        Ed25519 public key."""
        federates = []
        for name, path in files.items():
            key = f"orchestrate.trusted-federates.{name}"
            try:
                federates.append(TrustedFederate.from_pem(name, path.read_bytes()))
            except OSError as exc:
                raise ConfigError(f"{key}: cannot read {path}: {exc.strerror or exc}") from None
            except ValueError:
                raise ConfigError(
                    f"{key}: {path} holds no Ed25519 public key in PEM "
                    "(fuzzball-federate identity-key writes one)"
                ) from None
        return cls(federates)

    def trusts(self, name: str) -> TrustedFederate | None:
        """The Federate trusted as ``name``, if any."""
        return self._by_name.get(name)

    def trust(self, federate: TrustedFederate) -> None:
        """Trust ``federate`` from now on (a registration recorded in the store), replacing
        a key trusted under the same name before. ValueError when it names no account: a
        recorded key is honoured only beside its registration's token, never any bearer's."""
        if federate.account_id is None:
            raise ValueError(
                f"Federate {federate.name!r}: a key recorded by a registration names its account"
            )
        self._by_name = {**self._by_name, federate.name: federate}

    def recorded(self) -> list[str]:
        """The names trusted with a key a registration recorded (:meth:`trust`), not the
        configuration's own."""
        return [
            name
            for name, federate in self._by_name.items()
            if self._configured.get(name) is not federate
        ]

    def distrust(self, name: str) -> None:
        """Stop trusting the key a registration recorded for ``name`` (its registration
        ended); the key the configuration gives it, if any, is trusted again."""
        kept = {known: federate for known, federate in self._by_name.items() if known != name}
        if name in self._configured:
            kept[name] = self._configured[name]
        self._by_name = kept

    def caller(self, bearer: Principal, assertion: str) -> ForwardedCaller:
        """The caller ``assertion`` names, for whom ``bearer`` (the Federate's account here)
        acts, with only the permissions both hold; Unauthenticated when no trusted Federate
        signed it, or it expired, or it is malformed, or its key was recorded by a
        registration whose account ``bearer`` is not (``bearer`` is authenticated already: a
        live token)."""
        if not self._by_name:
            raise Unauthenticated(
                f"{HEADER}: this cluster trusts no Federate (orchestrate.trusted-federates)"
            )
        federate, claims = self._verified(assertion)
        # A registration's key is that registration's: honoured only beside its own live
        # token, so it is worth nothing once every token of its account expired or was
        # revoked, whether or not the Federate's end of the registration ever arrived.
        if federate.account_id is not None and bearer.account_id != federate.account_id:
            raise Unauthenticated(
                f"{HEADER}: Federate {federate.name!r} is trusted here only with the token of"
                " the registration that recorded its key"
            )
        kind = claims.get("kind", AccountKind.USER)
        permissions = frozenset(claims.get("permissions") or ()) & _KNOWN_PERMISSIONS
        org = claims.get("org")
        return ForwardedCaller(
            bearer=bearer,
            federate=str(claims["iss"]),
            subject=str(claims["sub"]),
            organization=str(org) if org else None,
            name=str(claims.get("name") or claims["sub"]),
            email=claims.get("email"),
            kind=AccountKind(kind) if kind in _KINDS else AccountKind.USER,
            permissions=frozenset(bearer.permissions or ()) & permissions,
        )

    def principal(self, bearer: Principal, assertion: str) -> Principal:
        """Who ``bearer`` acts for (:meth:`caller`), in ``bearer``'s own account: how a
        Federate that is itself a member of another one takes that one's callers (it keeps
        their workflows under that Federate's account). An Orchestrate member gives each
        caller an account of its own instead (:class:`~fuzzball_core.service.
        forwarded_accounts.ForwardedAccounts`)."""
        return self.caller(bearer, assertion).principal(bearer.account_id)

    def _verified(self, assertion: str) -> tuple[TrustedFederate, dict[str, Any]]:
        try:
            issuer = jwt.decode(assertion, options={"verify_signature": False}).get("iss")
        except jwt.PyJWTError:
            raise Unauthenticated(f"{HEADER}: not a signed identity") from None
        federate = self._by_name.get(str(issuer))
        if federate is None:
            raise Unauthenticated(f"{HEADER}: signed by {issuer!r}, a Federate not trusted here")
        try:
            claims: dict[str, Any] = jwt.decode(
                assertion,
                federate.public_key,
                algorithms=[_ALGORITHM],
                issuer=federate.name,
                options={"verify_aud": self.audience is not None, "require": ["exp", "sub"]},
                audience=self.audience,
                leeway=_LEEWAY,
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated(f"{HEADER}: the forwarded identity expired") from None
        except jwt.PyJWTError as exc:
            raise Unauthenticated(
                f"{HEADER}: the forwarded identity is not valid ({exc})"
            ) from None
        return federate, claims
