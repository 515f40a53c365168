"""``fuzzball cluster ...``: the clusters of the Federate the active context points at.

``list`` prints ``ID | NAME | KIND | STATUS`` as the Fuzzball article shows them (the Federate
itself included; a draining member's status is ``DRAINING``, an unreachable one's reason in
parentheses); ``show ID`` one cluster; ``-o json|yaml`` the API's reply, capacity included.
``registration-config`` (on a member's context) prints a registration for a Federate,
``join FILE`` (on the Federate's context) registers it, or, with ``--from-context NAME``,
generates it on that member context and registers it at once, the Federate trusted there (a
draining member joined again takes work again); ``leave ID`` removes a member, which is asked
to revoke the token it gave the Federate. Against an Orchestrate (which has no members)
``list`` says so rather than failing with a bare 404.
"""

from __future__ import annotations

import json
from typing import Any

import click
import yaml

from fuzzball_core.api.rest_messages import read_reply
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.client import FuzzballClient, path_segment
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound

_HEADERS = ["ID", "NAME", "KIND", "STATUS"]
GENERATE = "/admin/cluster/registration/configuration:generate"


def register(group: click.Group) -> None:
    """Add the cluster commands to the ``cluster`` group."""
    for command in (list_clusters, show_cluster, join_cluster, leave_cluster, registration):
        group.add_command(command)


def fetch_clusters(api: FuzzballClient) -> list[pb.Cluster]:
    """Federate's clusters; FailedPrecondition when the API is not a Federate's."""
    try:
        return api.list_clusters()
    except NotFound:
        raise FailedPrecondition(
            f"the API at {api.shown_url} is not a Federate (it has no member clusters);"
            " use a context that points at fuzzball-federate"
        ) from None


def _on_federate(api: FuzzballClient, method: str, path: str) -> Any:
    """``method`` on a Federate's cluster route; a NotFound from an API that is no Federate
    (it has no such route) is the FailedPrecondition :func:`fetch_clusters` says, not
    "no API path"."""
    try:
        return api.call_json(method, path)
    except NotFound:
        fetch_clusters(api)  # raises when the API is no Federate's
        raise


def status_text(cluster: pb.Cluster) -> str:
    """The STATUS cell: the enum's name, DRAINING for a draining member, and why."""
    if cluster.status == pb.CLUSTER_STATUS_DISABLED and cluster.status_reason == "draining":
        return "DRAINING"
    status = pb.ClusterStatus.Name(cluster.status)
    reason = cluster.status_reason or cluster.problem
    return f"{status} ({reason})" if reason else status


def _row(c: pb.Cluster) -> list[Any]:
    return [c.id, c.name, pb.ClusterKind.Name(c.kind), status_text(c)]


@click.command("list")
@output_option
@click.pass_obj
def list_clusters(state: CliState, output: str) -> None:
    """List the federation's clusters: ID | NAME | KIND | STATUS."""
    clusters = fetch_clusters(state.api)
    emit(
        pb.ListClustersResponse(clusters=clusters),
        output,
        headers=_HEADERS,
        rows=[_row(c) for c in clusters],
    )


@click.command("show")
@click.argument("cluster_id")
@output_option
@click.pass_obj
def show_cluster(state: CliState, cluster_id: str, output: str) -> None:
    """Show one cluster by id."""
    path = f"/cluster/{path_segment(cluster_id, 'cluster')}"
    cluster = read_reply(_on_federate(state.api, "GET", path), pb.Cluster)
    emit(cluster, output, headers=_HEADERS, rows=[_row(cluster)])


@click.command("leave")
@click.argument("cluster_id")
@click.pass_obj
def leave_cluster(state: CliState, cluster_id: str) -> None:
    """Remove member CLUSTER_ID from the federation (refused, the member draining, while
    federated workflows run there; `join` it again to take it back)."""
    _on_federate(state.api, "DELETE", f"/admin/cluster/{path_segment(cluster_id, 'cluster')}")
    click.echo(f'Cluster "{cluster_id}" left the federation.')


@click.command("registration-config")
@click.option("--federate-name", default="", help="The Federate's name (federate.name).")
@click.option(
    "--federate-jwk", default="", help="The Federate's public key as a JWK (JSON), to trust."
)
@click.pass_obj
def registration(state: CliState, federate_name: str, federate_jwk: str) -> None:
    """Print a registration of this context's cluster for a Federate (JSON; it holds an API
    token: keep it secret, hand it to `fuzzball cluster join` on the Federate)."""
    params = {"federateName": federate_name, "federateJwk": federate_jwk}
    reply = state.api.call_json("GET", GENERATE, params={k: v for k, v in params.items() if v})
    click.echo(json.dumps(reply.get("config", {}), indent=2))


@click.command("join")
@click.argument("file", required=False, type=click.Path(dir_okay=False, exists=True))
@click.option(
    "--from-context",
    "member_context",
    default=None,
    help="Generate the registration on this member context instead of reading FILE.",
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="NAME=VALUE",
    help="A label of the member for the router (price-per-hour, egress-price-per-gib, "
    "egress-gib-per-second, or a scoring plugin's); repeatable.",
)
@click.pass_obj
def join_cluster(
    state: CliState, file: str | None, member_context: str | None, labels: tuple[str, ...]
) -> None:
    """Register a member with the Federate of this context, from FILE (what
    `fuzzball cluster registration-config` printed) or from the context --from-context."""
    named = {}
    for label in labels:
        name, equals, value = label.partition("=")
        if not equals or not name:
            raise InvalidArgument(f"--label {label!r}: expected NAME=VALUE")
        named[name] = value
    if file is not None and member_context is None:
        config = _read_registration(file)
    elif member_context is not None and file is None:
        config = _generate_on(state, member_context)
    else:
        raise InvalidArgument("give either FILE or --from-context, not both or neither")
    body = {"config": config, **({"labels": named} if named else {})}
    reply = state.api.call_json("POST", "/admin/cluster/registration", body=body)
    name = config.get("name", "") if isinstance(config, dict) else ""
    click.echo(f'Cluster "{name}" joined as "{reply.get("id", "")}".')


def _read_registration(file: str) -> Any:
    """The registration in ``file`` (JSON or YAML; the configuration or the whole reply)."""
    try:
        with open(file, encoding="utf-8") as handle:
            loaded = yaml.safe_load(handle)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InvalidArgument(f"{file}: not a registration file ({exc})") from None
    return loaded.get("config", loaded) if isinstance(loaded, dict) else loaded


def _generate_on(state: CliState, member_context: str) -> Any:
    """A registration generated on the member context ``member_context`` for the Federate of
    the active one, which the member trusts from then on (its name and key as it lists
    itself)."""
    local = next((c for c in fetch_clusters(state.api) if c.local), None)
    if local is None:
        raise FailedPrecondition("this context's Federate does not list itself")
    chosen = state.contexts.get(member_context)
    with FuzzballClient.connect(
        chosen.address, chosen.token or None, verify=chosen.verify()
    ) as member:
        params = {"federateName": local.name, "federateJwk": local.jwk_public_key}
        return member.call_json("GET", GENERATE, params=params).get("config", {})
