"""``fuzzball context create|use|list|login``: API addresses and credentials."""

from __future__ import annotations

import click

from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.oidc_login import password_grant
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.client import FuzzballClient
from fuzzball_core.errors import FailedPrecondition


def register(group: click.Group) -> None:
    """Add the context commands to the ``context`` group."""
    for command in (create_context, use_context, list_contexts, login):
        group.add_command(command)


@click.command("create")
@click.argument("name")
@click.option("--address", required=True, help="host:port or URL of the Fuzzball API.")
@click.option("--token", default="", help="API bearer token to store with the context.")
@click.option("--oidc-server-url", default="", help="OIDC realm URL used by 'context login'.")
@click.pass_obj
def create_context(
    state: CliState, name: str, address: str, token: str, oidc_server_url: str
) -> None:
    """Add context NAME for the API at ADDRESS (the first context becomes the active one)."""
    contexts = state.contexts
    contexts.create(name, address, oidc_server_url=oidc_server_url, token=token)
    contexts.save()
    active = " (active)" if contexts.active_name == name else ""
    click.echo(f'Context "{name}" created{active}.')


@click.command("use")
@click.argument("name")
@click.pass_obj
def use_context(state: CliState, name: str) -> None:
    """Make NAME the active context."""
    contexts = state.contexts
    contexts.use(name)
    contexts.save()
    click.echo(f'Switched to context "{name}".')


@click.command("list")
@output_option
@click.pass_obj
def list_contexts(state: CliState, output: str) -> None:
    """List the contexts (tokens are never shown)."""
    contexts = state.contexts
    summaries = [c.summary(active=c.name == contexts.active_name) for c in contexts.contexts]
    rows = [
        [
            "*" if s["active"] else "",
            s["name"],
            s["address"],
            s["currentaccountid"],
            "yes" if s["loggedIn"] else "no",
        ]
        for s in summaries
    ]
    emit(
        summaries,
        output,
        headers=["ACTIVE", "NAME", "ADDRESS", "ACCOUNT ID", "LOGGED IN"],
        rows=rows,
    )


@click.command("login")
@click.option("--token", default=None, help="Store this API token instead of logging in.")
@click.option("--username", default=None, help="User name for password login.")
@click.option("--password", default=None, help="Password (prompted for, hidden, if omitted).")
@click.pass_obj
def login(state: CliState, token: str | None, username: str | None, password: str | None) -> None:
    """Store credentials in the active context.

    With --token, the token is stored as given. Otherwise the context's oidcServerURL is asked
    for an access token with your user name and password; when the context has a
    currentaccountid, that token is exchanged for the account's API token.
    """
    contexts = state.contexts
    context = contexts.active()
    if token is None:
        if not context.oidc_server_url:
            raise FailedPrecondition(
                f"context {context.name!r} has no oidcServerURL: pass --token TOKEN"
            )
        username = username or click.prompt("Username")
        password = password or click.prompt("Password", hide_input=True)
        token = password_grant(context.oidc_server_url, username, password)
        if context.current_account_id:
            with FuzzballClient.connect(context.address, token) as api:
                token = api.account_token(context.current_account_id)
    context.token = token
    contexts.save()
    click.echo(f'Logged in to context "{context.name}".')
