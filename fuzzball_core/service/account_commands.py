"""The account commands of both API processes (``fuzzball-orchestrate``, ``fuzzball-federate``):
``create-account``, ``issue-token`` and ``revoke-token``, run on the server's own machine
against its store.

Tokens are printed once and never taken on the command line (where other users see it in
the process list): ``revoke-token`` reads the token to revoke from stdin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import click

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
        """Print a new bearer token for an existing account."""
        click.echo(service_for(config_file).issue_token(name))

    @group.command("revoke-token")
    @click.option("--account", "name", help="Revoke every token of this account instead.")
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
