"""``fuzzball endpoint create|list|describe|delete``, and ``fuzzball workflow endpoints``
(deprecated in Fuzzball 4.4 for ``fuzzball endpoint list --workflow``), through the active
context's ``/v3/endpoints`` routes (docs/endpoints.md).

A persistent endpoint (``create NAME``) is a URL reserved for the account in use; a
workflow attaches to it by declaring an endpoint of that name with ``persistent: true``,
and the next workflow doing so takes it over by the endpoint's ``--strategy``: ``start``
stops the previous workflow at submission, ``ready`` once the new service is ready.
"""

from __future__ import annotations

from typing import Any

import click

from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.client import path_segment
from fuzzball_core.spec.names import printable

_HEADERS = ["NAME", "ID", "TYPE", "SCOPE", "PERSISTENT", "WORKFLOW", "SERVICE", "URL"]
_DESCRIBED = (
    ("Name", "name"),
    ("ID", "id"),
    ("URL", "url"),
    ("Type", "type"),
    ("Scope", "scope"),
    ("Protocol", "protocol"),
    ("Persistent", "persistent"),
    ("Strategy", "strategy"),
    ("Workflow", "workflowId"),
    ("Service", "service"),
    ("Taking over", "pendingWorkflowId"),
    ("Created", "createTime"),
    ("Updated", "updateTime"),
)


def _rows(found: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            e.get("name", ""),
            e.get("id", ""),
            e.get("type", ""),
            e.get("scope", ""),
            "yes" if e.get("persistent") else "no",
            e.get("workflowId") or "-",
            e.get("service") or "-",
            e.get("url") or "-",
        ]
        for e in found
    ]


def _list(state: CliState, workflow_id: str | None, output: str) -> None:
    """List the endpoints (of ``workflow_id`` only, when given)."""
    if workflow_id:
        # the list route filters by the id alone: a workflow that does not exist (or is
        # another organization's) would list as no endpoints, rather than as not found
        state.api.get_workflow(workflow_id)
    params = {"workflowId": workflow_id} if workflow_id else None
    found = state.api.call_json("GET", "/endpoints", params=params).get("endpoints") or []
    emit(found, output, headers=_HEADERS, rows=_rows(found))


def register(group: click.Group) -> None:
    """Add the endpoint commands to the ``fuzzball endpoint`` group."""

    @group.command("create")
    @click.argument("name")
    @click.option(
        "--scope",
        type=click.Choice(["user", "group", "organization", "public"]),
        default="group",
        show_default=True,
        help="Who may use it: you, the account in use, the organization, or anyone.",
    )
    @click.option(
        "--type",
        "kind",
        type=click.Choice(["path", "subdomain"]),
        default="path",
        show_default=True,
        help="/endpoints/ID/ on the proxy, or ID.<endpoints domain>.",
    )
    @click.option(
        "--strategy",
        type=click.Choice(["start", "ready"]),
        default="start",
        show_default=True,
        help="How a new workflow takes it over: stop the old one at submission, or once "
        "the new service is ready.",
    )
    @output_option
    @click.pass_obj
    def create(
        state: CliState, name: str, scope: str, kind: str, strategy: str, output: str
    ) -> None:
        """Reserve the persistent endpoint NAME (lowercase letters, digits, - and _)."""
        body = {"name": name, "scope": scope, "type": kind, "strategy": strategy}
        created = state.api.call_json("POST", "/endpoints", body=body)
        if output == "table":
            click.echo(printable(f"Created endpoint {name} ({created['id']}): {created['url']}"))
        else:
            emit(created, output)

    @group.command("list")
    @click.option("--workflow", "workflow_id", default=None, help="Only this workflow's.")
    @output_option
    @click.pass_obj
    def list_endpoints(state: CliState, workflow_id: str | None, output: str) -> None:
        """List the account's persistent endpoints and those of its running workflows."""
        _list(state, workflow_id, output)

    @group.command("describe")
    @click.argument("endpoint")
    @output_option
    @click.pass_obj
    def describe(state: CliState, endpoint: str, output: str) -> None:
        """Show one endpoint, by id or (a persistent one) by name."""
        found = state.api.call_json("GET", f"/endpoints/{path_segment(endpoint, 'endpoint')}")
        if output != "table":
            emit(found, output)
            return
        for label, key in _DESCRIBED:
            value = found.get(key)
            shown = ("yes" if value else "no") if isinstance(value, bool) else (value or "-")
            click.echo(printable(f"{label + ':':<13} {shown}"))

    @group.command("delete")
    @click.argument("endpoint")
    @click.pass_obj
    def delete(state: CliState, endpoint: str) -> None:
        """Delete a persistent endpoint no running workflow serves."""
        state.api.call_json("DELETE", f"/endpoints/{path_segment(endpoint, 'endpoint')}")
        click.echo(printable(f"Deleted endpoint {endpoint}"))


def register_workflow_alias(workflow: click.Group) -> None:
    """``fuzzball workflow endpoints WORKFLOW_ID``: lists them, and (click, on stderr) that
    the command is deprecated and what to use instead."""

    @workflow.command("endpoints", deprecated="use `fuzzball endpoint list --workflow ID`")
    @click.argument("workflow_id")
    @output_option
    @click.pass_obj
    def endpoints(state: CliState, workflow_id: str, output: str) -> None:
        """List a workflow's endpoints."""
        _list(state, workflow_id, output)
