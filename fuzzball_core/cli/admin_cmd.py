"""``fuzzball admin ...``: organizations, their members, the cluster's service accounts and
the audit log, through the active context's API (as a cluster administrator, or an
organization's owner for its own members).

* ``organization create NAME --owner-email E [--owner-password P]`` prints the owner's
  generated password once when none was given; ``organization list``;
* ``member add|list|remove|reset-password`` act on the caller's organization, or the one
  ``--organization`` names (its id or name; cluster administrators only);
* ``service-account create NAME --kind monitoring|provisioner|admin`` prints the account's
  token once; ``service-account list``;
* ``audit list`` pages (``--limit``, ``--page-token``), orders (``--oldest-first``) and
  filters (``--action``, ``--actor``, ``--organization``, ``--outcome``, ``--since``,
  ``--until``) the audit log, newest first.

Listings take ``-o table|json|yaml`` like every other command.
"""

from __future__ import annotations

from typing import Any

import click

from fuzzball_core.cli.central_config_cmd import central_config
from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.monitoring_cmd import monitoring
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.cli.provisioner_cmd import provisioner
from fuzzball_core.cli.storage_cmd import storage
from fuzzball_core.client import FuzzballClient, path_segment
from fuzzball_core.spec.names import printable
from fuzzball_core.vocabulary import SERVICE_ACCOUNT_KINDS, AuditAction, OrganizationRole

_ROLES = {"member": OrganizationRole.MEMBER.value, "owner": OrganizationRole.OWNER.value}
_ORGANIZATION_OPTION = click.option(
    "--organization",
    default=None,
    help="The organization (id or name) to act on; cluster administrators only."
    " Default: the caller's own.",
)


def _member_path(user_id: str, rest: str = "") -> str:
    """``/organization/members/<id>`` and ``rest``, the id one path segment."""
    return f"/organization/members/{path_segment(user_id, 'member')}{rest}"


@click.group()
def admin() -> None:
    """Administer organizations, members, service accounts and the audit log."""


admin.add_command(monitoring)  # issue-cert (issue 15)
admin.add_command(storage)  # drivers and storage classes (issue 13)
admin.add_command(provisioner)  # definitions and instances (issue 14)
admin.add_command(central_config)  # config get|set|history (issue 14)


@admin.group()
def organization() -> None:
    """The cluster's organizations (cluster administrators)."""


@admin.group()
def member() -> None:
    """The members of an organization."""


@admin.group("service-account")
def service_account() -> None:
    """The cluster's service accounts (cluster administrators)."""


@admin.group()
def audit() -> None:
    """The audit log (cluster administrators)."""


# -- helpers --------------------------------------------------------------------------------


def _organization_params(api: FuzzballClient, organization: str | None) -> dict[str, str]:
    """The ``organizationId`` query parameter for ``--organization`` (an id, or a name
    looked up among the cluster's organizations)."""
    if organization is None:
        return {}
    for known in _all(api, "/admin/organizations", "organizations"):
        if organization in (known.get("id"), known.get("name")):
            return {"organizationId": str(known["id"])}
    raise click.UsageError(f"--organization: no organization {organization!r}")


def _all(api: FuzzballClient, path: str, key: str, params: dict[str, str] | None = None) -> list:
    """Every item of a paged list route."""
    return api.every_item(path, key, params)


def _member_id(api: FuzzballClient, user: str, params: dict[str, str]) -> str:
    """The id of member ``user`` (an id or an email) of the organization ``params`` name."""
    for known in _all(api, "/organization/members", "users", params):
        if user in (known.get("id"), known.get("email")):
            return str(known["id"])
    raise click.UsageError(f"no member {user!r} in the organization")


def _say(text: str) -> None:
    """One line of what the server answered, escaped for the terminal."""
    click.echo(printable(text))


# -- organizations --------------------------------------------------------------------------


