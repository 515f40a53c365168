"""Typed model of a version 4 workflow file (a v1 file is upgraded to this shape first).

Field names are the file's own (``depends-on``, ``task-array``, ``cache-ttl``): every model
uses a kebab-case alias, so validation errors carry the path exactly as the user wrote it.
Unknown fields are errors, so a misspelt ``depend-on`` is reported rather than ignored.

The models take every field real Fuzzball v4 takes (its API's ``WorkflowDefinition``). What
becomes of each one here (used, accepted with a warning that it has no effect, or refused at
submission) is listed in ``docs/fields.md``; the warnings come from
``fuzzball_core.spec.fields`` and the refusals from ``fuzzball_core.orchestrate.capabilities``.

The models check each value on its own (types, enums, units, URI schemes, ranges). Rules that
relate one part of a file to another (dependencies, cycles, mounts of declared volumes,
endpoint ports) live in ``fuzzball_core.spec.references``. Messages never repeat the offending
value, so nothing under a ``secret``, ``env`` or ``uri`` field can leak into an error.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    model_validator,
)

from fuzzball_core.spec.units import (
    MAX_DURATION_SECONDS,
    MAX_MEMORY_BYTES,
    parse_duration,
    parse_memory_size,
)

#: URI schemes a container image may come from (Fuzzball 4.4 rejects all others).
IMAGE_SCHEMES: tuple[str, ...] = ("docker", "oras", "fuzzball", "fb")
#: Exit codes that can never trigger a retry: 130 (SIGINT) and 143 (SIGTERM) mean "stopped".
UNRETRYABLE_EXIT_CODES: frozenset[int] = frozenset({130, 143})
#: Largest task-array concurrency a job may ask for.
MAX_TASK_CONCURRENCY = 200
#: Bounds of every count, id and number of seconds a file gives: the wire schema carries
#: them (task ids, task counts, cores, device counts) as int32.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class SpecModel(BaseModel):
    """Base of every workflow model: kebab-case field names, unknown fields rejected."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=_kebab,
        populate_by_name=True,
        validate_default=False,
    )


# --- scalar types --------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_ENDPOINT_NAME = re.compile(r"[a-z0-9_-]{1,63}")
_ENV_ENTRY = re.compile(r"[^=\s][^=]*=", re.DOTALL)


def _check_name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError(
            "names start with a letter or digit and use letters, digits, '.', '-' and '_' "
            "(at most 253 characters)"
        )
    return value


def _check_absolute_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError("must be an absolute path (starting with /)")
    return value


def _check_env_entry(value: str) -> str:
    # The value after '=' may be a credential: the message never repeats it.
    if not _ENV_ENTRY.match(value):
        raise ValueError("must be KEY=VALUE")
    if "\0" in value:
        raise ValueError("may not hold a NUL character (an environment entry is a C string)")
    return value


def _check_argument(value: str) -> str:
    if "\0" in value:
        raise ValueError("may not hold a NUL character (an argument is a C string)")
    return value


def _check_program(value: list[str]) -> list[str]:
    if value and not value[0]:
        raise ValueError("the first item, the program to run, may not be empty")
    return value


def _check_memory_size(value: str) -> str:
    parse_memory_size(value)
    return value


def _check_duration(value: str) -> str:
    parse_duration(value)
    return value


def _check_image_uri(value: str) -> str:
    scheme, separator, rest = value.partition("://")
    allowed = ", ".join(f"{s}://" for s in IMAGE_SCHEMES)
    if not separator:
        raise ValueError(f"a bare image reference is not accepted; use one of {allowed}")
    if scheme not in IMAGE_SCHEMES:
        # Only a short, plain scheme is repeated: the rest of a URI may hold credentials.
        shown = f" {scheme}://" if re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]{0,15}", scheme) else ""
        raise ValueError(f"image URI scheme{shown} is not accepted; use one of {allowed}")
    if not rest.strip():
        raise ValueError("image URI names no image")
    return value


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _parse_retry_cause(value: Any) -> str | int:
    if isinstance(value, str) and value.strip().lower() == "node":
        return "node"
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError("must be 'node' or an exit code from 1 to 255")
    try:
        code = int(value)
    except ValueError:
        raise ValueError("must be 'node' or an exit code from 1 to 255") from None
    if not 1 <= code <= 255:
        raise ValueError("exit codes to retry on run from 1 to 255")
    if code in UNRETRYABLE_EXIT_CODES:
        raise ValueError("exit codes 130 and 143 (interrupted, terminated) cannot be retried")
    return code


