"""What this cluster can run, checked when a workflow is submitted.

The specification accepts every field Fuzzball defines; some need parts this cluster does
not have yet. Those are refused at submission, naming the field, rather than accepted and
ignored (a job would otherwise start without its input, or its ranks never wire up).
:func:`refused_fields` gathers every such refusal for one stage of the plan; the fields
accepted with a warning instead are in ``fuzzball_core.spec.fields`` (both listed in
``docs/fields.md``).
"""

from __future__ import annotations

from fuzzball_core.drivers import ImageConfig
from fuzzball_core.spec import Job, Service, Stage, StageKind
from fuzzball_core.spec.models import ImageBuild, URIRef, Volume
from fuzzball_core.spec.resources import IMEX_ENV, imex_channel_ids

#: ``multinode.implementation`` values whose ranks Substrate can start: MPICH (and no
#: implementation, which is read as ``mpich``) wires up through the PMI-1 service each node
#: runs; Open MPI (``openmpi``, ``ompi``) through its own launcher, ``mpirun``, with Substrate
#: as its remote agent; ``generic`` gets PMI's environment and torchrun's (``MASTER_ADDR``...)
#: and is left to use them or not.
LAUNCHABLE_IMPLEMENTATIONS = frozenset({"mpich", "openmpi", "ompi", "generic"})


def unlaunchable_ranks(job: Job) -> str | None:
    """Why this cluster cannot start ``job``'s ranks, or None when it can (only GASNet's
    are refused: its conduits' spawners are not implemented)."""
    multinode = job.multinode
    if multinode is None or multinode.implementation in (None, *LAUNCHABLE_IMPLEMENTATIONS):
        return None
    return (
        f"{multinode.implementation} ranks cannot be started on this cluster yet (it starts"
        f" {', '.join(sorted(LAUNCHABLE_IMPLEMENTATIONS))} ranks)"
    )


#: where a volume transfer's file lives inside the volume
VOLUME_FILE_SCHEME = "file://"
#: sources a node can fetch into a volume (s3://BUCKET/KEY with an s3 secret, or unsigned)
INGRESS_SCHEMES = ("http://", "https://", "s3://")


def unsupported_transfers(path: str, volume: Volume) -> list[tuple[str, str]]:
    """(field, why) for each part of ``volume``'s transfers (at ``path``) this cluster
    cannot carry out: ingress is fetched over HTTP(S) or from S3 by each node that mounts
    the volume (volumes live on each node), with the source's ``secret`` (an http or value
    secret; an s3 secret for ``s3://``) as its credentials; egress sends ``file://PATH``
    files of the volume to ``s3://BUCKET/KEY`` objects with the destination's s3 secret
    (:func:`unsupported_egress`)."""
    problems = []
    for index, transfer in enumerate(volume.ingress or ()):
        at = f"{path}.ingress[{index}]"
        source = transfer.source
        if not source.uri.startswith(INGRESS_SCHEMES):
            problems.append(
                (
                    f"{at}.source.uri",
                    "only http://, https:// and s3:// sources can be fetched here yet",
                )
            )
        elif source.uri.startswith("s3://") and not _names_object(source.uri):
            problems.append((f"{at}.source.uri", "must be s3://BUCKET/KEY, naming one object"))
        problems.extend(
            (f"{at}.source.{field}", "secrets are not supported here yet")
            for field in _secret_fields(source)
            if field != "secret"  # an http(s) source's credentials: read on the node
        )
        if not transfer.destination.uri.removeprefix(VOLUME_FILE_SCHEME).strip("/") or (
            not transfer.destination.uri.startswith(VOLUME_FILE_SCHEME)
        ):
            problems.append(
                (f"{at}.destination.uri", "must be file://PATH, a file inside the volume")
            )
    problems.extend(unsupported_egress(path, volume))
    return problems


#: the egress destinations a node can send to (s3://BUCKET/KEY with an s3 secret)
EGRESS_SCHEMES = ("s3://",)
#: the fields of a transfer's ``policy`` that egress carries out (``retry.attempts``)
_EGRESS_POLICY_WHY = {
    "timeout": "a transfer runs until it ends or stalls for 60 seconds; no timeout applies",
    "restart": "a transfer is tried again only per policy.retry.attempts",
}