@organization.command("create")
@click.argument("name")
@click.option("--owner-email", required=True, help="The email its first owner signs in with.")
@click.option(
    "--owner-password",
    default=None,
    help="The owner's password (it must meet the password policy); generated and printed"
    " once when left out.",
)
@click.pass_obj
def create_organization(
    state: CliState, name: str, owner_email: str, owner_password: str | None
) -> None:
    """Create an organization and its first owner."""
    body = {"name": name, "ownerEmail": owner_email}
    if owner_password is not None:
        body["ownerPassword"] = owner_password
    created = state.api.call_json("POST", "/admin/organizations", body=body)
    _say(f"Organization {created['organization']['name']} ({created['organization']['id']})")
    _say(f"Owner {created['owner']['email']} ({created['owner']['id']})")
    if created.get("generatedPassword"):
        click.echo(f"Generated password (shown only once): {created['generatedPassword']}")


@organization.command("list")
@output_option
@click.pass_obj
def list_organizations(state: CliState, output: str) -> None:
    """List the cluster's organizations."""
    found = _all(state.api, "/admin/organizations", "organizations")
    rows = [[o.get("id"), o.get("name"), o.get("createTime")] for o in found]
    emit(found, output, headers=["ID", "NAME", "CREATED"], rows=rows)


# -- members --------------------------------------------------------------------------------


@member.command("add")
@click.argument("email")
@click.option("--role", type=click.Choice(sorted(_ROLES)), default="member", show_default=True)
@click.option(
    "--password",
    default=None,
    help="Their password (it must meet the password policy); generated and printed once when"
    " left out.",
)
@click.option("--cluster-admin", is_flag=True, help="Make them a cluster administrator.")
@click.option(
    "--require-update", is_flag=True, help="They must choose a new password when signing in."
)
@_ORGANIZATION_OPTION
@click.pass_obj
def add_member(
    state: CliState,
    email: str,
    role: str,
    password: str | None,
    cluster_admin: bool,
    require_update: bool,
    organization: str | None,
) -> None:
    """Add a member to an organization."""
    api = state.api
    body: dict[str, Any] = {
        "email": email,
        "relationship": _ROLES[role],
        "clusterAdmin": cluster_admin,
        "requireUpdatePassword": require_update,
    }
    if password is not None:
        body["password"] = password
    params = _organization_params(api, organization)
    added = api.call_json("POST", "/v2/organization/members", params=params, body=body)
    _say(f"Added {added['user']['email']} ({added['user']['id']}) as {role}")
    if added.get("generatedPassword"):
        click.echo(f"Generated password (shown only once): {added['generatedPassword']}")


@member.command("list")
@_ORGANIZATION_OPTION
@output_option
@click.pass_obj
def list_members(state: CliState, organization: str | None, output: str) -> None:
    """List the members of an organization."""
    api = state.api
    found = _all(api, "/organization/members", "users", _organization_params(api, organization))
    rows = [
        [
            u.get("id"),
            u.get("email"),
            u.get("relationship"),
            "yes" if u.get("clusterAdmin") else "no",
            u.get("lastActiveTime", "-"),
        ]
        for u in found
    ]
    emit(
        found,
        output,
        headers=["ID", "EMAIL", "ROLE", "CLUSTER ADMIN", "LAST LOGIN"],
        rows=rows,
    )


@member.command("remove")
@click.argument("user")
@_ORGANIZATION_OPTION
@click.pass_obj
def remove_member(state: CliState, user: str, organization: str | None) -> None:
    """Remove a member (by id or email); their tokens stop working."""
    api = state.api
    user_id = _member_id(api, user, _organization_params(api, organization))
    api.call_json("DELETE", _member_path(user_id))
    _say(f"Removed {user}.")


