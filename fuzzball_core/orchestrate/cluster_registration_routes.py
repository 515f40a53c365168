"""An Orchestrate joining a Federate: the swagger's AdminClusterRegistrationService, member side.

``GET /v3/admin/cluster/registration/configuration:generate`` (``administer_cluster``) answers
a ``ClusterRegistrationConfiguration`` for a Federate's ``POST /v3/admin/cluster/registration``:

* ``id``: this cluster's id, made once and kept in the store (``cluster_identity``);
* ``kind`` ``CLUSTER_KIND_ORCHESTRATE``, ``name`` (``?name=``, else the cluster's name);
* ``apiEndpoint``: the address the request came to (``?apiEndpoint=`` when the Federate
  reaches it elsewhere), and ``openapiEndpoint`` beside it;
* ``apiToken``: the first token of a fresh account of kind ``federate`` (it runs workflows,
  reads secrets, reads and holds nodes; for a forwarded caller only what they hold too). It
  is shown in this reply only (``Cache-Control: no-store``), never logged;
* ``jwkPublicKey``: this cluster's trust anchor, the public JWK of its OIDC issuer (empty
  when it runs none), with which the Federate can check what this cluster signs.

Given ``?federateName=NAME&federateJwk=JWK`` (the Federate's ``federate.name`` and forwarding
key, as ``fuzzball cluster join`` passes them) the Federate is trusted from then on: it is
recorded in ``trusted_federate_keys`` and its forwarded identities are accepted beside those
of ``orchestrate.trusted-federates``. A name the configuration trusts with another key is
refused (the file wins; change it there). The key is kept with the registration's account
and honoured only on requests bearing a live token of that account; it is dropped when that
registration ends (below) or once the account has no live token left: a request signed with
it is refused after, unless a later registration recorded it again.

``DELETE /v3/admin/cluster/{id}`` with this cluster's own id is the member's side of leaving:
the Federate, presenting the registration's token (as itself, no forwarded identity), ends
its registration, the token is revoked and the key its registration recorded is no longer
trusted (``ClusterIDResponse``). Any other id is NotFound;
any other caller is refused, pointing at ``fuzzball-orchestrate revoke-token`` (an
administrator's way).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any

from aiohttp import web
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.api.openapi import Operation, Query, documented
from fuzzball_core.api.rest import ExtraRoutes, bearer_token
from fuzzball_core.api.rest_messages import to_json
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.forwarded_identity import (
    TrustedFederate,
    TrustedFederates,
    key_from_jwk,
    public_jwk,
)
from fuzzball_core.service.oidc import OidcIssuer
from fuzzball_core.service.permissions import require
from fuzzball_core.service.registration_keys import forget_keys_of, forget_lapsed_keys
from fuzzball_core.service.revocations import Revocation
from fuzzball_core.service.views import Principal
from fuzzball_core.spec.names import printable
from fuzzball_core.store.models import ClusterIdentity, TrustedFederateKey
from fuzzball_core.vocabulary import AccountKind, Permission

log = logging.getLogger("fuzzball.orchestrate")

#: the path, under the API's base
GENERATE_PATH = "/admin/cluster/registration/configuration:generate"
#: the generate route, for the OpenAPI document
GENERATE = Operation(
    "Generate this cluster's registration for a Federate (the token in it is shown once)",
    pb.GenerateClusterRegistrationConfigurationResponse,
    query=(
        Query("name", "string", "the name to register as (default: the cluster's name)"),
        Query("apiEndpoint", "string", "where the Federate reaches this cluster"),
        Query("federateName", "string", "the Federate to trust (its federate.name)"),
        Query("federateJwk", "string", "that Federate's forwarding public key, a JWK"),
    ),
    tags=("AdminClusterRegistrationService",),
)
#: the leaving route (a Federate ends its registration), for the OpenAPI document
END = Operation(
    "A Federate leaving this cluster ends its registration (its token is revoked)",
    pb.ClusterIDResponse,
    tags=("AdminClusterService",),
)
_NAME_LIMIT = 200


class ClusterRegistration:
    """This cluster's side of joining a Federate: its id, trusted Federates, and the
    registrations it generates. ``trusted`` gives the service's trusted Federates (read each
    time: the service's may be replaced)."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        accounts: Accounts,
        trusted: Callable[[], TrustedFederates],
        *,
        name: str,
        oidc: Callable[[], OidcIssuer | None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions
        self.accounts = accounts
        self.trusted = trusted
        self.name = name
        self.oidc = oidc
        self.clock = clock
        # an account's tokens revoked (`revoke-token --account`, here or, told through the
        # revocation channel, by the command's process) ends its registration's trust
        accounts.revocations.subscribe(self._revoked)

    def load(self) -> None:
        """Trust the Federates recorded in the store (at start), unless the configuration
        trusts the same name (it wins); those whose registration has no live token left are
        dropped instead."""
        forget_lapsed_keys(self.accounts, TrustedFederateKey, self.trusted())
        with self.sessions() as session:
            rows = list(session.scalars(select(TrustedFederateKey)))
        for row in rows:
            if self.trusted().trusts(row.name) is None:
                key = key_from_jwk(row.public_jwk)
                self.trusted().trust(TrustedFederate(row.name, key, row.account_id))

    def cluster_id(self) -> str:
        """This cluster's id, made on first use and kept in the store."""
        with self.sessions() as session, session.begin():
            row = session.scalars(select(ClusterIdentity)).first()
            if row is None:
                row = ClusterIdentity(id=str(uuid.uuid4()), created_at=self.clock())
                session.add(row)
            return row.id

    def trust(self, name: str, jwk: str, *, account_id: str) -> None:
        """Accept forwarded identities of Federate ``name`` signed with the key of ``jwk``,
        until the registration of federate account ``account_id`` ends (:meth:`end`)."""
        key = self._key(name, jwk)
        with self.sessions() as session, session.begin():
            row = session.get(TrustedFederateKey, name)
            if row is None:
                session.add(
                    TrustedFederateKey(
                        name=name, public_jwk=jwk, created_at=self.clock(), account_id=account_id
                    )
                )
            else:
                row.public_jwk, row.account_id = jwk, account_id
        self.trusted().trust(TrustedFederate(name, key, account_id))
        log.info("Federate %s trusted by registration", name)

    def _key(self, name: str, jwk: str) -> Any:
        """The key of ``jwk`` for Federate ``name``; InvalidArgument for a bad name or JWK,
        FailedPrecondition when the configuration trusts ``name`` with another key."""
        if not name or len(name) > _NAME_LIMIT or not name.isprintable():
            raise InvalidArgument(f"federateName: 1 to {_NAME_LIMIT} printable characters")
        try:
            key = key_from_jwk(jwk)
        except ValueError as exc:
            raise InvalidArgument(f"federateJwk: {exc}") from None
        known = self.trusted().trusts(name)
        with self.sessions() as session:
            recorded = session.get(TrustedFederateKey, name) is not None
        if known is not None and not recorded and public_jwk(known.public_key) != jwk:
            raise FailedPrecondition(
                f"federateName: orchestrate.trusted-federates trusts {name!r} with another"
                " key; change it there"
            )
        return key

    def generate(
        self,
        api_endpoint: str,
        *,
        name: str = "",
        federate_name: str = "",
        federate_jwk: str = "",
    ) -> pb.ClusterRegistrationConfiguration:
        """A registration for a Federate: this cluster's id and name, a fresh ``federate``
        account's token, its trust anchor; the Federate trusted when it is named."""
        if bool(federate_name) != bool(federate_jwk):
            raise InvalidArgument("federateName and federateJwk: give both or neither")
        chosen = name or self.name
        if len(chosen) > _NAME_LIMIT or not chosen.isprintable():
            raise InvalidArgument(f"name: at most {_NAME_LIMIT} printable characters")
        if federate_name:
            self._key(federate_name, federate_jwk)  # refused before an account is made
        forget_lapsed_keys(self.accounts, TrustedFederateKey, self.trusted())
        account = f"federate-{federate_name or 'registration'}-{secrets.token_hex(4)}"
        made, token = self.accounts.create(account[:200], kind=AccountKind.FEDERATE)
        if federate_name:
            self.trust(federate_name, federate_jwk, account_id=made.account_id)
        log.info("registration generated: account %s for a Federate", account)
        issuer = self.oidc()
        anchor = "" if issuer is None else _json(issuer.jwks()["keys"][0])
        return pb.ClusterRegistrationConfiguration(
            id=self.cluster_id(),
            kind=pb.CLUSTER_KIND_ORCHESTRATE,
            api_token=token,
            jwk_public_key=anchor,
            api_endpoint=api_endpoint,
            openapi_endpoint=f"{api_endpoint}/v3/openapi.json",
            name=chosen,
        )

    def end(self, who: Principal, token: str, cluster_id: str) -> str:
        """A Federate leaving: the registration ``token`` is (``who`` presented it) ends,
        the token revoked and the Federate's key it recorded no longer trusted (one a later
        registration recorded again stays); this cluster's id. NotFound for another
        cluster's id."""
        if cluster_id != self.cluster_id():
            raise NotFound(f"cluster {printable(cluster_id[:64])!r} not found")
        self.accounts.end_registration(who, token)
        forget_keys_of(self.sessions, TrustedFederateKey, [who.account_id], self.trusted())
        log.info("account %s's registration ended: its Federate left this cluster", who.name)
        return cluster_id

    def _revoked(self, revocation: Revocation) -> None:
        """Every token of some accounts revoked: the keys their registrations recorded are
        no longer trusted (nothing to do for a revocation naming no account). Told that
        anything may have been revoked unheard (``everything``), the trusted keys are read
        again: those whose rows another process deleted meanwhile go, and those whose
        registration has no live token left (:func:`forget_lapsed_keys`)."""
        if revocation.account_ids or revocation.everything:
            forget_keys_of(
                self.sessions, TrustedFederateKey, revocation.account_ids, self.trusted()
            )
        if revocation.everything:
            forget_lapsed_keys(self.accounts, TrustedFederateKey, self.trusted())


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True)


