"""Orchestrate's OpenID Connect issuer: its signing key, access and refresh tokens, and the
device authorization grant.

The issuer signs short-lived access tokens (RS256 JWTs: ``sub`` is the user's id) with an RSA
key kept 0600 in the data directory and published as a JWKS. A login token authenticates as
the user's login principal (:meth:`Identity.login_principal`), which may choose an account
(``GET /accounts/{id}/token``) and manage the user's own things. Refresh tokens are opaque,
stored as their SHA-256 digest, given only for scope ``offline_access`` and rotated on every
use: presenting one already used revokes every refresh token of its user (it was copied).

Passwords are checked by :meth:`Identity.check_password`, so the token endpoint and the device
approval page count failed logins and lock users out exactly as any other sign-in.

The device grant follows RFC 8628: the client asks for a device code and a user code, a person
approves the user code on the issuer's page after signing in, and the client polls the token
endpoint meanwhile (``authorization_pending``, ``slow_down`` when it polls faster than the
interval, ``expired_token``, ``access_denied``).

Failures are :class:`OAuthError` carrying the RFC 6749 error code; the REST routes turn them
into ``{"error", "error_description"}`` bodies. Neither a password nor a token appears in one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.config import (
    DEFAULT_ACCESS_TOKEN_LIFETIME,
    DEFAULT_REFRESH_TOKEN_LIFETIME,
    FuzzballConfig,
)
from fuzzball_core.errors import FuzzballError, InvalidArgument, NotFound, Unauthenticated
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import OidcGrant, User
from fuzzball_core.store.private_files import open_private, private_directory

#: the realm's path under the REST gateway's root (Keycloak's shape, which clients expect)
REALM = "fuzzball"
REALM_PATH = f"/auth/realms/{REALM}"
#: the one client the issuer knows: the ``fuzzball`` CLI (a public client, no secret)
CLIENT_ID = "fuzzball-cli"
#: the ``aud`` of every access token: Fuzzball's API
AUDIENCE = "fuzzball"
ALGORITHM = "RS256"
#: the scopes a client may ask for; ``offline_access`` gets a refresh token
SCOPES = frozenset({"openid", "profile", "email", "offline_access"})
OFFLINE_ACCESS = "offline_access"
#: the claims of an access token
CLAIMS = ("iss", "sub", "aud", "azp", "exp", "iat", "jti", "scope", "email", "preferred_username")
#: the required action of a user whose password an owner reset (Keycloak's name for it)
UPDATE_PASSWORD = "UPDATE_PASSWORD"

GRANT_PASSWORD = "password"
GRANT_REFRESH = "refresh_token"
GRANT_DEVICE = "urn:ietf:params:oauth:grant-type:device_code"
GRANT_TYPES = (GRANT_PASSWORD, GRANT_REFRESH, GRANT_DEVICE)

#: the kinds of :class:`OidcGrant` row
_REFRESH = "refresh"
_DEVICE = "device"

DEFAULT_DEVICE_CODE_LIFETIME = 600.0
DEFAULT_POLL_INTERVAL = 5
#: how long past its expiry a grant is kept before it is forgotten
PRUNE_AFTER = 3600.0
#: letters of user codes: consonants only (no words, no 0/O or 1/I to confuse), RFC 8628 6.1
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
USER_CODE_LENGTH = 8


class OAuthError(InvalidArgument):
    """An OAuth 2.0 error response: ``error`` is the RFC's code, the message its description.

    401 for an unknown client (``invalid_client``), 400 for everything else, as RFC 6749 5.2
    says. (An InvalidArgument, so that one escaping the OAuth routes is still a 400.)"""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description

    @property
    def status(self) -> int:
        return 401 if self.error == "invalid_client" else 400

    def body(self) -> dict[str, str]:
        """The JSON body of the error response."""
        return {"error": self.error, "error_description": self.description}


class SignsIn(Protocol):
    """What the issuer needs of :class:`~fuzzball_core.service.identity.Identity`."""

    def check_password(self, email: str, password: str, *, source: str = "") -> Any:
        """The user (with an ``id``) whose password this is; Unauthenticated otherwise."""

    def login_principal(self, user_id: str) -> Principal:
        """What a login token of ``user_id`` authenticates as."""


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SigningKey:
    """The issuer's RSA key and its public JWK (``kid``: the key's RFC 7638 thumbprint)."""

    def __init__(self, private_key: rsa.RSAPrivateKey) -> None:
        self.private_key = private_key
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private_key.public_key()))
        thumbprint = json.dumps(
            {"e": public["e"], "kty": public["kty"], "n": public["n"]},
            separators=(",", ":"),
            sort_keys=True,
        )
        self.kid = _b64url(hashlib.sha256(thumbprint.encode()).digest())
        self.jwk = {**public, "kid": self.kid, "use": "sig", "alg": ALGORITHM}

    @classmethod
    def generate(cls) -> SigningKey:
        """A fresh key (tests; :meth:`load_or_create` keeps one across restarts)."""
        return cls(rsa.generate_private_key(public_exponent=65537, key_size=2048))

    @classmethod
    def load_or_create(cls, path: Path) -> SigningKey:
        """The key kept at ``path`` (PEM, 0600), created there on first use.

        A new key is written under a temporary name and renamed into place, so a reader
        never sees half a key and the tokens of a running issuer stay verifiable."""
        try:
            pem = path.read_bytes()
        except FileNotFoundError:
            private_directory(path.parent)
            key = cls.generate()
            temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
            with open_private(temporary) as out:
                out.write(
                    key.private_key.private_bytes(
                        serialization.Encoding.PEM,
                        serialization.PrivateFormat.PKCS8,
                        serialization.NoEncryption(),
                    )
                )
            temporary.replace(path)
            return key
        loaded = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(loaded, rsa.RSAPrivateKey):
            raise FuzzballError(f"{path}: the OIDC signing key is not an RSA key")
        return cls(loaded)


@dataclass(frozen=True)
class TokenSet:
    """A token endpoint's successful answer."""

    access_token: str
    expires_in: int
    scope: str
    refresh_token: str | None = None
    refresh_expires_in: int | None = None
    #: what the user must do before anything else (``UPDATE_PASSWORD``: an owner reset their
    #: password); the CLI says so
    required_actions: tuple[str, ...] = ()

    def body(self) -> dict[str, Any]:
        """The JSON body (RFC 6749 5.1, with Keycloak's ``refresh_expires_in``)."""
        body: dict[str, Any] = {
            "access_token": self.access_token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "scope": self.scope,
        }
        if self.refresh_token is not None:
            body["refresh_token"] = self.refresh_token
            body["refresh_expires_in"] = self.refresh_expires_in
        if self.required_actions:
            body["required_actions"] = list(self.required_actions)
        return body


