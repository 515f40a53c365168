"""``fuzzball context create|use|list|login|logout|delete|token|update-user``: API addresses
and credentials."""

from __future__ import annotations

import click

from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.oidc_login import finish_device_login, password_grant, start_device_login
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.cli.sign_in import (
    choose_password,
    complete_login,
    must_choose_password,
    token_email,
)
from fuzzball_core.client import context_address
from fuzzball_core.errors import FailedPrecondition


def register(group: click.Group) -> None:
    """Add the context commands to the ``context`` group."""
    for command in (
        create_context,
        use_context,
        list_contexts,
        login,
        logout,
        delete_context,
        show_token,
        update_user,
    ):
        group.add_command(command)


@click.command("create")
@click.argument("name")
@click.option("--address", required=True, help="host:port or URL of the Fuzzball API.")
@click.option("--token", default="", help="API bearer token to store with the context.")
@click.option("--oidc-server-url", default="", help="OIDC realm URL used by 'context login'.")
@click.option(
    "--cafile",
    type=click.Path(exists=True, dir_okay=False, resolve_path=True),
    default=None,
    help="PEM file of the CA that signed the API's certificate (default: the system's roots),"
    " for the login server too.",
)
@click.pass_obj
def create_context(
    state: CliState,
    name: str,
    address: str,
    token: str,
    oidc_server_url: str,
    cafile: str | None,
) -> None:
    """Add context NAME for the API at ADDRESS (the first context becomes the active one)."""
    context_address(address)  # refused now, naming it, rather than at the first call
    contexts = state.contexts
    context = contexts.create(name, address, oidc_server_url=oidc_server_url, token=token)
    if cafile:
        context.ca_file = cafile
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
@click.option("--username", default=None, help="Log in with a password (no browser) as this user.")
@click.option(
    "--password", default=None, help="Password for --username (prompted for, hidden, if omitted)."
)
@click.pass_obj
def login(state: CliState, token: str | None, username: str | None, password: str | None) -> None:
    """Log in to the active context's API and keep its token.

    By default a code is shown to approve in a browser (the device login); with --username
    the password is asked for instead. The login is exchanged for the API token of the
    context's currentaccountid (your personal account when it has none), which is renewed
    with the login's refresh token when it expires. With --token, that token is stored as
    given (and never renewed).
    """
    contexts = state.contexts
    context = contexts.active()
    if token is not None:
        context.token = token
        context.refresh_token = ""  # a token given by hand is not renewed with an old login
        contexts.save()
        click.echo(f'Logged in to context "{context.name}".')
        return
    if not context.oidc_server_url:
        raise FailedPrecondition(
            f"context {context.name!r} has no oidcServerURL: pass --token TOKEN"
        )
    verify = context.verify()
    if username is not None or password is not None:
        username = username or click.prompt("Username")
        password = password or click.prompt("Password", hide_input=True)
        tokens = password_grant(context.oidc_server_url, username, password, verify=verify)
    else:
        device = start_device_login(context.oidc_server_url, verify=verify)
        click.echo(
            f"To log in, open {device.verification_uri_complete}\n"
            f"(or {device.verification_uri} and enter the code {device.user_code})."
        )
        tokens = finish_device_login(context.oidc_server_url, device, verify=verify)
    if must_choose_password(tokens):
        click.echo("Your password was reset: choose a new one now.")
        current = password or click.prompt("Current password", hide_input=True)
        chosen = click.prompt("New password", hide_input=True, confirmation_prompt=True)
        choose_password(context, tokens, current, chosen)
        # a new password ends the logins made before it: sign in again with the new one
        email = token_email(tokens.access_token) or username or ""
        tokens = password_grant(context.oidc_server_url, email, chosen, verify=verify)
    signed_in = complete_login(context, tokens)
    contexts.save()
    for note in signed_in.notes:
        click.echo(f"note: {note}", err=True)
    who = f" as {signed_in.email}" if signed_in.email else ""
    click.echo(
        f'Logged in to context "{context.name}"{who}, account {signed_in.account_name}'
        f" ({signed_in.account_id})."
    )


@click.command("logout")
@click.argument("name", required=False)
@click.pass_obj
def logout(state: CliState, name: str | None) -> None:
    """Remove the stored API and refresh tokens of context NAME (default: the active one).

    The tokens are removed from the contexts file only: an API token already handed out stays
    valid at the server until it expires."""
    contexts = state.contexts
    context = contexts.get(name) if name is not None else contexts.active()
    held = context.log_out()
    contexts.save()
    if held:
        click.echo(f'Logged out of context "{context.name}": its tokens are removed.')
    else:
        click.echo(f'Context "{context.name}" held no token.')


@click.command("delete")
@click.argument("name")
@click.pass_obj
def delete_context(state: CliState, name: str) -> None:
    """Remove context NAME and its stored tokens from the contexts file."""
    contexts = state.contexts
    was_active = contexts.active_name == name
    contexts.delete(name)
    contexts.save()
    if was_active:
        click.echo(
            f'Context "{name}" deleted. No context is active now: run'
            " 'fuzzball context use NAME'."
        )
    else:
        click.echo(f'Context "{name}" deleted.')


@click.command("token")
@click.pass_obj
def show_token(state: CliState) -> None:
    """Print the active context's API token (for curl and other clients)."""
    context = state.contexts.active()
    if not context.token:
        raise FailedPrecondition(
            f"context {context.name!r} holds no token: run 'fuzzball context login'"
        )
    click.echo(context.token)


@click.command("update-user")
@click.option(
    "--new-password",
    "new_password",
    is_flag=True,
    help="Change your password (the current and the new one are asked for, hidden).",
)
@click.pass_obj
def update_user(state: CliState, new_password: bool) -> None:
    """Change your own password. The new one must have at least 12 characters, upper and
    lower case letters, a digit and a special character, and not contain "fuzzball", your
    name or your email."""
    if not new_password:
        raise click.UsageError("say what to update: --new-password")
    current = click.prompt("Current password", hide_input=True)
    chosen = click.prompt("New password", hide_input=True, confirmation_prompt=True)
    body = {"currentPassword": current, "newPassword": chosen}
    state.api.call_json("POST", "/profile/password", body=body)
    click.echo("Password changed.")
    context = state.contexts.active()
    if context.refresh_token:
        # the issuer ends the logins made with the old password: this one cannot renew now
        context.refresh_token = ""
        state.contexts.save()
        click.echo(
            "Logins made with the old password can no longer renew their tokens: run"
            " 'fuzzball context login' to renew this context's before it expires."
        )