@member.command("reset-password")
@click.argument("user")
@click.option(
    "--password",
    default=None,
    help="The new password (it must meet the policy); generated and printed once when left out.",
)
@click.option(
    "--require-update", is_flag=True, help="They must choose a new password when signing in."
)
@_ORGANIZATION_OPTION
@click.pass_obj
def reset_password(
    state: CliState,
    user: str,
    password: str | None,
    require_update: bool,
    organization: str | None,
) -> None:
    """Reset a member's password (by id or email); their lockout ends."""
    api = state.api
    user_id = _member_id(api, user, _organization_params(api, organization))
    body: dict[str, Any] = {"requireUpdatePassword": require_update}
    if password is not None:
        body["newPassword"] = password
    reset = api.call_json("POST", _member_path(user_id, "/password"), body=body)
    _say(f"Reset the password of {user}.")
    if reset.get("generatedPassword"):
        click.echo(f"Generated password (shown only once): {reset['generatedPassword']}")


# -- service accounts -----------------------------------------------------------------------


@service_account.command("create")
@click.argument("name")
@click.option(
    "--kind",
    type=click.Choice(sorted(k.value for k in SERVICE_ACCOUNT_KINDS)),
    required=True,
    help="What it does: monitoring and provisioner place node holds as themselves; admin"
    " administers the cluster.",
)
@click.pass_obj
def create_service_account(state: CliState, name: str, kind: str) -> None:
    """Create a service account and print its bearer token (shown only once)."""
    created = state.api.call_json(
        "POST", "/admin/service-accounts", body={"name": name, "kind": kind}
    )
    click.echo(created["token"])


@service_account.command("list")
@output_option
@click.pass_obj
def list_service_accounts(state: CliState, output: str) -> None:
    """List the cluster's service accounts."""
    found = _all(state.api, "/admin/service-accounts", "accounts")
    rows = [[a.get("id"), a.get("name"), a.get("kind"), a.get("createTime")] for a in found]
    emit(found, output, headers=["ID", "NAME", "KIND", "CREATED"], rows=rows)


# -- the audit log --------------------------------------------------------------------------


@audit.command("list")
@click.option("--action", type=click.Choice([a.value for a in AuditAction]), default=None)
@click.option("--actor", default=None, help="Who acted: an email or an account's name.")
@click.option("--organization", default=None, help="Entries of this organization (its id or name).")
@click.option("--outcome", type=click.Choice(["ok", "denied", "failed"]), default=None)
@click.option("--since", default=None, help="From this time on (RFC 3339, or epoch seconds).")
@click.option("--until", default=None, help="Before this time (RFC 3339, or epoch seconds).")
@click.option("--oldest-first", is_flag=True, help="Oldest first (default: newest first).")
@click.option(
    "--limit", type=click.IntRange(1, 500), default=50, show_default=True, help="Per page."
)
@click.option("--page-token", default="", help="The page after the one that printed it.")
@output_option
@click.pass_obj
def list_audit(
    state: CliState,
    action: str | None,
    actor: str | None,
    organization: str | None,
    outcome: str | None,
    since: str | None,
    until: str | None,
    oldest_first: bool,
    limit: int,
    page_token: str,
    output: str,
) -> None:
    """One page of the audit log, newest first."""
    api = state.api
    asked = {
        "action": action,
        "actor": actor,
        # a name is looked up as 'admin member list' does: it never silently matches nothing
        **_organization_params(api, organization),
        "outcome": outcome,
        "since": since,
        "until": until,
        "orderBy": "time asc" if oldest_first else None,
        "pageSize": str(limit),
        "pageToken": page_token,
    }
    params = {name: value for name, value in asked.items() if value}
    page = api.call_json("GET", "/admin/audit", params=params)
    entries = page.get("entries") or []
    rows = [
        [
            e.get("seq"),
            e.get("time"),
            e.get("action"),
            e.get("outcome"),
            e.get("actor", ""),
            e.get("target", ""),
            e.get("source", ""),
        ]
        for e in entries
    ]
    if output != "table":
        emit({"entries": entries, "pageToken": page.get("pageToken", "")}, output)
        return
    emit(
        entries,
        output,
        headers=["SEQ", "TIME", "ACTION", "OUTCOME", "ACTOR", "TARGET", "SOURCE"],
        rows=rows,
    )
    if page.get("pageToken"):
        click.echo(f"More: --page-token {page['pageToken']}", err=True)