@dataclass(frozen=True)
class DeviceAuthorization:
    """The device authorization endpoint's answer (RFC 8628 3.2)."""

    device_code: str
    user_code: str
    verification_uri: str
    expires_in: int
    interval: int

    def body(self) -> dict[str, Any]:
        """The JSON body, with ``verification_uri_complete`` (the code filled in)."""
        return {
            "device_code": self.device_code,
            "user_code": self.user_code,
            "verification_uri": self.verification_uri,
            "verification_uri_complete": f"{self.verification_uri}?user_code={self.user_code}",
            "expires_in": self.expires_in,
            "interval": self.interval,
        }


def normalise_user_code(code: str) -> str:
    """A user code as stored (``BCDF-GHJK``), however it was typed: any case, with or
    without the dash or spaces."""
    letters = "".join(ch for ch in code.upper() if ch.isalnum())
    half = len(letters) // 2
    return f"{letters[:half]}-{letters[half:]}" if letters else ""


def verification_path(issuer: str) -> str:
    """The page where a person approves a user code."""
    return f"{issuer.rstrip('/')}/device"


def looks_like_jwt(token: str) -> bool:
    """Whether ``token`` has a JWT's three dot-separated parts (an API token has no dot)."""
    return token.count(".") == 2


class OidcIssuer:
    """The issuer of one Orchestrate over its store.

    ``issuer`` is the issuer URL as clients reach it; empty, each request's own root is used
    (``https://HOST:PORT/auth/realms/fuzzball``), and any ``iss`` ending in the realm's path
    is accepted, since only this issuer's key can have signed the token."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        identity: SignsIn,
        key: SigningKey,
        *,
        issuer: str = "",
        clock: Callable[[], float] = time.time,
        access_token_lifetime: float = DEFAULT_ACCESS_TOKEN_LIFETIME,
        refresh_token_lifetime: float = DEFAULT_REFRESH_TOKEN_LIFETIME,
        device_code_lifetime: float = DEFAULT_DEVICE_CODE_LIFETIME,
        poll_interval: int = DEFAULT_POLL_INTERVAL,
    ) -> None:
        self.sessions = sessions
        self.identity = identity
        self.key = key
        self.issuer = issuer.rstrip("/")
        self.clock = clock
        self.access_token_lifetime = access_token_lifetime
        self.refresh_token_lifetime = refresh_token_lifetime
        self.device_code_lifetime = device_code_lifetime
        self.poll_interval = poll_interval

    # -- discovery ----------------------------------------------------------------------------

    def issuer_url(self, root: str) -> str:
        """The issuer URL: the configured one, else the realm under ``root`` (the request's
        ``scheme://host``)."""
        return self.issuer or f"{root.rstrip('/')}{REALM_PATH}"

    def discovery(self, issuer: str) -> dict[str, Any]:
        """The OpenID Provider metadata (``/.well-known/openid-configuration``)."""
        endpoints = f"{issuer}/protocol/openid-connect"
        return {
            "issuer": issuer,
            "token_endpoint": f"{endpoints}/token",
            "jwks_uri": f"{endpoints}/certs",
            "device_authorization_endpoint": f"{endpoints}/auth/device",
            "end_session_endpoint": f"{endpoints}/logout",
            "grant_types_supported": list(GRANT_TYPES),
            "response_types_supported": ["token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [ALGORITHM],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": sorted(SCOPES),
            "claims_supported": list(CLAIMS),
        }

    def jwks(self) -> dict[str, Any]:
        """The public keys that verify this issuer's tokens."""
        return {"keys": [self.key.jwk]}

    # -- the grants ---------------------------------------------------------------------------

    def password_grant(
        self, client_id: str, username: str, password: str, scope: str, *, issuer: str, source: str
    ) -> TokenSet:
        """Tokens for the user whose email and password these are (a failed attempt counts
        toward the user's lockout)."""
        _check_client(client_id)
        granted = _scopes(scope)
        if not username or not password:
            raise OAuthError("invalid_request", "username and password are both required")
        try:
            user = self.identity.check_password(username, password, source=source)
        except Unauthenticated as exc:
            raise OAuthError("invalid_grant", str(exc)) from None
        with self.sessions() as session, session.begin():
            return self._issue(session, str(user.id), client_id, granted, issuer)

    def refresh_grant(
        self, client_id: str, refresh_token: str, scope: str, *, issuer: str
    ) -> TokenSet:
        """New tokens for a refresh token, which is used up: the answer carries its
        successor. One presented again after its use revokes all of its user's."""
        _check_client(client_id)
        if not refresh_token:
            raise OAuthError("invalid_request", "refresh_token is required")
        now = self.clock()
        with self.sessions() as session, session.begin():
            grant = _grant(session, _REFRESH, refresh_token)
            if grant is None or grant.client_id != client_id:
                raise OAuthError("invalid_grant", "the refresh token is not valid")
            replayed = grant.consumed_at is not None
            if replayed:
                # only a copy can be presented after the rotation: end every session it
                # could belong to (committed before the refusal is raised)
                self._revoke_refresh_tokens(session, grant.user_id, now)
            else:
                return self._rotate(session, grant, scope, client_id, issuer, now)
        raise OAuthError(
            "invalid_grant",
            "the refresh token was already used; every refresh token of its user is revoked:"
            " log in again",
        )

    def _rotate(
        self,
        session: Session,
        grant: OidcGrant,
        scope: str,
        client_id: str,
        issuer: str,
        now: float,
    ) -> TokenSet:
        if grant.expires_at <= now:
            raise OAuthError(
                "invalid_grant", f"the refresh token expired at {_utc(grant.expires_at)}"
            )
        user = session.get(User, grant.user_id) if grant.user_id else None
        # a new password (or email, or role) ends the logins made before it: a refresh token
        # copied before a password change must not outlive it
        if user is not None and user.updated_at is not None and user.updated_at > grant.created_at:
            raise OAuthError(
                "invalid_grant",
                "the user's password, email or role changed since this login: log in again",
            )
        held = grant.scope.split()
        granted = _scopes(scope) if scope else held
        beyond = sorted(set(granted) - set(held))
        if beyond:
            raise OAuthError(
                "invalid_scope", f"scope {' '.join(beyond)} was not granted to this token"
            )
        grant.consumed_at = now
        return self._issue(session, str(grant.user_id), client_id, granted, issuer)

    def device_authorization(
        self, client_id: str, scope: str, *, issuer: str
    ) -> DeviceAuthorization:
        """A device code for the client to poll with and the user code a person approves."""
        _check_client(client_id)
        granted = _scopes(scope)
        device_code = secrets.token_urlsafe(32)
        now = self.clock()
        with self.sessions() as session, session.begin():
            _prune(session, now)
            user_code = self._unused_user_code(session, now)
            session.add(
                OidcGrant(
                    grant=_DEVICE,
                    digest=_digest(device_code),
                    user_code=user_code,
                    client_id=client_id,
                    scope=" ".join(granted),
                    created_at=now,
                    expires_at=now + self.device_code_lifetime,
                )
            )
        return DeviceAuthorization(
            device_code,
            user_code,
            verification_path(issuer),
            int(self.device_code_lifetime),
            self.poll_interval,
        )

    def device_grant(self, client_id: str, device_code: str, *, issuer: str) -> TokenSet:
        """Tokens once the user code was approved; until then the RFC 8628 3.5 errors."""
        _check_client(client_id)
        if not device_code:
            raise OAuthError("invalid_request", "device_code is required")
        now = self.clock()
        with self.sessions() as session, session.begin():
            grant = _grant(session, _DEVICE, device_code)
            if grant is None or grant.client_id != client_id:
                raise OAuthError("invalid_grant", "the device code is not valid")
            if grant.consumed_at is not None:
                raise OAuthError("invalid_grant", "the device code was already used")
            if grant.expires_at <= now:
                raise OAuthError(
                    "expired_token", f"the device code expired at {_utc(grant.expires_at)}"
                )
            if grant.denied_at is not None:
                raise OAuthError("access_denied", "the sign-in was denied on the approval page")
            if grant.approved_at is not None and grant.user_id is not None:
                grant.consumed_at = now
                return self._issue(session, grant.user_id, client_id, grant.scope.split(), issuer)
            previous, grant.last_polled_at = grant.last_polled_at, now
            user_code = grant.user_code
        # the poll's time is committed before the client is told to wait
        if previous is not None and now - previous < self.poll_interval:
            raise OAuthError("slow_down", f"poll at most once every {self.poll_interval} seconds")
        raise OAuthError(
            "authorization_pending", f"waiting for user code {user_code} to be approved"
        )

    def pending_device(self, user_code: str) -> str | None:
        """The normalised ``user_code`` while it waits for approval; None when no pending
        request has it (unknown, expired, decided already)."""
        code = normalise_user_code(user_code)
        with self.sessions() as session:
            return code if self._pending(session, code) is not None else None

    def decide_device(
        self, user_code: str, email: str, password: str, *, approve: bool, source: str
    ) -> str:
        """Approve or deny the device request of ``user_code`` as the user signing in with
        ``email`` and ``password`` (checked, and counted toward lockout, either way). Returns
        the normalised code; NotFound when no pending request has it, Unauthenticated when
        the sign-in fails."""
        code = normalise_user_code(user_code)
        with self.sessions() as session:
            if self._pending(session, code) is None:
                raise NotFound(f"no sign-in request is waiting for code {code or '(empty)'}")
        user = self.identity.check_password(email, password, source=source)
        now = self.clock()
        with self.sessions() as session, session.begin():
            grant = self._pending(session, code)
            if grant is None:  # expired or decided while the password was being checked
                raise NotFound(f"no sign-in request is waiting for code {code}")
            grant.user_id = str(user.id)
            if approve:
                grant.approved_at = now
            else:
                grant.denied_at = now
        return code

    def logout(self, client_id: str, refresh_token: str) -> None:
        """Revoke a refresh token (the session it continues ends); unknown ones are ignored,
        as RFC 7009 says, so a client may log out twice."""
        _check_client(client_id)
        with self.sessions() as session, session.begin():
            grant = _grant(session, _REFRESH, refresh_token)
            if grant is not None and grant.consumed_at is None:
                grant.consumed_at = self.clock()

    def revoke_user_sessions(self, user_id: str) -> None:
        """Revoke every refresh token of ``user_id`` (after a password change or removal)."""
        with self.sessions() as session, session.begin():
            self._revoke_refresh_tokens(session, user_id, self.clock())

    # -- access tokens ------------------------------------------------------------------------

    def verify(self, token: str) -> str:
        """The user id (``sub``) of a valid access token of this issuer; Unauthenticated
        saying what is wrong otherwise (never the token)."""
        try:
            claims = jwt.decode(
                token,
                self.key.private_key.public_key(),
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                # expiry against this issuer's clock below, not the library's
                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
            )
        except jwt.InvalidTokenError as exc:
            raise Unauthenticated(f"the access token is not valid: {exc}") from None
        issuer = str(claims.get("iss") or "")
        ours = issuer == self.issuer if self.issuer else issuer.endswith(REALM_PATH)
        if not ours:
            raise Unauthenticated("the access token is not valid: it is of another issuer")
        expires = claims.get("exp")
        subject = claims.get("sub")
        if not isinstance(expires, int | float) or not isinstance(subject, str) or not subject:
            raise Unauthenticated("the access token is not valid: it lacks exp or sub")
        if expires <= self.clock():
            raise Unauthenticated(
                f"the access token expired at {_utc(expires)}; refresh it or log in again"
            )
        return subject

    def authenticate(self, token: str) -> Principal:
        """The login principal of an access token's user."""
        user_id = self.verify(token)
        try:
            return self.identity.login_principal(user_id)
        except NotFound:
            raise Unauthenticated("the access token's user no longer exists") from None

    # -- internals ----------------------------------------------------------------------------

    def _issue(
        self, session: Session, user_id: str, client_id: str, scopes: list[str], issuer: str
    ) -> TokenSet:
        now = self.clock()
        user = session.get(User, user_id)
        if user is None:  # removed between the check and the issue
            raise OAuthError("invalid_grant", "the user no longer exists")
        claims = {
            "iss": issuer,
            "sub": user_id,
            "aud": AUDIENCE,
            "azp": client_id,
            "iat": int(now),
            "exp": int(now + self.access_token_lifetime),
            "jti": str(uuid.uuid4()),
            "typ": "Bearer",
            "scope": " ".join(scopes),
            # for the client's display and its choice of the personal account; the API
            # goes by ``sub`` alone
            "email": user.email,
            "preferred_username": user.email,
        }
        access = jwt.encode(claims, self.key.private_key, ALGORITHM, headers={"kid": self.key.kid})
        # an owner reset the password: the user may sign in, but must choose a new one before
        # working in an account (GET /accounts/{id}/token refuses until then)
        actions = (UPDATE_PASSWORD,) if user.require_password_update else ()
        if OFFLINE_ACCESS not in scopes:
            return TokenSet(
                access, int(self.access_token_lifetime), " ".join(scopes), required_actions=actions
            )
        refresh = secrets.token_urlsafe(32)
        _prune(session, now)
        session.add(
            OidcGrant(
                grant=_REFRESH,
                digest=_digest(refresh),
                user_id=user_id,
                client_id=client_id,
                scope=" ".join(scopes),
                created_at=now,
                expires_at=now + self.refresh_token_lifetime,
            )
        )
        return TokenSet(
            access,
            int(self.access_token_lifetime),
            " ".join(scopes),
            refresh,
            int(self.refresh_token_lifetime),
            actions,
        )

    def _pending(self, session: Session, code: str) -> OidcGrant | None:
        return session.scalars(
            select(OidcGrant).where(
                OidcGrant.grant == _DEVICE,
                OidcGrant.user_code == code,
                OidcGrant.consumed_at.is_(None),
                OidcGrant.approved_at.is_(None),
                OidcGrant.denied_at.is_(None),
                OidcGrant.expires_at > self.clock(),
            )
        ).first()

    def _unused_user_code(self, session: Session, now: float) -> str:
        while True:
            letters = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(USER_CODE_LENGTH))
            code = normalise_user_code(letters)
            live = session.scalars(
                select(OidcGrant.id).where(
                    OidcGrant.grant == _DEVICE,
                    OidcGrant.user_code == code,
                    OidcGrant.expires_at > now,
                )
            ).first()
            if live is None:
                return code

    @staticmethod
    def _revoke_refresh_tokens(session: Session, user_id: str | None, now: float) -> None:
        if user_id is None:
            return
        session.execute(
            update(OidcGrant)
            .where(
                OidcGrant.grant == _REFRESH,
                OidcGrant.user_id == user_id,
                OidcGrant.consumed_at.is_(None),
            )
            .values(consumed_at=now)
        )


def signing_key_path(config: FuzzballConfig) -> Path:
    """Where the issuer keeps its signing key: ``<data-dir>/oidc/signing-key.pem``."""
    return config.data_dir / "oidc" / "signing-key.pem"


def configured_issuer(
    config: FuzzballConfig,
    sessions: sessionmaker[Session],
    identity: SignsIn,
    *,
    clock: Callable[[], float] = time.time,
) -> OidcIssuer:
    """The issuer as ``config`` describes it (``accounts.oidc-issuer`` and the token
    lifetimes), with its key in the data directory."""
    return OidcIssuer(
        sessions,
        identity,
        SigningKey.load_or_create(signing_key_path(config)),
        issuer=config.accounts.oidc_issuer,
        clock=clock,
        access_token_lifetime=config.accounts.access_token_lifetime,
        refresh_token_lifetime=config.accounts.refresh_token_lifetime,
    )


def _check_client(client_id: str) -> None:
    if client_id != CLIENT_ID:
        raise OAuthError(
            "invalid_client",
            f"unknown client_id {client_id!r}" if client_id else "client_id is required",
        )


def _scopes(scope: str) -> list[str]:
    requested = list(dict.fromkeys(scope.split()))
    unknown = [s for s in requested if s not in SCOPES]
    if unknown:
        raise OAuthError(
            "invalid_scope",
            f"unknown scope {' '.join(unknown)!r} (known: {', '.join(sorted(SCOPES))})",
        )
    return requested


def _prune(session: Session, now: float) -> None:
    """Forget grants an hour past their expiry: nothing can use them any more (a used refresh
    token is kept until then, so that its replay is still recognised; an expired device code
    a while, so that its client is told ``expired_token``)."""
    session.execute(delete(OidcGrant).where(OidcGrant.expires_at < now - PRUNE_AFTER))


def _grant(session: Session, kind: str, value: str) -> OidcGrant | None:
    return session.scalars(
        select(OidcGrant).where(OidcGrant.grant == kind, OidcGrant.digest == _digest(value))
    ).first()