def _parse_ttl(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError("must be a duration such as 720h, or a number of seconds")
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()):  # "²" is a digit to isdigit, not to int
        parse_duration(text)
    elif len(text) > len(str(MAX_DURATION_SECONDS)) or int(text) > MAX_DURATION_SECONDS:
        raise ValueError("is longer than the longest duration allowed (about 290 years)")
    return text


Name = Annotated[str, AfterValidator(_check_name)]
NonEmptyStr = Annotated[str, Field(min_length=1)]
AbsolutePath = Annotated[str, AfterValidator(_check_absolute_path)]
EnvEntry = Annotated[str, AfterValidator(_check_env_entry)]
#: one item of a command's argv (an empty one is an empty argument, as in a shell's "")
Argument = Annotated[str, AfterValidator(_check_argument)]
#: a command: its first item names the program
Command = Annotated[list[Argument], AfterValidator(_check_program)]
PositiveInt = Annotated[int, Field(ge=1, le=INT32_MAX)]
NonNegativeInt = Annotated[int, Field(ge=0, le=INT32_MAX)]
TaskId = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
PortNumber = Annotated[int, Field(ge=1, le=65535)]
MemorySize = Annotated[str, AfterValidator(_check_memory_size)]
Duration = Annotated[str, AfterValidator(_check_duration)]
ImageURI = Annotated[str, AfterValidator(_check_image_uri)]
RetryCause = Annotated[str | int, PlainValidator(_parse_retry_cause)]
TimeToLive = Annotated[str, PlainValidator(_parse_ttl)]
Affinity = Annotated[Literal["CORE", "SOCKET", "NUMA"], BeforeValidator(_upper)]
DependencyStatus = Annotated[Literal["FINISHED", "FAILED", "RUNNING"], BeforeValidator(_upper)]
MultinodeImplementation = Annotated[
    Literal["openmpi", "ompi", "mpich", "gasnet", "generic"], BeforeValidator(_lower)
]
#: ``multinode.nvlink-domain``: keep the job's nodes inside one NVLink domain when one has
#: enough free (``prefer``: else spread, saying why) or always (``require``: else wait)
NvlinkDomainPolicy = Annotated[Literal["prefer", "require"], BeforeValidator(_lower)]
EndpointProtocol = Annotated[
    Literal["http", "https", "grpc", "grpcs", "tcp", "tls"], BeforeValidator(_lower)
]
PortProtocol = Annotated[Literal["tcp", "udp"], BeforeValidator(_lower)]


def _check_endpoint_name(value: str) -> str:
    if not _ENDPOINT_NAME.fullmatch(value):
        raise ValueError("endpoint names use lowercase letters, digits, '-' and '_' (1-63)")
    return value


EndpointName = Annotated[str, AfterValidator(_check_endpoint_name)]


# --- images and data --------------------------------------------------------------------------


class URIRef(SpecModel):
    """A resource to fetch and what it takes to fetch it (Fuzzball's ``URI``)."""

    uri: NonEmptyStr
    secret: str | None = None
    secrets: dict[str, str] | None = None
    decryption_secret: str | None = None
    #: When a fetched copy is reused: once, changed, never (Fuzzball v4 ingress caching).
    cache: Annotated[Literal["once", "changed", "never"], BeforeValidator(_lower)] | None = None
    #: Seconds a fetched copy may be reused.
    cache_ttl: NonNegativeInt | None = None


