"""``fuzzball local up|down|status``: the embedded single-machine deployment."""

from __future__ import annotations

import click

from fuzzball_core.cli import local as deployment
from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.local_owner import DEFAULT_ORGANIZATION, DEFAULT_OWNER, OwnerSignIn
from fuzzball_core.cli.output import emit, output_option


def register(group: click.Group) -> None:
    """Add the local deployment's commands to the ``local`` group."""
    group.add_command(up)
    group.add_command(down)
    group.add_command(status)


@click.command()
@click.option(
    "--timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds to wait for the node to become ready.",
)
@click.option(
    "--organization",
    default=DEFAULT_ORGANIZATION,
    show_default=True,
    help="Name of the organization the first 'up' creates.",
)
@click.option(
    "--owner-email",
    default=DEFAULT_OWNER,
    show_default=True,
    help="Email of that organization's owner, whom the CLI is signed in as.",
)
@click.option(
    "--no-monitoring",
    is_flag=True,
    help="Leave the bundled Prometheus and Alertmanager off (monitoring.enabled: false).",
)
@click.option(
    "--provisioner",
    type=click.Choice(["local"]),
    default=None,
    help="Start no node: provision nodes when work needs them (local: Substrate processes"
    " here), and tear them down when idle.",
)
@click.pass_obj
def up(
    state: CliState,
    timeout: float,
    organization: str,
    owner_email: str,
    no_monitoring: bool,
    provisioner: str | None,
) -> None:
    """Start Orchestrate (SQLite) and one Substrate here, and wait until the node is ready.

    The first 'up' creates an organization and its owner (with a generated password, shown
    once); every 'up' leaves the 'local' context signed in as that owner."""
    where = deployment.up(
        state.config_file,
        timeout=timeout,
        organization=organization,
        owner_email=owner_email,
        monitoring=not no_monitoring,
        provisioner=provisioner,
        progress=lambda message: click.echo(message, err=True),
    )
    click.echo(
        f"Fuzzball is up: API {where['api']} (context {where['context']!r},"
        f" node {', '.join(where['nodes']) or 'provisioned on demand'})"
    )
    click.echo(f"  data:   {where['data']}")
    click.echo(f"  config: {where['config']}")
    for process, log in where["logs"].items():
        click.echo(f"  {process} log: {log}")
    stack = where["monitoring"]
    if stack.get("problem"):
        click.echo(f"note: the monitoring stack is off: {stack['problem']}", err=True)
    elif stack.get("enabled"):
        urls = f"Prometheus {stack['prometheus']}, Alertmanager {stack['alertmanager']}"
        click.echo(f"  monitoring: {urls}")
    _tell_about_owner(where["owner"])


def _tell_about_owner(owner: OwnerSignIn) -> None:
    """Whom the CLI works as, the owner's password the one time it is generated, and how
    other people get in."""
    if owner.problem:
        click.echo(f"note: {owner.problem}", err=True)
    else:
        click.echo(f"Signed in as {owner.email}, owner of organization {owner.organization!r}.")
    if owner.generated_password is not None:
        click.echo(
            f"  {owner.email}'s password (shown once; kept in {owner.password_file}):"
            f" {owner.generated_password}"
        )
    # the local deployment's own CA: their context must name a copy of it
    cafile = f" --cafile {owner.ca_file}" if owner.ca_file else ""
    click.echo(
        "Others log in once the owner adds them:\n"
        "  fuzzball admin member add EMAIL        (prints their password)\n"
        "then, on their side:\n"
        f"  fuzzball context create NAME --address {owner.address}"
        f" --oidc-server-url {owner.issuer_url}{cafile}\n"
        "  fuzzball context login"
    )


@click.command()
@click.pass_obj
def down(state: CliState) -> None:
    """Stop the local Substrate and Orchestrate."""
    stopped = deployment.down(state.config_file)
    click.echo(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")


@click.command()
@output_option
@click.pass_obj
def status(state: CliState, output: str) -> None:
    """Show whether the local processes run and are ready, their health conditions (a
    failing one with its reason), and where their logs are."""
    report = deployment.status(state.config_file)
    rows = [
        [
            name,
            "running" if info["running"] else "stopped",
            {True: "yes", False: "no", None: "unknown"}[info["ready"]],
            info["pid"] or "",
            ", ".join(
                condition["name"]
                if condition["ok"]
                else f"{condition['name']}: {condition['message']}"
                for condition in info["conditions"]
            )
            or info.get("problem", ""),
            info["log"],
        ]
        for name, info in report.items()
    ]
    emit(
        report, output, headers=["PROCESS", "STATE", "READY", "PID", "CONDITIONS", "LOG"], rows=rows
    )
