"""``fuzzball secret create|list|describe|update|delete``: secrets through the active
context's API.

``--scope`` picks whose secret it is, and so the route: ``user`` and ``group`` (``account``
is group's old name) go to ``/secrets``, ``organization`` to ``/organization/secrets``,
``cluster`` to ``/admin/cluster/secrets``. A value secret's value comes from one of
``--value``, ``--from-file`` or stdin (both options together are refused); the other types
(``s3``, ``http``, ``image``, ``map``, ``decryption``) read a YAML or JSON object of the
swagger's fields from ``--from-file`` or stdin (``{"username": ..., "password": ...}``; a
map's is the map itself). Values are
never printed: reads show the public parts only, as the server answers them. ``describe``,
``update`` and ``delete`` take a secret's ID or its name in the scope.
"""

from __future__ import annotations

from typing import Any

import click
import yaml

from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.client import path_segment
from fuzzball_core.errors import NotFound
from fuzzball_core.spec.names import printable

#: each ``--scope`` word: the route and the scope it creates
_SCOPES = {
    "user": ("/secrets", "SECRET_SCOPE_USER"),
    "group": ("/secrets", "SECRET_SCOPE_GROUP"),
    "account": ("/secrets", "SECRET_SCOPE_GROUP"),
    "organization": ("/organization/secrets", "SECRET_SCOPE_ORGANIZATION"),
    "cluster": ("/admin/cluster/secrets", "SECRET_SCOPE_CLUSTER"),
}
_TYPES = ("value", "s3", "http", "image", "map", "decryption")
#: the body field of each type the server names (SecretType)
_FIELD_OF_TYPE = {
    "SECRET_TYPE_VALUE": "value",
    "SECRET_TYPE_S3": "s3",
    "SECRET_TYPE_HTTP": "http",
    "SECRET_TYPE_IMAGE": "image",
    "SECRET_TYPE_MAP": "map",
    "SECRET_TYPE_DECRYPTION_SIF": "decryption",
}

_SCOPE_OPTION = click.option(
    "--scope",
    type=click.Choice(sorted(_SCOPES)),
    default="user",
    show_default=True,
    help="Whose secret: yours, the account in use's (group), the organization's or the cluster's.",
)
_VALUE_OPTIONS = [
    click.option(
        "--value",
        default=None,
        help="A value secret's value (visible in the process list; prefer --from-file or stdin).",
    ),
    click.option(
        "--from-file",
        "from_file",
        type=click.File("r"),
        default=None,
        help="Read the value (a value secret) or the YAML/JSON object of fields from a file.",
    ),
]


def _with_value_options(command: Any) -> Any:
    for option in reversed(_VALUE_OPTIONS):
        command = option(command)
    return command


@click.group()
def secret() -> None:
    """Manage secrets (values are never shown)."""


def _content(kind: str, value: str | None, source: Any) -> dict[str, Any]:
    """The body field of a ``kind`` secret: from ``--value``, the file, or stdin (one
    source: given both, neither is dropped silently)."""
    if value is not None and source is not None:
        raise click.UsageError("--value and --from-file are mutually exclusive: give one")
    if value is not None:
        if kind != "value":
            raise click.UsageError(
                f"--value sets a value secret; give a {kind} secret's fields"
                " with --from-file or on stdin"
            )
        return {"value": value}
    text = (source or click.get_text_stream("stdin")).read()
    if kind == "value":
        if not text:
            raise click.UsageError("give the value with --value, --from-file or on stdin")
        return {"value": text.removesuffix("\n")}
    try:
        fields = yaml.safe_load(text)
    except yaml.YAMLError:
        raise click.UsageError(f"the {kind} secret's fields are not YAML or JSON") from None
    if not isinstance(fields, dict):
        raise click.UsageError(f"the {kind} secret's fields must be an object")
    return {"map": fields} if kind == "map" else fields


