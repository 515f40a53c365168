"""The first organization of ``fuzzball local up`` and the CLI signed in as its owner.

The first ``up`` creates the organization (``local`` by default) and its owner
(``admin@local`` by default, a cluster administrator too) with a generated password, shown
once and kept 0600 in the deployment directory (``owner.password``). Each ``up`` then leaves
the ``local`` context signed in as the owner: its API token for the owner's personal account
is kept while it is still valid, else the owner signs in again with the kept password
(through the OIDC issuer, as ``context login`` would: audited, counted toward lockout), which
also gives the refresh token the CLI renews the API token with. Repeated ``up`` keeps the
same organization and owner.

Everything runs against the deployment's database before Orchestrate starts, so nothing
needs the API to answer yet.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy import select

from fuzzball_core.cli.contexts import Context
from fuzzball_core.config import FuzzballConfig
from fuzzball_core.errors import FuzzballError, Unauthenticated
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.audit import AuditLog
from fuzzball_core.service.identity import Identity
from fuzzball_core.service.oidc import CLIENT_ID, OFFLINE_ACCESS, REALM_PATH, configured_issuer
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.store.models import Organization, User
from fuzzball_core.store.private_files import open_private
from fuzzball_core.vocabulary import OrganizationRole

DEFAULT_ORGANIZATION = "local"
DEFAULT_OWNER = "admin@local"
#: who the owner's sign-in is audited as coming from
SOURCE = "fuzzball local up"


@dataclass(frozen=True)
class OwnerSignIn:
    """What ``up`` did for the owner: whom the context is signed in as, the password when it
    was generated just now (shown once), and a note when it could not sign in."""

    organization: str
    email: str
    password_file: Path
    #: the API's address and the issuer's URL, which others put in their own context
    address: str
    issuer_url: str
    generated_password: str | None = None
    problem: str = ""
    #: the CA the API's certificate is checked against, which others name in their context
    #: (empty: the system's roots verify it)
    ca_file: str = ""


def password_file(directory: Path) -> Path:
    """Where ``up`` keeps the owner's generated password (0600)."""
    return directory / "owner.password"


def sign_in_owner(
    config: FuzzballConfig,
    directory: Path,
    context: Context,
    address: str,
    admin_token: str,
    *,
    organization: str = DEFAULT_ORGANIZATION,
    owner_email: str = DEFAULT_OWNER,
) -> OwnerSignIn:
    """Create the organization and its owner on the first ``up``, and leave ``context``
    signed in as the owner (address ``address``, the issuer beneath it); the caller saves
    the contexts file.

    The owner is made a cluster administrator too, by the deployment's admin account
    (``admin_token``): on a single machine the person running it runs the cluster, and the
    node commands (``fuzzball node list|cordon``) stay theirs."""
    database = connect(config.database_url)
    try:
        migrate(database)
        sessions = session_factory(database)
        accounts = Accounts(sessions, token_lifetime=config.accounts.token_lifetime)
        identity = Identity(sessions, accounts, AuditLog(sessions))
        kept = password_file(directory)
        with sessions() as session:
            existing = session.scalars(
                select(Organization).where(Organization.name == organization)
            ).first()
            owner = (
                session.scalars(
                    select(User)
                    .where(
                        User.organization_id == existing.id,
                        User.role == OrganizationRole.OWNER.value,
                    )
                    .order_by(User.created_at)
                ).first()
                if existing is not None
                else None
            )
        generated = None
        if existing is None:
            _, created, generated = identity.create_organization(
                organization, owner_email=owner_email
            )
            administrator = accounts.authenticate(admin_token)
            identity.update_member(administrator, created.id, cluster_admin=True)
            email = created.email
            with open_private(kept) as out:
                out.write(f"{generated}\n".encode())
        else:
            email = owner.email if owner is not None else owner_email
        issuer_url = config.accounts.oidc_issuer or f"{address.rstrip('/')}{REALM_PATH}"
        context.entry["address"] = address
        context.entry["oidcServerURL"] = issuer_url
        result = OwnerSignIn(
            organization, email, kept, address, issuer_url, generated, ca_file=context.ca_file
        )
        if _signed_in_as(accounts, context, email):
            return result
        try:
            password = generated or kept.read_text().strip()
        except OSError:
            password = ""
        if not password:
            return _unsigned(result, context, f"{kept} holds no password")
        issuer = configured_issuer(config, sessions, identity)
        try:
            tokens = issuer.password_grant(
                CLIENT_ID, email, password, OFFLINE_ACCESS, issuer=issuer_url, source=SOURCE
            )
        except FuzzballError as exc:  # the owner chose another password since
            return _unsigned(result, context, str(exc))
        login = issuer.authenticate(tokens.access_token)
        context.token = identity.account_token(login, login.account_id, source=SOURCE)
        context.refresh_token = tokens.refresh_token or ""
        context.current_account_id = login.account_id
        context.accounts = [{"accountid": login.account_id, "accountalias": login.name}]
        return result
    finally:
        database.dispose()


def _signed_in_as(accounts: Accounts, context: Context, email: str) -> bool:
    """Whether the context's token is still a valid API token of ``email``'s."""
    if not context.token:
        return False
    try:
        return accounts.authenticate(context.token).email == email
    except Unauthenticated:
        return False  # expired, revoked, or of an earlier deployment's database


def _unsigned(result: OwnerSignIn, context: Context, reason: str) -> OwnerSignIn:
    context.token = ""
    context.refresh_token = ""
    problem = (
        f"the local context is not signed in as {result.email} ({reason}):"
        " run 'fuzzball context login'"
    )
    return replace(result, generated_password=None, problem=problem)