def unsupported_egress(path: str, volume: Volume) -> list[tuple[str, str]]:
    """(field, why) for each part of ``volume``'s egress (at ``path``) this cluster cannot
    carry out: a source must be ``file://PATH`` inside the volume and a destination
    ``s3://BUCKET/KEY`` (with an s3 secret in ``secret``, or unsigned); of the policy only
    ``retry.attempts`` is carried out (any failure is tried again)."""
    problems = []
    for index, transfer in enumerate(volume.egress or ()):
        at = f"{path}.egress[{index}]"
        source, destination = transfer.source, transfer.destination
        if not source.uri.startswith(VOLUME_FILE_SCHEME) or not source.uri.removeprefix(
            VOLUME_FILE_SCHEME
        ).strip("/"):
            problems.append((f"{at}.source.uri", "must be file://PATH, a file inside the volume"))
        problems.extend(
            (f"{at}.source.{field}", "has no meaning here: the source is a file of the volume")
            for field in _set_fields(source, ("secret", "secrets", "decryption-secret"))
            + _set_fields(source, ("cache", "cache-ttl"))
        )
        if not destination.uri.startswith(EGRESS_SCHEMES) or not _names_object(destination.uri):
            problems.append(
                (f"{at}.destination.uri", "must be s3://BUCKET/KEY: only S3 objects are sent to")
            )
        problems.extend(
            (f"{at}.destination.{field}", "is not read here; give the s3 secret in secret")
            for field in _set_fields(destination, ("secrets", "decryption-secret"))
        )
        problems.extend(
            (f"{at}.destination.{field}", "has no meaning here: every egress sends the file")
            for field in _set_fields(destination, ("cache", "cache-ttl"))
        )
        policy = transfer.policy
        if policy is not None:
            for field, why in _EGRESS_POLICY_WHY.items():
                if getattr(policy, field) is not None:
                    problems.append((f"{at}.policy.{field}", why))
            if policy.retry is not None and policy.retry.on:
                problems.append(
                    (f"{at}.policy.retry.on", "any failure of a transfer is tried again here")
                )
    return problems


def _set_fields(uri: URIRef, names: tuple[str, ...]) -> list[str]:
    """The file's names among ``names`` that ``uri`` sets."""
    return [name for name in names if getattr(uri, name.replace("-", "_")) not in (None, {})]


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
    """(field, why) when nothing names what ``step`` (at ``path``) runs: none of its
    ``command``, ``args`` and ``script``, nor the Entrypoint or Cmd of its image, pinned at
    submission with its config (``image``; None when the backend cannot tell, e.g. an image
    the workflow builds, and the node decides)."""
    given = step.command or step.args or step.script is not None
    if given or image is None or image.runs_something:
        return []
    return [
        (
            f"{path}.command",
            f"none of command, args and script is set, and the image {step.image.uri} sets no"
            " Entrypoint or Cmd: there is nothing to run",
        )
    ]


def _names_object(uri: str) -> bool:
    """Whether an ``s3://`` URI names a bucket and a key."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bool(bucket and key.strip("/"))


def _secret_fields(uri: URIRef) -> list[str]:
    """The file's names of the secret fields ``uri`` sets."""
    fields = {
        "secret": uri.secret,
        "secrets": uri.secrets,
        "decryption-secret": uri.decryption_secret,
    }
    return [name for name, value in fields.items() if value]


#: what the ``use`` of a volume this cluster can create says
EPHEMERAL_USE = "ephemeral"
PERSISTENT_USE = "persistent"