def _rows(found: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            printable(str(s.get("id", ""))),
            printable(str(s.get("name", ""))),
            str(s.get("scope", "")).removeprefix("SECRET_SCOPE_"),
            str(s.get("type", "")).removeprefix("SECRET_TYPE_"),
            printable(str(s.get("reference", ""))),
            s.get("updateTime", ""),
        ]
        for s in found
    ]


_HEADERS = ["ID", "NAME", "SCOPE", "TYPE", "REFERENCE", "UPDATED"]


@secret.command("create")
@click.argument("name")
@_SCOPE_OPTION
@click.option("--type", "kind", type=click.Choice(_TYPES), default="value", show_default=True)
@click.option("--private", is_flag=True, help="An organization secret its owners alone see.")
@_with_value_options
@click.pass_obj
def create(
    state: CliState,
    name: str,
    scope: str,
    kind: str,
    private: bool,
    value: str | None,
    from_file: Any,
) -> None:
    """Create secret NAME; prints its id (workflows refer to it as secret://SCOPE/NAME)."""
    path, scope_name = _SCOPES[scope]
    body: dict[str, Any] = {
        "name": name,
        "scope": scope_name,
        kind: _content(kind, value, from_file),
    }
    if private:
        body["private"] = True
    created = state.api.call_json("PUT", path, body=body)
    click.echo(printable(f"Created secret {name} ({created['id']})"))


def _listed(state: CliState, scope: str) -> list[dict[str, Any]]:
    """Every secret of the scope's route, page after page."""
    return state.api.every_item(_SCOPES[scope][0], "secrets")


def _on_secret(state: CliState, scope: str, given: str, method: str, **body: Any) -> Any:
    """``method`` on the secret ``given``: its ID, else its name among the scope's secrets
    (the name ``secret list`` shows, which workflows use in ``secret://SCOPE/NAME``)."""
    route, scope_name = _SCOPES[scope]
    try:
        return state.api.call_json(method, f"{route}/{path_segment(given, 'secret')}", **body)
    except NotFound:
        named = [
            s
            for s in _listed(state, scope)
            if s.get("name") == given and s.get("scope") == scope_name
        ]
        if len(named) != 1:
            raise NotFound(f"no {scope} secret has the ID or name {given!r}") from None
        secret_id = str(named[0]["id"])
    return state.api.call_json(method, f"{route}/{path_segment(secret_id, 'secret')}", **body)


@secret.command("list")
@_SCOPE_OPTION
@output_option
@click.pass_obj
def list_secrets(state: CliState, scope: str, output: str) -> None:
    """List the secrets of the scope's route (user and group secrets together)."""
    found = _listed(state, scope)
    emit(found, output, headers=_HEADERS, rows=_rows(found))


@secret.command("describe")
@click.argument("secret")
@_SCOPE_OPTION
@output_option
@click.pass_obj
def describe(state: CliState, secret: str, scope: str, output: str) -> None:
    """Show one secret, by ID or name (its public parts: never its value)."""
    found = _on_secret(state, scope, secret, "GET")
    emit(found, output, headers=_HEADERS, rows=_rows([found]))


@secret.command("update")
@click.argument("secret")
@_SCOPE_OPTION
@_with_value_options
@click.pass_obj
def update(state: CliState, secret: str, scope: str, value: str | None, from_file: Any) -> None:
    """Replace a secret's value (or fields), by ID or name, with new ones of its type."""
    found = _on_secret(state, scope, secret, "GET")
    kind = _FIELD_OF_TYPE.get(str(found.get("type")), "value")
    route = _SCOPES[scope][0]
    body = {kind: _content(kind, value, from_file)}
    state.api.call_json("PATCH", f"{route}/{path_segment(str(found['id']), 'secret')}", body=body)
    click.echo(printable(f"Updated secret {secret}"))


@secret.command("delete")
@click.argument("secret")
@_SCOPE_OPTION
@click.pass_obj
def delete(state: CliState, secret: str, scope: str) -> None:
    """Delete a secret, by ID or name."""
    _on_secret(state, scope, secret, "DELETE")
    click.echo(printable(f"Deleted secret {secret}"))
