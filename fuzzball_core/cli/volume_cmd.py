"""``fuzzball volume create|list|describe|delete``, through the active context's
``/v3/volumes`` routes (docs/storage.md).

A volume is named the way workflows refer to it: ``volume://user/persistent/results`` is the
volume ``results`` of class ``persistent`` (scope ``user``: yours; ``group``: the account in
use). ``describe`` and ``delete`` take its id, that reference, or its name (a user volume
before a group one; a name two classes share is refused, listing their references).
"""

from __future__ import annotations

from typing import Any

import click

from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.client import path_segment
from fuzzball_core.errors import FuzzballError, NotFound
from fuzzball_core.scheduling import format_bytes
from fuzzball_core.spec.names import printable

_HEADERS = ["NAME", "ID", "REFERENCE", "STATUS", "NODE", "SIZE", "ACCESSED"]
_DESCRIBED = (
    ("Name", "name"),
    ("ID", "id"),
    ("Reference", "reference"),
    ("Class", "storageClass"),
    ("Scope", "scope"),
    ("Status", "status"),
    ("Node", "node"),
    ("Size", "size"),
    ("Display name", "displayName"),
    ("Description", "description"),
    ("Created", "createTime"),
    ("Accessed", "accessTime"),
)


def _node_names(state: CliState, volumes: list[dict[str, Any]]) -> dict[str, str]:
    """Node id -> name for the nodes holding node-local ``volumes``, as the node list
    names them (empty where none does, or the caller may not list nodes: ids are shown)."""
    if not any(v.get("node") for v in volumes):
        return {}
    try:
        return {node.id: node.name for node in state.api.list_nodes()}
    except FuzzballError:
        return {}


def _shown(volume: dict[str, Any], names: dict[str, str]) -> dict[str, str]:
    """The fields a table shows as the node commands show theirs: the status without its
    enum prefix, the node by name, the size in binary units."""
    node = volume.get("node") or ""
    size = int(volume.get("sizeBytes") or 0)
    return {
        "status": str(volume.get("status", "")).removeprefix("VOLUME_STATUS_"),
        "node": names.get(node, node) or "-",
        "size": format_bytes(size),
    }


def _rows(found: list[dict[str, Any]], names: dict[str, str]) -> list[list[Any]]:
    rows = []
    for v in found:
        shown = _shown(v, names)
        rows.append(
            [
                v.get("name", ""),
                v.get("id", ""),
                v.get("reference", ""),
                shown["status"],
                shown["node"],
                shown["size"],
                v.get("accessTime") or "-",
            ]
        )
    return rows


def _find(state: CliState, volume: str) -> dict[str, Any]:
    """A volume by its reference, its id, or its name among the caller's volumes (the user's
    first, then the group's, as ``volume list`` shows them)."""
    if volume.startswith("volume://"):
        for candidate in state.api.every_item("/volumes", "volumes"):
            if candidate.get("reference") == volume:
                return dict(candidate)
        raise click.ClickException(f"no volume {volume}")
    try:
        found: dict[str, Any] = state.api.call_json(
            "GET", f"/volumes/{path_segment(volume, 'volume')}"
        )
        return found
    except NotFound:
        return _named(state, volume)


def _named(state: CliState, name: str) -> dict[str, Any]:
    """The caller's volume called ``name``: a user volume before a group one; names that
    two classes share in one scope are refused, listing their references."""
    named = [v for v in state.api.every_item("/volumes", "volumes") if v.get("name") == name]
    for scope in ("user", "group"):
        matching = [
            v for v in named if str(v.get("reference", "")).startswith(f"volume://{scope}/")
        ]
        if len(matching) == 1:
            return dict(matching[0])
        if matching:
            references = ", ".join(str(v.get("reference")) for v in matching)
            raise click.UsageError(
                f"{len(matching)} {scope} volumes are called {name!r}: give the one meant by"
                f" its reference ({references}) or id"
            )
    raise NotFound(
        f"volume {name!r} not found: give a volume's id, name or reference"
        " (volume://SCOPE/CLASS/NAME), as 'fuzzball volume list' shows them"
    )


def register(group: click.Group) -> None:
    """Add the volume commands to the ``fuzzball volume`` group."""

    @group.command("create")
    @click.argument("name")
    @click.option(
        "--class",
        "storage_class",
        default="persistent",
        show_default=True,
        help="Its storage class (fuzzball volume classes lists them).",
    )
    @click.option(
        "--scope",
        type=click.Choice(["user", "group"]),
        default="user",
        show_default=True,
        help="Yours, or the account in use's (shared by its members).",
    )
    @click.option("--display-name", default="", help="A longer name shown in listings.")
    @click.option("--description", default="", help="What it holds.")
    @click.pass_obj
    def create(
        state: CliState,
        name: str,
        storage_class: str,
        scope: str,
        display_name: str,
        description: str,
    ) -> None:
        """Create the persistent volume NAME (volume://SCOPE/CLASS/NAME)."""
        body = {
            "volume": {
                "name": name,
                "storageClassName": storage_class,
                "scope": scope,
                "displayName": display_name,
                "description": description,
            }
        }
        created = state.api.call_json("POST", "/volumes", body=body)
        reference = f"volume://{scope}/{storage_class}/{name}"
        click.echo(printable(f"Created volume {reference} ({created['id']})"))

    @group.command("list")
    @output_option
    @click.pass_obj
    def list_volumes(state: CliState, output: str) -> None:
        """List your volumes and the account's, with the node holding node-local ones."""
        found = state.api.every_item("/volumes", "volumes")
        names = _node_names(state, found) if output == "table" else {}
        emit(found, output, headers=_HEADERS, rows=_rows(found, names))

    @group.command("describe")
    @click.argument("volume")
    @output_option
    @click.pass_obj
    def describe(state: CliState, volume: str, output: str) -> None:
        """Show one volume, by id, name or reference."""
        found = _find(state, volume)
        if output != "table":
            emit(found, output)
            return
        shown = _shown(found, _node_names(state, [found]))
        for label, key in _DESCRIBED:
            value = shown[key] if key in shown else found.get(key)
            click.echo(printable(f"{label + ':':<14} {value or '-'}"))

    @group.command("delete")
    @click.argument("volume")
    @click.pass_obj
    def delete(state: CliState, volume: str) -> None:
        """Delete a volume, by id, name or reference (its data is kept when its class
        retains)."""
        found = _find(state, volume)
        answer = state.api.call_json("DELETE", f"/volumes/{path_segment(found['id'], 'volume')}")
        if answer.get("retained"):
            data = " (its data is retained by its storage class)"
        elif answer.get("status") == "VOLUME_STATUS_DELETED":
            data = " (its data is removed)"
        else:  # a node removes it, now or when it next connects
            data = " (its data is being removed from its node)"
        click.echo(printable(f"Deleted volume {found.get('reference', volume)}{data}"))

    @group.command("classes")
    @output_option
    @click.pass_obj
    def classes(state: CliState, output: str) -> None:
        """List the storage classes volumes may use."""
        found = state.api.every_item("/storage-classes", "classes")
        rows = [
            [c.get("name"), "yes" if c.get("persistent") else "no", c.get("status", "")]
            for c in found
        ]
        emit(found, output, headers=["CLASS", "PERSISTENT", "STATUS"], rows=rows)
