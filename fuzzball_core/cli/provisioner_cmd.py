"""``fuzzball admin provisioner``: provisioner definitions and instances, through
``/v3/admin/provisioner/...`` (cluster administrators and the provisioner service account;
docs/provisioners.md).

* ``definition list|show ID``: the configured node shapes, their backend and cost;
* ``instance create DEFINITION [--count N] [--annotation K=V ...] [--ttl SECONDS]
  [--directive K=V ...]`` prints the new instances' ids; ``instance list``; ``instance show
  ID``; ``instance delete ID``.
"""

from __future__ import annotations

from typing import Any

import click

from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.client import path_segment
from fuzzball_core.spec.names import printable

_STATE_PREFIX = "ADMIN_PROVISIONER_INSTANCE_STATE_"


def _definition_path(definition_id: str) -> str:
    """``/admin/provisioner/definitions/<id>``, the id one path segment."""
    return f"/admin/provisioner/definitions/{path_segment(definition_id, 'definition')}"


def _instance_path(instance_id: str) -> str:
    """``/admin/provisioner/instances/<id>``, the id one path segment."""
    return f"/admin/provisioner/instances/{path_segment(instance_id, 'instance')}"


@click.group()
def provisioner() -> None:
    """Provisioner definitions and the instances made of them."""


@provisioner.group()
def definition() -> None:
    """Node shapes the cluster can provision (from provisioner.definitions)."""


@provisioner.group()
def instance() -> None:
    """Instances: nodes asked of a definition's driver."""


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint=option)
        pairs[key] = text
    return pairs


def _definition_row(found: dict[str, Any]) -> list[Any]:
    total = found.get("resource", {}).get("total", {})
    return [
        found["id"],
        found.get("backendId", ""),
        total.get("cpu", {}).get("cores", ""),
        total.get("mem", {}).get("bytes", ""),
        found.get("costPerHourEstimate", 0),
    ]


@definition.command("list")
@output_option
@click.pass_obj
def list_definitions(state: CliState, output: str) -> None:
    """List the provisioner definitions."""
    found = state.api.call_json("GET", "/admin/provisioner/definitions").get("definitions") or []
    headers = ["ID", "BACKEND", "CORES", "MEMORY", "COST/HOUR"]
    emit(found, output, headers=headers, rows=[_definition_row(d) for d in found])


@definition.command("show")
@click.argument("definition_id")
@output_option
@click.pass_obj
def show_definition(state: CliState, definition_id: str, output: str) -> None:
    """Show one provisioner definition."""
    found = state.api.call_json("GET", _definition_path(definition_id))
    headers = ["ID", "BACKEND", "CORES", "MEMORY", "COST/HOUR"]
    emit(found, output, headers=headers, rows=[_definition_row(found)])


def _instance_row(found: dict[str, Any]) -> list[Any]:
    return [
        found["id"],
        found.get("definitionId", ""),
        str(found.get("state", "")).removeprefix(_STATE_PREFIX),
        found.get("createTime", ""),
        found.get("deleteTime", ""),
    ]


_INSTANCE_HEADERS = ["ID", "DEFINITION", "STATE", "CREATED", "DELETED"]


@instance.command("create")
@click.argument("definition_id")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--annotation", "annotations", multiple=True, help="KEY=VALUE (repeatable).")
@click.option("--ttl", type=click.IntRange(min=1), default=None, help="Seconds it may live.")
@click.option(
    "--directive", "directives", multiple=True, help="KEY=VALUE for the driver (repeatable)."
)
@click.pass_obj
def create_instances(
    state: CliState,
    definition_id: str,
    count: int,
    annotations: tuple[str, ...],
    ttl: int | None,
    directives: tuple[str, ...],
) -> None:
    """Create COUNT instances of DEFINITION_ID now."""
    body: dict[str, Any] = {
        "definitionId": definition_id,
        "count": count,
        "annotations": _pairs(annotations, "--annotation"),
        "backendDirectives": _pairs(directives, "--directive"),
    }
    if ttl is not None:
        body["ttl"] = ttl
    answer = state.api.call_json("POST", "/admin/provisioner/instances", body=body)
    for new_id in answer.get("ids") or ():
        click.echo(printable(f"Created instance {new_id}"))


@instance.command("list")
@output_option
@click.pass_obj
def list_instances(state: CliState, output: str) -> None:
    """List the instances, oldest first."""
    found = state.api.call_json("GET", "/admin/provisioner/instances").get("instances") or []
    emit(found, output, headers=_INSTANCE_HEADERS, rows=[_instance_row(i) for i in found])


@instance.command("show")
@click.argument("instance_id")
@output_option
@click.pass_obj
def show_instance(state: CliState, instance_id: str, output: str) -> None:
    """Show one instance."""
    found = state.api.call_json("GET", _instance_path(instance_id))
    row = [*_instance_row(found), found.get("detail", "")]
    emit(found, output, headers=[*_INSTANCE_HEADERS, "DETAIL"], rows=[row])


@instance.command("delete")
@click.argument("instance_id")
@click.pass_obj
def delete_instance(state: CliState, instance_id: str) -> None:
    """Delete an instance now (once; deleting it again changes nothing)."""
    state.api.call_json("DELETE", _instance_path(instance_id))
    click.echo(printable(f"Deleted instance {instance_id}"))