class ImageRef(URIRef):
    """The container image a job or service runs (``image:``); ``cache-ttl`` is how long a
    pulled image may be served from the node cache."""

    uri: ImageURI


class TransferURI(URIRef):
    """One end of a volume ingress or egress transfer."""


class Timeout(SpecModel):
    """``policy.timeout``: how long a step may run."""

    execute: Duration | None = None

    @model_validator(mode="after")
    def _positive(self) -> Timeout:
        if self.execute is not None and parse_duration(self.execute) <= 0:
            # 0 would read as no timeout at all on the node: leaving it out says that
            raise ValueError("execute must be longer than 0; leave it out for no timeout")
        return self

    @property
    def execute_seconds(self) -> float | None:
        """The execute timeout in seconds, or None when unset."""
        return None if self.execute is None else parse_duration(self.execute)


class Retry(SpecModel):
    """``policy.retry``: when a step runs again (from the beginning)."""

    #: ``"node"`` (the node was lost or evicted) and/or exit codes 1-255 except 130 and 143.
    on: list[RetryCause] | None = None
    #: One budget shared by every cause; None leaves the cluster default.
    attempts: PositiveInt | None = None


class Policy(SpecModel):
    """``policy``: execution rules of a job (and of a volume transfer)."""

    timeout: Timeout | None = None
    retry: Retry | None = None
    #: Deprecated: ``on-node-fault`` is read as ``retry: {on: [node]}``; ``never`` (Fuzzball
    #: v4: never run it again) is what a step without ``retry`` gets anyway.
    restart: Annotated[Literal["on-node-fault", "never"], BeforeValidator(_lower)] | None = None

    @model_validator(mode="after")
    def _retry_or_restart(self) -> Policy:
        if self.retry is not None and self.restart is not None:
            raise ValueError(
                "retry and restart cannot both be set; restart is deprecated, use retry"
            )
        return self

    @property
    def effective_retry(self) -> Retry | None:
        """The retry rule the engine applies: ``retry``, or the one ``restart`` stands for.

        A ``retry`` without ``on`` retries nothing and yields None.
        """
        if self.retry is not None:
            return self.retry if self.retry.on else None
        if self.restart == "on-node-fault":
            return Retry(on=["node"])
        return None


class VolumeTransfer(SpecModel):
    """One file moved into (ingress) or out of (egress) a volume."""

    source: TransferURI
    destination: TransferURI
    policy: Policy | None = None


def _volume_parts(reference: str) -> list[str]:
    return [part for part in reference.removeprefix("volume://").split("/") if part]


def _check_volume_reference(reference: str) -> str:
    if not reference.startswith("volume://") or len(_volume_parts(reference)) < 2:
        raise ValueError(
            "must be a volume reference such as volume://user/ephemeral, "
            "volume://user/persistent/NAME or volume://group/persistent/NAME"
        )
    return reference


VolumeReference = Annotated[str, AfterValidator(_check_volume_reference)]


