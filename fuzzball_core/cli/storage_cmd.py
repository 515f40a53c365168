"""``fuzzball admin storage``: storage drivers and classes, through ``/v3/admin/drivers`` and
``/v3/admin/storage-classes`` (cluster administrators; docs/storage.md).

Definitions are YAML or JSON files in the swagger's shapes (DriverDefinition,
StorageClassDefinition); the fields accepted without effect come back as warnings on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml

from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import document_output_option, emit, output_option
from fuzzball_core.client import path_segment
from fuzzball_core.spec.names import printable


def _class_path(class_id: str, action: str = "") -> str:
    """``/admin/storage-classes/<id or name>`` and an ``action``, the id one path segment."""
    return f"/admin/storage-classes/{path_segment(class_id, 'storage class')}{action}"


@click.group()
def storage() -> None:
    """Storage drivers and storage classes of the cluster."""


@storage.group()
def driver() -> None:
    """Storage drivers (plugins of fuzzball.storage_drivers)."""


@storage.group("class")
def storage_class() -> None:
    """Storage classes: what volumes of each are (persistent, shared, limits)."""


def _definition(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise click.ClickException(f"{path}: not YAML or JSON ({exc})") from None


def _warn(answer: dict[str, Any]) -> None:
    for warning in answer.get("warnings") or ():
        click.echo(printable(f"warning: {warning}"), err=True)


_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@driver.command("install")
@click.argument("definition", type=_FILE)
@click.pass_obj
def install_driver(state: CliState, definition: Path) -> None:
    """Install the driver DEFINITION (a DriverDefinition file)."""
    answer = state.api.call_json("POST", "/admin/drivers", body={"driver": _definition(definition)})
    _warn(answer)
    click.echo(printable(f"Installed driver {answer['id']}"))


@driver.command("list")
@output_option
@click.pass_obj
def list_drivers(state: CliState, output: str) -> None:
    """List the installed storage drivers."""
    found = state.api.every_item("/admin/drivers", "drivers")
    rows = [
        [d["driver"].get("name", ""), d["id"], d["driver"].get("description", "")] for d in found
    ]
    emit(found, output, headers=["NAME", "ID", "DESCRIPTION"], rows=rows)


@driver.command("uninstall")
@click.argument("driver_id")
@click.pass_obj
def uninstall_driver(state: CliState, driver_id: str) -> None:
    """Uninstall a driver (by id or name) no storage class uses."""
    state.api.call_json("DELETE", f"/admin/drivers/{path_segment(driver_id, 'driver')}")
    click.echo(printable(f"Uninstalled driver {driver_id}"))


@storage_class.command("create")
@click.argument("definition", type=_FILE)
@click.pass_obj
def create_class(state: CliState, definition: Path) -> None:
    """Create the storage class DEFINITION (a StorageClassDefinition file)."""
    body = {"class": _definition(definition)}
    answer = state.api.call_json("POST", "/admin/storage-classes", body=body)
    _warn(answer)
    click.echo(printable(f"Created storage class {answer['id']}"))


@storage_class.command("update")
@click.argument("class_id")
@click.argument("definition", type=_FILE)
@click.pass_obj
def update_class(state: CliState, class_id: str, definition: Path) -> None:
    """Replace a storage class's definition (by id or name)."""
    body = {"class": _definition(definition)}
    answer = state.api.call_json("PUT", _class_path(class_id), body=body)
    _warn(answer)
    click.echo(printable(f"Updated storage class {class_id}"))


@storage_class.command("list")
@output_option
@click.pass_obj
def list_classes(state: CliState, output: str) -> None:
    """List the storage classes."""
    found = state.api.every_item("/admin/storage-classes", "classes")
    rows = [
        [
            c.get("name"),
            c.get("id"),
            c["class"].get("driver", ""),
            "yes" if c.get("persistent") else "no",
            "yes" if c.get("retain") else "no",
            str(c.get("status", "")).removeprefix("STORAGE_CLASS_STATUS_"),
        ]
        for c in found
    ]
    headers = ["NAME", "ID", "DRIVER", "PERSISTENT", "RETAIN", "STATUS"]
    emit(found, output, headers=headers, rows=rows)


@storage_class.command("describe")
@click.argument("class_id")
@document_output_option
@click.pass_obj
def describe_class(state: CliState, class_id: str, output: str) -> None:
    """Show a storage class (by id or name) with its definition, as YAML or JSON."""
    found = state.api.call_json("GET", _class_path(class_id, ":describe"))
    emit(found, output)


@storage_class.command("delete")
@click.argument("class_id")
@click.pass_obj
def delete_class(state: CliState, class_id: str) -> None:
    """Delete a storage class (by id or name) that holds no volume."""
    state.api.call_json("DELETE", _class_path(class_id))
    click.echo(printable(f"Deleted storage class {class_id}"))


@storage_class.command("disable")
@click.argument("class_id")
@click.pass_obj
def disable_class(state: CliState, class_id: str) -> None:
    """Disable a storage class: no volume of it is created or mounted."""
    state.api.call_json("PATCH", _class_path(class_id, ":disable"), body={})
    click.echo(printable(f"Disabled storage class {class_id}"))


@storage_class.command("enable")
@click.argument("class_id")
@click.pass_obj
def enable_class(state: CliState, class_id: str) -> None:
    """Enable a disabled storage class again."""
    state.api.call_json("PATCH", _class_path(class_id, ":enable"), body={})
    click.echo(printable(f"Enabled storage class {class_id}"))
