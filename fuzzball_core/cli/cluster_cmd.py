"""``fuzzball cluster ...``: the member clusters of the Federate the active context points at.

``list`` shows each member with its health, ready nodes and free cores, memory and GPUs, as
Federate's ``GET /v3/clusters`` reports them. Against an Orchestrate (which has no members)
it says so rather than failing with a bare 404.
"""

from __future__ import annotations

import click

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.cli.context import CliState
from fuzzball_core.cli.output import emit, output_option
from fuzzball_core.client import FuzzballClient
from fuzzball_core.errors import FailedPrecondition, NotFound

#: The device kind the GPUS column counts.
GPU_DEVICE = "nvidia.com/gpu"
_HEADERS = ["NAME", "KIND", "STATUS", "NODES", "FREE CORES", "FREE MEMORY", "FREE GPUS", "LABELS"]


def register(group: click.Group) -> None:
    """Add the cluster commands to the ``cluster`` group."""
    group.add_command(list_clusters)


def fetch_clusters(api: FuzzballClient) -> list[pb.Cluster]:
    """Federate's member clusters; FailedPrecondition when the API is not a Federate's."""
    try:
        return api.list_clusters()
    except NotFound:
        raise FailedPrecondition(
            f"the API at {api.base_url} is not a Federate (it has no member clusters);"
            " use a context that points at fuzzball-federate"
        ) from None


def _status(cluster: pb.Cluster) -> str:
    status = pb.ClusterStatus.Name(cluster.status).removeprefix("CLUSTER_STATUS_")
    return f"{status} ({cluster.problem})" if cluster.problem else status


@click.command("list")
@output_option
@click.pass_obj
def list_clusters(state: CliState, output: str) -> None:
    """List the member clusters with their health, nodes and free capacity."""
    clusters = fetch_clusters(state.api)
    rows = [
        [
            c.name,
            pb.ClusterKind.Name(c.kind).removeprefix("CLUSTER_KIND_"),
            _status(c),
            c.nodes,
            c.free_cores,
            f"{c.free_memory_gb:g} GiB",
            c.free_devices.get(GPU_DEVICE, 0),
            ", ".join(f"{k}={v}" for k, v in sorted(c.labels.items())) or "-",
        ]
        for c in clusters
    ]
    emit(pb.ListClustersResponse(clusters=clusters), output, headers=_HEADERS, rows=rows)
