"""The account commands of both API processes (``fuzzball-orchestrate``, ``fuzzball-federate``):
``create-account``, ``issue-token`` and ``revoke-token``, run on the server's own machine
against its store; and Orchestrate's ``create-organization``, which makes an organization and
its first owner before any user can sign in (``fuzzball local up`` and a cluster's first
setup).

Tokens are printed once and never taken on the command line (where other users see it in
the process list): ``revoke-token`` reads the token to revoke from stdin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import click

from fuzzball_core.service.identity import Identity
from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import AccountKind


class AccountService(Protocol):
    """What the commands need of a service: its accounts and their tokens."""

    def create_account(
        self, name: str, *, admin: bool = False, kind: str = AccountKind.USER
    ) -> tuple[Principal, str]: ...

    def issue_token(self, name: str) -> str: ...

    def revoke_token(self, token: str) -> None: ...

    def revoke_tokens(self, name: str) -> int: ...


def add_account_commands(
    group: click.Group, service_for: Callable[[str | None], AccountService]
) -> None:
    """Add the account commands to ``group``; ``service_for(config file)`` builds the service
    (migrating its store) when a command runs."""

    @group.command("create-account")
    @click.argument("name")
    @click.option(
        "--kind",
        type=click.Choice([kind.value for kind in AccountKind]),
        default=AccountKind.USER.value,
        show_default=True,
        help="What the account is: an administrator, a service placing node holds as itself"
        " (monitoring, provisioner), or a user.",
    )
    @click.option("--admin", is_flag=True, help="The same as --kind admin.")
    @click.pass_obj
    def create_account(config_file: str | None, name: str, kind: str, admin: bool) -> None:
        """Create an account and print its bearer token (shown only once)."""
        _, token = service_for(config_file).create_account(name, admin=admin, kind=kind)
        click.echo(token)

    @group.command("issue-token")
    @click.argument("name")
    @click.pass_obj
    def issue_token(config_file: str | None, name: str) -> None:
        """Print a new bearer token for an existing account: NAME is a service account's
        name, an organization's account's when one organization alone has that name, or an
        account's id."""
        click.echo(service_for(config_file).issue_token(name))

    @group.command("revoke-token")
    @click.option(
        "--account",
        "name",
        help="Revoke every token of this account instead (its name, as issue-token takes it,"
        " or its id).",
    )
    @click.pass_obj
    def revoke_token(config_file: str | None, name: str | None) -> None:
        """Revoke the bearer token read from stdin, or every token of --account."""
        service = service_for(config_file)
        if name is not None:
            count = service.revoke_tokens(name)
            click.echo(f"Revoked {count} token{'' if count == 1 else 's'} of account {name}.")
            return
        token = click.get_text_stream("stdin").read().strip()
        if not token:
            raise click.UsageError("give the token to revoke on stdin, or --account NAME")
        service.revoke_token(token)
        click.echo("Revoked the token.")


def add_organization_commands(
    group: click.Group, identity_for: Callable[[str | None], Identity]
) -> None:
    """Add ``create-organization`` to ``group``; ``identity_for(config file)`` builds the
    service's :class:`Identity` (migrating its store) when the command runs."""

    @group.command("create-organization")
    @click.argument("name")
    @click.option("--owner-email", required=True, help="The email its first owner signs in with.")
    @click.option(
        "--owner-password-stdin",
        is_flag=True,
        help="Read the owner's password from stdin (it must meet the password policy)"
        " instead of generating one.",
    )
    @click.pass_obj
    def create_organization(
        config_file: str | None, name: str, owner_email: str, owner_password_stdin: bool
    ) -> None:
        """Create an organization and its first owner; a generated password is printed
        once."""
        password = None
        if owner_password_stdin:
            password = click.get_text_stream("stdin").read().rstrip("\n")
            if not password:
                raise click.UsageError("--owner-password-stdin: stdin held no password")
        organization, owner, generated = identity_for(config_file).create_organization(
            name, owner_email=owner_email, owner_password=password
        )
        click.echo(f"Organization {organization.name} ({organization.id})")
        click.echo(f"Owner {owner.email} ({owner.id})")
        if generated is not None:
            click.echo(f"Generated password (shown only once): {generated}")
