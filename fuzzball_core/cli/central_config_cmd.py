"""``fuzzball admin config``: the cluster's central configuration (``/v3/admin/centralconfig``,
cluster administrators; docs/provisioners.md), a YAML document kept with every revision.

* ``get [--revision N]`` prints a revision's document (the newest without ``--revision``):
  as stored with ``-o yaml`` (the default: comments and order kept), as JSON with ``-o json``;
  the server shows its credentials (a driver's secret settings) as ``<redacted>``;
* ``set FILE`` (``-`` for standard input) makes FILE the next revision, in force at once; the
  server refuses what it may not hold, naming it, and keeps the stored value of a credential
  FILE gives as ``<redacted>`` (so ``get``, edit, ``set`` keeps them);
* ``history`` lists the revisions and when each was set (``-o table|json|yaml``).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import click
import yaml

from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.spec.names import printable

_PATH = "/admin/centralconfig"


@click.group("config")
def central_config() -> None:
    """The central configuration (provisioner definitions set without a restart)."""


def _document(answer: Any) -> str:
    """The document text of a GetConfig reply (base64 ``config``)."""
    encoded = answer.get("config", "") if isinstance(answer, dict) else ""
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        raise click.ClickException("the server's reply holds no readable document") from None


@central_config.command("get")
@click.option(
    "--revision",
    type=click.IntRange(min=0),
    default=0,
    help="The revision to show (default: the newest).",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Choice(["yaml", "json"]),
    default="yaml",
    show_default=True,
    help="yaml: the document as stored; json: its content as JSON.",
)
@click.pass_obj
def get_config(state: CliState, revision: int, output: str) -> None:
    """Print the central configuration's document."""
    params = {"revision": str(revision)} if revision else None
    text = _document(state.api.call_json("GET", _PATH, params=params))
    if not text.strip() and not revision:
        # nothing stored: an empty document says so on stderr, not as a blank line alone
        click.echo("note: no central configuration is stored yet ('admin config set')", err=True)
    if output == "json":
        click.echo(json.dumps(yaml.safe_load(text) or {}, indent=2))
    else:
        click.echo(printable(text.rstrip("\n"), keep_newlines=True))


@central_config.command("set")
@click.argument("document", type=click.File("rb"))
@click.pass_obj
def set_config(state: CliState, document: Any) -> None:
    """Make DOCUMENT (a YAML file, or - for standard input) the next revision."""
    raw = document.read()
    try:
        yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        # said here, with the line, before anything is sent
        raise click.ClickException(f"{document.name}: not a YAML document: {exc}") from None
    state.api.call_json("POST", _PATH, body={"config": base64.b64encode(raw).decode()})
    revisions = state.api.call_json("GET", f"{_PATH}/revisions").get("revisions") or []
    newest = revisions[-1]["revision"] if revisions else "?"
    click.echo(printable(f"Central configuration set: revision {newest}"))


@central_config.command("history")
@output_option
@click.pass_obj
def config_history(state: CliState, output: str) -> None:
    """List the central configuration's revisions, oldest first."""
    revisions = state.api.call_json("GET", f"{_PATH}/revisions").get("revisions") or []
    rows = [[r.get("revision", ""), r.get("createdTime", "")] for r in revisions]
    emit(revisions, output, headers=["REVISION", "CREATED"], rows=rows)