class Volume(SpecModel):
    """A data volume of the workflow (``volumes.NAME``).

    v1 names its kind with ``reference`` (or the deprecated ``type``); Fuzzball v4 with
    ``use`` (``ephemeral``, ``persistent`` or a storage provisioner), a persistent volume's
    ``name``, or only ``size``/``annotations`` for a provisioner chosen by annotations.
    """

    name: str | None = None
    reference: VolumeReference | None = None
    #: Deprecated in favour of ``reference``; accepted for old files.
    type: Annotated[Literal["EPHEMERAL", "HOST"], BeforeValidator(_upper)] | None = None
    path: str | None = None
    use: NonEmptyStr | None = None
    size: MemorySize | None = None
    annotations: dict[str, str] | None = None
    ingress: list[VolumeTransfer] | None = None
    egress: list[VolumeTransfer] | None = None

    @model_validator(mode="after")
    def _kind_given(self) -> Volume:
        kinds = (self.reference, self.type, self.use, self.name, self.size, self.annotations)
        if all(kind is None for kind in kinds):
            raise ValueError(
                "a volume needs a reference such as volume://user/ephemeral (v1) or use: "
                "ephemeral (v4)"
            )
        conflict = self._conflict()
        if conflict is not None:
            raise ValueError(conflict)
        return self

    def _conflict(self) -> str | None:
        """Why the fields naming this volume's kind contradict each other (None when they
        agree): one kind is what the volume is, and a second that says otherwise would be
        dropped silently, keeping data meant to go or losing data meant to stay."""
        host = self.type == "HOST" or self.path is not None
        if self.reference is not None:
            parts = _volume_parts(self.reference)
            if host:
                given = "path" if self.path is not None else "type: HOST"
                return f"{given} contradicts reference {self.reference}; give one of them"
            if self.type == "EPHEMERAL" and parts[1] != "ephemeral":
                return f"type: EPHEMERAL contradicts reference {self.reference}; give one of them"
            if self.use is not None and self.use != parts[1]:
                return f"use: {self.use} contradicts reference {self.reference}; give one of them"
            if self.use == "persistent" and self.name is not None and parts[2:] != [self.name]:
                return (
                    f"name: {self.name} contradicts reference {self.reference} (use: persistent "
                    "names the volume); give one of them"
                )
            if parts[1] == "ephemeral" and len(parts) > 2:
                return (
                    f"reference {self.reference}: the workflow's ephemeral volume has no name; "
                    f"write volume://{parts[0]}/ephemeral"
                )
            return None
        if self.use is not None and (host or self.type == "EPHEMERAL"):
            given = "type: EPHEMERAL" if self.type == "EPHEMERAL" else "a host volume"
            return f"use: {self.use} contradicts {given}; give one of them"
        return None

    @property
    def storage_reference(self) -> str | None:
        """The ``volume://`` reference this volume stands for: its ``reference``; v4's
        ``use: persistent`` (with its ``name``) or a ``name`` alone: a persistent volume;
        ``type: EPHEMERAL`` (whose ``name`` is only v1's copy of its key), ``use:
        ephemeral`` or a ``size`` alone: the workflow's ephemeral volume. None for what is
        no storage class's volume (host directories, and ``use`` naming a storage
        provisioner), which the cluster's capabilities refuse."""
        if self.reference is not None:
            return str(self.reference)
        if self.type == "HOST" or self.path is not None:
            return None
        if self.type == "EPHEMERAL" or self.use == "ephemeral":
            return "volume://user/ephemeral"
        if self.use == "persistent" or (self.use is None and self.name is not None):
            return "volume://user/persistent" + (f"/{self.name}" if self.name else "")
        if self.use is None:
            return "volume://user/ephemeral"
        return None


class ImageBuild(SpecModel):
    """An image the workflow builds itself (``images.NAME``)."""

    from_: ImageRef = Field(alias="from")
    files: dict[str, str] | None = None
    post: str | None = None
    scope: Annotated[Literal["user", "group"], BeforeValidator(_lower)] | None = None
    ttl: TimeToLive | None = None

    @property
    def effective_scope(self) -> str:
        """``user`` unless the definition says ``group``."""
        return self.scope or "user"


# --- resources ------------------------------------------------------------------------------


class Cpu(SpecModel):
    """``resource.cpu``."""

    cores: PositiveInt | None = None
    affinity: Affinity | None = None
    sockets: PositiveInt | None = None
    threads: bool | None = None


class Memory(SpecModel):
    """``resource.memory``: ``size`` as written, ``size_bytes`` as a number."""

    size: MemorySize | None = None
    by_core: bool | None = None

    @property
    def size_bytes(self) -> int | None:
        """The memory size in bytes, or None when unset."""
        return None if self.size is None else parse_memory_size(self.size)


