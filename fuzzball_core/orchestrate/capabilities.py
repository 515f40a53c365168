"""What this cluster can run, checked when a workflow is submitted.

The specification accepts every field Fuzzball defines; some need parts this cluster does
not have yet. Those are refused at submission, naming the field, rather than accepted and
ignored (a job would otherwise start without its input, or its ranks never wire up).
"""

from __future__ import annotations

from fuzzball_core.drivers import ImageConfig
from fuzzball_core.spec import Job, Service
from fuzzball_core.spec.models import Volume

#: ``multinode.implementation`` values whose ranks Substrate can start: MPICH wires up through
#: the PMI-1 service each node runs; ``generic`` (and no implementation) gets the same
#: environment and is left to use it or not.
LAUNCHABLE_IMPLEMENTATIONS = frozenset({"mpich", "generic"})


def unlaunchable_ranks(job: Job) -> str | None:
    """Why this cluster cannot start ``job``'s ranks, or None when it can."""
    multinode = job.multinode
    if multinode is None or multinode.implementation in (None, *LAUNCHABLE_IMPLEMENTATIONS):
        return None
    return (
        f"{multinode.implementation} ranks cannot be started on this cluster yet (it starts"
        f" {' and '.join(sorted(LAUNCHABLE_IMPLEMENTATIONS))} ranks through PMI-1)"
    )


#: where a volume transfer's file lives inside the volume
VOLUME_FILE_SCHEME = "file://"
#: sources a node can fetch into a volume
INGRESS_SCHEMES = ("http://", "https://")


def unsupported_transfers(path: str, volume: Volume) -> list[tuple[str, str]]:
    """(field, why) for each part of ``volume``'s transfers (at ``path``) this cluster
    cannot carry out: ingress is fetched over HTTP(S) by each node that mounts the volume
    (volumes live on each node), without secrets; egress needs shared storage."""
    problems = []
    for index, transfer in enumerate(volume.ingress or ()):
        at = f"{path}.ingress[{index}]"
        source = transfer.source
        if not source.uri.startswith(INGRESS_SCHEMES):
            problems.append(
                (f"{at}.source.uri", "only http:// and https:// sources can be fetched here yet")
            )
        if source.secret or source.secrets or source.decryption_secret:
            problems.append((f"{at}.source.secret", "secrets are not supported here yet"))
        if not transfer.destination.uri.removeprefix(VOLUME_FILE_SCHEME).strip("/") or (
            not transfer.destination.uri.startswith(VOLUME_FILE_SCHEME)
        ):
            problems.append(
                (f"{at}.destination.uri", "must be file://PATH, a file inside the volume")
            )
    if volume.egress:
        problems.append(
            (
                f"{path}.egress",
                "egress is not supported here yet (volumes live on each node, so there is"
                " no one copy to send)",
            )
        )
    return problems


def unsupported_probes(path: str, service: Service) -> list[tuple[str, str]]:
    """(field, why) for the probes of ``service`` (at ``path``) nodes cannot run: readiness
    is checked over TCP or HTTP from the node; exec and gRPC checks and liveness probes
    (restarting a service) are not carried out yet."""
    problems = []
    probe = service.readiness_probe
    if probe is not None and (probe.exec is not None or probe.grpc is not None):
        action = "exec" if probe.exec is not None else "grpc"
        problems.append(
            (
                f"{path}.readiness-probe.{action}",
                "only tcp-socket and http-get readiness probes are checked here yet",
            )
        )
    if service.liveness_probe is not None:
        problems.append((f"{path}.liveness-probe", "liveness probes are not checked here yet"))
    return problems


def commandless(path: str, step: Job | Service, image: ImageConfig | None) -> list[tuple[str, str]]:
    """(field, why) when nothing names what ``step`` (at ``path``) runs: neither its
    ``command`` nor its ``script``, nor the Entrypoint or Cmd of its image, pinned at
    submission with its config (``image``; None when the backend cannot tell, e.g. an image
    the workflow builds, and the node decides)."""
    if step.command or step.script is not None or image is None or image.runs_something:
        return []
    return [
        (
            f"{path}.command",
            f"neither command nor script is set, and the image {step.image.uri} sets no"
            " Entrypoint or Cmd: there is nothing to run",
        )
    ]