def unsupported_volume(path: str, volume: Volume) -> list[tuple[str, str]]:
    """(field, why) for what ``volume`` (at ``path``) asks of storage that this cluster
    lacks: host directories (a site shares a tree through a ``hostpath`` storage class
    instead) and storage provisioners. References (``volume://SCOPE/CLASS[/NAME]``) are
    resolved against the storage classes when the workflow is stored
    (:mod:`~fuzzball_core.orchestrate.workflow_volumes`)."""
    problems = []
    if volume.type == "HOST" or volume.path is not None:
        field = "path" if volume.path is not None else "type"
        problems.append(
            (
                f"{path}.{field}",
                "host volumes are not supported here; use a storage class of the hostpath"
                " driver (volume://user/CLASS/NAME)",
            )
        )
    if volume.use is not None and volume.use not in (EPHEMERAL_USE, PERSISTENT_USE):
        problems.append(
            (f"{path}.use", "storage provisioners are not supported here; use: ephemeral")
        )
    return problems


def unsupported_step_fields(path: str, step: Job | Service) -> list[tuple[str, str]]:
    """(field, why) for what ``step`` (at ``path``) asks that this cluster cannot do: an
    image needing more than ``image.secret`` to pull, and, for services, a network of their
    own (services serve on their node's network here), autoscaling and rendered configs."""
    problems = list(_unsupported_image(f"{path}.image", step.image))
    if isinstance(step, Service):
        if step.network is not None and step.network.host is False:
            problems.append(
                (
                    f"{path}.network.host",
                    "services serve on their node's network here; a network of their own"
                    " is not supported yet",
                )
            )
        if step.autoscaler is not None:
            problems.append(
                (f"{path}.autoscaler", "autoscaling is not supported here yet (one instance)")
            )
        if step.dynamic_config is not None:
            problems.append(
                (f"{path}.dynamic-config", "rendered config files are not supported here yet")
            )
    return problems


def _unsupported_image(path: str, image: URIRef) -> list[tuple[str, str]]:
    problems = []
    if image.secrets:
        problems.append(
            (f"{path}.secrets", "is not read here; give the registry credentials in secret")
        )
    if image.decryption_secret:
        problems.append(
            (f"{path}.decryption-secret", "encrypted images are not supported here yet")
        )
    return problems


def refused_fields(stage: Stage) -> list[tuple[str, str]]:
    """(field, why) for every part of ``stage`` this cluster cannot carry out, whichever
    nodes it has: its storage, transfers, image, probes, network and rank launcher."""
    definition = stage.definition
    if stage.kind is StageKind.VOLUME:
        return unsupported_volume(stage.id, definition) + unsupported_transfers(
            stage.id, definition
        )
    if stage.kind is StageKind.FILE:
        return []  # a volume's egress: checked with its volume's stage
    if stage.kind is StageKind.IMAGE:
        if isinstance(definition, ImageBuild):
            return _unsupported_image(f"{stage.id}.from", definition.from_)
        return []
    problems = unsupported_step_fields(stage.id, definition)
    if isinstance(definition, Service):
        problems.extend(unsupported_probes(stage.id, definition))
    problems.extend(unreadable_imex_channels(stage.id, definition))
    unlaunchable = unlaunchable_ranks(definition)
    if unlaunchable is not None:
        problems.append((f"{stage.id}.multinode.implementation", unlaunchable))
    if isinstance(definition, Job) and definition.multinode and isolated(definition):
        problems.append(
            (
                f"{stage.id}.network.isolated",
                "a multinode job's ranks reach each other and their node's PMI service on"
                " the nodes' network; an isolated multinode job is not supported here yet",
            )
        )
    return problems


def unreadable_imex_channels(path: str, step: Job | Service) -> list[tuple[str, str]]:
    """(field, why) when ``step``'s ``NVIDIA_IMEX_CHANNELS`` is not a list of channel ids
    (``all`` included: a job is given channels by count, the node's free ones)."""
    channels = imex_channel_ids(step)
    if channels is None or (channels and all(part.isdigit() for part in channels)):
        return []
    return [
        (
            f"{path}.env",
            f"{IMEX_ENV} must list IMEX channel ids (0 or 0,1), one channel requested per id;"
            f" got {','.join(channels) or 'nothing'}",
        )
    ]


def isolated(job: Job) -> bool:
    """Whether ``job`` asks for a network namespace of its own (``network.isolated``)."""
    return job.network is not None and bool(job.network.isolated)