class Resource(SpecModel):
    """``resource``: what a job needs from a node."""

    cpu: Cpu | None = None
    memory: Memory | None = None
    devices: dict[NonEmptyStr, NonNegativeInt] | None = None
    exclusive: bool | None = None
    annotations: dict[str, str] | None = None

    @model_validator(mode="after")
    def _memory_bounded(self) -> Resource:
        memory, cpu = self.memory, self.cpu
        if memory is None or not memory.by_core or cpu is None or cpu.cores is None:
            return self
        size = memory.size_bytes
        if size is not None and size * cpu.cores > MAX_MEMORY_BYTES:
            raise ValueError(
                "memory.size x cpu.cores (memory.by-core) must be at most 1TiB x 1024 (1 PiB)"
            )
        return self


class Multinode(SpecModel):
    """``multinode``: one job across several nodes."""

    nodes: PositiveInt
    procs_per_node: PositiveInt | None = None
    implementation: MultinodeImplementation | None = None
    #: Fuzzball here: NVLink domain placement (default ``prefer``)
    nvlink_domain: NvlinkDomainPolicy | None = None


class TaskArray(SpecModel):
    """``task-array``: task ids ``start``..``end`` inclusive, at most ``concurrency`` at once."""

    start: TaskId
    end: TaskId
    concurrency: Annotated[int, Field(ge=1, le=MAX_TASK_CONCURRENCY)] | None = None

    @model_validator(mode="after")
    def _ordered(self) -> TaskArray:
        if self.end < self.start:
            raise ValueError("end must not be less than start")
        if self.count > INT32_MAX:
            raise ValueError(f"a task array holds at most {INT32_MAX} tasks")
        return self

    @property
    def count(self) -> int:
        """How many tasks the array holds."""
        return self.end - self.start + 1


class Dependency(SpecModel):
    """One entry of ``depends-on``."""

    name: NonEmptyStr
    #: FINISHED (run after success), FAILED (run only after failure), RUNNING (services only).
    #: Left out, RUNNING for a service (``fuzzball_core.spec.upgrade`` writes it in) and
    #: FINISHED for a job.
    status: DependencyStatus = "FINISHED"
    description: str | None = None


class Mount(SpecModel):
    """A volume mounted at a path (v4: ``mounts: {/data: {volume: NAME}}``; the short form
    ``/data: NAME`` is read as this by ``fuzzball_core.spec.upgrade``)."""

    volume: NonEmptyStr


class JobNetwork(SpecModel):
    """``network`` of a job."""

    isolated: bool | None = None
    expose_tcp: list[PortNumber] | None = None
    expose_udp: list[PortNumber] | None = None


# --- jobs and services ------------------------------------------------------------------------


class _Step(SpecModel):
    """What jobs and services share."""

    name: str | None = None  # ignored: the map key names the step
    image: ImageRef
    command: Command | None = None
    script: str | None = None
    args: list[Argument] | None = None
    env: list[EnvEntry] | None = None
    cwd: AbsolutePath | None = None
    #: path in the container -> ``file://NAME`` (a top-level ``files`` entry) or the content
    files: dict[str, str] | None = None
    mounts: dict[AbsolutePath, Mount] | None = None
    resource: Resource | None = None
    multinode: Multinode | None = None
    depends_on: list[Dependency] | None = None
    #: Fuzzball v4: may be preempted; overrides the workflow's ``preemptible``.
    preemptible: bool | None = None

    @model_validator(mode="after")
    def _command_or_script(self) -> _Step:
        if self.command and self.script:
            raise ValueError("set command or script, not both")
        return self


class Job(_Step):
    """A compute job (``jobs.NAME``)."""

    task_array: TaskArray | None = None
    policy: Policy | None = None
    network: JobNetwork | None = None


class ServicePort(SpecModel):
    """A port a service listens on."""

    name: NonEmptyStr
    port: PortNumber
    protocol: PortProtocol | None = None


class Endpoint(SpecModel):
    """A Fuzzball endpoint proxying to one of the service's ports."""

    name: EndpointName
    port_name: NonEmptyStr
    protocol: EndpointProtocol | None = None
    type: Annotated[Literal["subdomain", "path"], BeforeValidator(_lower)] | None = None
    scope: (
        Annotated[Literal["user", "group", "organization", "public"], BeforeValidator(_lower)]
        | None
    ) = None
    persistent: bool | None = None