def cluster_registration_routes(registration: ClusterRegistration) -> ExtraRoutes:
    """The generate and leaving routes over ``registration``."""

    def add(
        app: web.Application, base: str, principal_of: Callable[[web.Request], Principal]
    ) -> None:
        @documented(GENERATE)
        async def generate(request: web.Request) -> web.Response:
            require(principal_of(request), Permission.ADMINISTER_CLUSTER, "register clusters")
            query = request.query
            endpoint = query.get("apiEndpoint") or f"{request.scheme}://{request.host}"
            if not endpoint.startswith(("http://", "https://")) or not endpoint.isprintable():
                raise InvalidArgument("apiEndpoint: expected an http(s) address")
            config = await asyncio.to_thread(
                lambda: registration.generate(
                    endpoint.rstrip("/"),
                    name=query.get("name", ""),
                    federate_name=query.get("federateName", ""),
                    federate_jwk=query.get("federateJwk", ""),
                )
            )
            reply = pb.GenerateClusterRegistrationConfigurationResponse(config=config)
            return web.json_response(to_json(reply), headers={"Cache-Control": "no-store"})

        @documented(END)
        async def end(request: web.Request) -> web.Response:
            who, token = principal_of(request), bearer_token(request)
            ended = await asyncio.to_thread(registration.end, who, token, request.match_info["id"])
            return web.json_response(to_json(pb.ClusterIDResponse(id=ended)))

        app.router.add_get(f"{base}{GENERATE_PATH}", generate)
        app.router.add_delete(f"{base}/admin/cluster/{{id}}", end)

    return ExtraRoutes(add=add)