class ServiceNetwork(SpecModel):
    """``network`` of a service."""

    ports: list[ServicePort] | None = None
    endpoints: list[Endpoint] | None = None
    #: Fuzzball v4: the service serves on the node's own network.
    host: bool | None = None


class ExecAction(SpecModel):
    command: list[str] = Field(min_length=1)


class HTTPHeader(SpecModel):
    name: NonEmptyStr
    value: str


class HTTPGetAction(SpecModel):
    path: str | None = None
    port: PortNumber
    scheme: Annotated[Literal["HTTP", "HTTPS"], BeforeValidator(_upper)] | None = None
    http_headers: list[HTTPHeader] | None = None


class TCPSocketAction(SpecModel):
    port: PortNumber


class GRPCAction(SpecModel):
    port: PortNumber
    service: str | None = None


class Probe(SpecModel):
    """A readiness or liveness probe: exactly one of exec, http-get, tcp-socket, grpc."""

    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    grpc: GRPCAction | None = None
    initial_delay_seconds: NonNegativeInt | None = None
    period_seconds: PositiveInt | None = None
    timeout_seconds: PositiveInt | None = None
    success_threshold: PositiveInt | None = None
    failure_threshold: PositiveInt | None = None

    @model_validator(mode="after")
    def _one_action(self) -> Probe:
        actions = [self.exec, self.http_get, self.tcp_socket, self.grpc]
        if sum(action is not None for action in actions) != 1:
            raise ValueError("a probe sets exactly one of exec, http-get, tcp-socket, grpc")
        return self


class Scale(SpecModel):
    """``scale``: how many instances of a service may run."""

    min: NonNegativeInt | None = None
    max: PositiveInt | None = None
    idle_timeout: Duration | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Scale:
        if self.min is not None and self.max is not None and self.max < self.min:
            raise ValueError("max must not be less than min")
        return self


class Service(_Step):
    """A long-running service (``services.NAME``)."""

    persist: bool | None = None
    network: ServiceNetwork | None = None
    readiness_probe: Probe | None = None
    liveness_probe: Probe | None = None
    scale: Scale | None = None
    #: Fuzzball v4 autoscaling (replicas, metrics, scale-up triggers, scale-down policy).
    autoscaler: dict[str, Any] | None = None
    #: Fuzzball v4: a config file rendered from other services' addresses (path, services,
    #: script).
    dynamic_config: dict[str, Any] | None = None
    #: Accepted and ignored (with a warning): services have no execution policy.
    policy: Any = None


# --- the workflow -----------------------------------------------------------------------------


class DefaultSteps(SpecModel):
    """What defaults give every step they apply to: env, mounts and resource."""

    env: list[EnvEntry] | None = None
    mounts: dict[AbsolutePath, Mount] | None = None
    resource: Resource | None = None


class DefaultJob(DefaultSteps):
    """``defaults.job``: merged into every job (and env, mounts, resource into services)."""

    policy: Policy | None = None


class DefaultService(DefaultSteps):
    """``defaults.service`` (Fuzzball v4): merged into every service."""


class Defaults(DefaultSteps):
    """``defaults``: its own env, mounts and resource (Fuzzball v4) apply to jobs and
    services alike, under ``job`` and ``service``."""

    job: DefaultJob | None = None
    service: DefaultService | None = None


class Workflow(SpecModel):
    """A workflow file in version 4 form."""

    version: Literal["v4"]
    annotations: dict[str, str] | None = None
    defaults: Defaults | None = None
    volumes: dict[Name, Volume] | None = None
    files: dict[str, str] | None = None
    images: dict[Name, ImageBuild] | None = None
    jobs: dict[Name, Job] | None = None
    services: dict[Name, Service] | None = None
    #: Fuzzball v4: every step may be preempted unless it says otherwise.
    preemptible: bool | None = None
    #: Internal anchor of the v3 API; accepted and ignored (with a warning).
    completed: Any = None
