"""The one configuration file every Fuzzball process reads.

Its path comes from ``--config`` or ``FUZZBALL_CONFIG``; without either, the defaults describe
the embedded single-machine setup: SQLite in the user's data directory and services on
loopback ports. Keys are spelled with hyphens, as in the rest of Fuzzball's YAML::

    data-dir: /var/lib/fuzzball
    database:
      url: postgresql+psycopg://fuzzball@127.0.0.1/fuzzball
    scheduler:
      driver: default
    images:
      registries:
        docker.io:
          mirrors: ["http://127.0.0.1:5000"]
      cache-max-bytes: 20GiB
    plugins:
      require: [mysite]
    tls:
      cert-file: /etc/fuzzball/server.crt
      key-file: /etc/fuzzball/server.key
      ca-file: /etc/fuzzball/ca.crt

Unknown keys and wrong types are errors that name the key (``scheduler.drivr: unknown key``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import platformdirs
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.spec.models import Retry
from fuzzball_core.spec.units import parse_duration, parse_memory_size

CONFIG_ENV = "FUZZBALL_CONFIG"


def _bytes(value: Any) -> Any:
    # whole numbers are bytes; text is a size with a unit, as in workflow files
    return parse_memory_size(value) if isinstance(value, str) else value


def _seconds(value: Any) -> Any:
    # numbers are seconds; text is a Go-style duration, as in workflow files
    return parse_duration(value) if isinstance(value, str) else value


#: the longest duration a key takes (ten years): every consumer can count it in
#: milliseconds as a 64-bit integer, and an infinite one is refused
MAX_SECONDS = 10 * 365 * 24 * 3600.0

ByteSize = Annotated[int, BeforeValidator(_bytes), Field(ge=0)]
#: a count of a kind of device (``nvidia.com/gpu: 4``)
DeviceCounts = dict[str, Annotated[int, Field(ge=0)]]
Seconds = Annotated[float, BeforeValidator(_seconds), Field(gt=0, le=MAX_SECONDS)]
#: a duration where 0 means at once (or never waiting)
SecondsOrZero = Annotated[float, BeforeValidator(_seconds), Field(ge=0, le=MAX_SECONDS)]
#: gRPC counts keepalive times in milliseconds as a 32-bit integer (at most 24.8 days)
KeepaliveSeconds = Annotated[float, BeforeValidator(_seconds), Field(gt=0, le=24 * 3600.0)]


def split_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``; no host: loopback) as host and port; ValueError saying
    what is wrong otherwise."""
    host, colon, port = listen.rpartition(":")
    if not colon or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ValueError(f"expected host:port with a port of 0-65535, got {listen!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"an IPv6 host is written in brackets ([::1]:PORT), got {listen!r}")
    return host or "127.0.0.1", int(port)


def _listen(value: str) -> str:
    if value:
        split_listen(value)
    return value


#: where a server listens, ``host:port``; "" where the key says it means none
Listen = Annotated[str, AfterValidator(_listen)]


def _hyphenate(name: str) -> str:
    return name.replace("_", "-")


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=_hyphenate, populate_by_name=True, frozen=True
    )


def default_data_dir() -> Path:
    """Where the embedded setup keeps its database, logs and caches."""
    return Path(platformdirs.user_data_dir("fuzzball", appauthor=False))


#: the stores Orchestrate and Federate run on: SQLite and PostgreSQL, any driver
_DATABASE_URL = re.compile(r"^(?:sqlite|postgresql|postgres)(?:\+[A-Za-z0-9_]+)?://")


def _database_url(value: str) -> str:
    if value and not _DATABASE_URL.match(value):
        raise ValueError(
            "expected an SQLAlchemy URL of SQLite or PostgreSQL (sqlite:///PATH, "
            "postgresql://USER@HOST/NAME)"
        )
    return value


class DatabaseConfig(_Section):
    """Orchestrate's store. ``url`` is an SQLAlchemy URL; empty means SQLite in data-dir."""

    url: Annotated[str, AfterValidator(_database_url)] = ""
    #: how long a starting Orchestrate or Federate retries a database server that does not
    #: answer (started beside it, restarting) before it gives up; 0: give up at once
    start_wait: SecondsOrZero = 60.0


#: how long a bearer token stays valid by default (90 days)
DEFAULT_TOKEN_LIFETIME = 90 * 24 * 3600.0
#: an Orchestrate cluster's name while ``orchestrate.cluster-name`` names none
DEFAULT_CLUSTER_NAME = "fuzzball"
#: how long the OIDC issuer's access tokens are accepted by default (5 minutes)
DEFAULT_ACCESS_TOKEN_LIFETIME = 300.0
#: how long its refresh tokens may be used by default (30 days)
DEFAULT_REFRESH_TOKEN_LIFETIME = 30 * 24 * 3600.0


class AccountsConfig(_Section):
    """The accounts' bearer tokens, as Orchestrate and Federate issue them."""

    #: how long a new token is accepted (a duration such as ``720h``, or seconds); past it it is
    #: refused as expired, and a new one must be issued
    token_lifetime: Seconds = DEFAULT_TOKEN_LIFETIME
    #: the OIDC issuer's URL as clients reach it (``https://api.example.org/auth/realms/
    #: fuzzball``); empty: each request's own ``scheme://host`` and ``/auth/realms/fuzzball``
    oidc_issuer: str = ""
    #: how long a login access token of the OIDC issuer is accepted
    access_token_lifetime: Seconds = DEFAULT_ACCESS_TOKEN_LIFETIME
    #: how long a refresh token (scope ``offline_access``) may be used; each use rotates it
    refresh_token_lifetime: Seconds = DEFAULT_REFRESH_TOKEN_LIFETIME


class LogsConfig(_Section):
    """How much of the jobs' output Orchestrate stores (``orchestrate.logs``).

    Output past a limit is counted, not stored: the job's log ends with a line saying where
    it was cut, which limit cut it, and how many bytes and lines were dropped since.
    """

    #: what one run of a job keeps (each task of an array and each retry is a run)
    max_bytes_per_job: ByteSize = Field(default=100 * 1024**2, gt=0)
    #: what all the runs of one workflow keep together
    max_bytes_per_workflow: ByteSize = Field(default=1024**3, gt=0)


class EndpointsConfig(_Section):
    """The service endpoint proxy (``orchestrate.endpoints``; docs/endpoints.md).

    It serves path endpoints (``/endpoints/{id}/...``) and subdomain endpoints
    (``{id}.<domain>``) on its own listener, so a service's own paths never meet the API's.
    """

    #: where the proxy listens (``host:port``); empty: no proxy is served
    listen: Listen = ""
    #: the proxy's address as users reach it (``https://fuzzball.example.org``), for the URLs
    #: ``fuzzball endpoint`` shows and jobs read from ``FB_SERVICE_*_ENDPOINT_*``; default
    #: ``http://<listen>``
    url: str = ""
    #: subdomain endpoints are ``{id}.<domain>``; empty: the host of ``url``
    domain: str = ""
    #: how long a request waits for a service scaled to zero to wake (then 503)
    wake_timeout: Seconds = 60.0
    #: the cookie holding a Fuzzball token, for browsers (the Web UI sets it at sign-in; it
    #: reaches path endpoints on the Web UI's host)
    cookie: str = "fuzzball_endpoint_token"
    #: check an https service's certificate (services mostly serve self-signed ones)
    verify_upstream_tls: bool = False
    #: how long a service taken over with ``--strategy ready`` keeps serving the requests it
    #: already holds after the endpoint moved to its successor
    drain: Seconds = 2.0


class NodeKeepaliveConfig(_Section):
    """HTTP/2 keepalive pings on the node API's connections (``orchestrate.node-keepalive``),
    read by Orchestrate's gRPC server and by every agent's channel to it
    (:mod:`fuzzball_core.keepalive`).

    A node that vanishes without its connection closing (power lost, link cut, a partition:
    no FIN or RST reaches Orchestrate) leaves its Connect stream open and silent; without
    pings it is found only when its lease ends (100-125 s at 5,000 nodes). With them gRPC
    closes a connection whose ping went unanswered ``interval + timeout`` after it went
    quiet, and the closed stream's grace (the configured ``node-lease``) applies from there.
    """

    #: how long a connection may stay quiet (nothing read) before its side sends a ping
    interval: KeepaliveSeconds = 15.0
    #: how long a ping may go unanswered before the connection is closed
    timeout: KeepaliveSeconds = 10.0


class OrchestrateConfig(_Section):
    """Where Orchestrate listens (gRPC for clients and nodes, REST gateway)."""

    grpc_listen: Listen = Field(default="127.0.0.1:50051", min_length=1)
    rest_listen: Listen = Field(default="127.0.0.1:8080", min_length=1)
    #: shared secret every Substrate presents; no node may connect while it is empty
    node_token: str = ""
    node_lease: Seconds = 15.0
    #: keepalive pings on the nodes' connections (Orchestrate's and the agents' side alike)
    node_keepalive: NodeKeepaliveConfig = NodeKeepaliveConfig()
    #: how long one pass of the engine applies node reports before it leaves the rest to
    #: the next, so that requests are served between passes (longer: fewer round trips to
    #: the store per report; shorter: answers wait less for a busy engine)
    pass_budget: Seconds = 0.1
    max_eviction_restarts: int = Field(default=3, ge=0, strict=True)
    #: the retry declaration of steps that declare neither policy.retry nor policy.restart
    #: (same shape as policy.retry: ``{on: [node], attempts: 2}``)
    default_retry: Retry | None = None
    enable_workflow_image_builds: bool = True
    logs: LogsConfig = LogsConfig()
    endpoints: EndpointsConfig = EndpointsConfig()
    #: the Federates whose forwarded identities this cluster accepts: name (the Federate's
    #: ``federate.name``) to the file of its public key (``fuzzball-federate identity-key``)
    trusted_federates: dict[str, Path] = Field(default_factory=dict)
    #: this cluster's name, shown as a workflow's Cluster (``fuzzball workflow list``)
    cluster_name: str = Field(default=DEFAULT_CLUSTER_NAME, min_length=1)


def _job_subnet(value: str | None) -> str | None:
    """An IPv4 subnet with room for jobs (ValueError saying what is wrong otherwise)."""
    if value is not None and ipaddress.IPv4Network(value).num_addresses < 4:
        raise ValueError("too small for jobs: a gateway and at least one job need room")
    return value


class SubstrateConfig(_Section):
    """One node agent. Resource limits let several agents share a machine in tests."""

    orchestrate_address: str = "127.0.0.1:50051"
    node_token: str = ""
    work_dir: Path | None = None
    #: None (left out): the host's name; the cores and memory the node offers, None: the
    #: machine's (an empty name or no memory would be a mistake, not a request for those)
    node_name: str | None = Field(default=None, min_length=1)
    cores: int | None = Field(default=None, ge=1)
    memory: ByteSize | None = Field(default=None, gt=0)
    devices: DeviceCounts = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    #: where the node's fuzzball_node_* metrics (and /healthz, /readyz) are served; None:
    #: ``health.metrics-address`` port 9101 (every interface when that is empty); "": off
    metrics_listen: Listen | None = None
    #: where the bundled node_exporter Substrate starts listens; None: ``health.metrics-address``
    #: port 9100; "": none is started
    node_exporter_listen: Listen | None = None
    #: where device plugins look for device nodes (a containerised agent mounts the host's);
    #: one other than /dev whose parent holds etc/ld.so.cache (/host/dev beside the host's
    #: root at /host) is where the NVIDIA plugin also reads the driver's libraries and tools
    dev_root: Path = Path("/dev")
    #: count each job's network traffic (eBPF on the job's cgroup; costs a few ms per job)
    metering: bool = True
    #: where other nodes and the jobs reach this node (the workflows' services on it resolve
    #: to it); empty: the address this node reaches Orchestrate from
    address: str = ""
    #: the private subnet of this node's isolated jobs (``network.isolated``); None: the
    #: runtime's default. Agents sharing one network namespace need one each.
    job_subnet: Annotated[str | None, AfterValidator(_job_subnet)] = None
    #: no job, whatever its network, reaches the addresses where clouds serve instance
    #: metadata and credentials (169.254.0.0/16 but DNS, fd00:ec2::254, fe80::a9fe:a9fe);
    #: an agent whose host cannot guard refuses to start, a job that cannot be guarded is
    #: not started; false: a site whose jobs need them (docs/architecture.md, Jobs' networks)
    metadata_guard: bool = True
    #: the Linux capabilities a job's processes may hold, as capabilities(7) names them
    #: (``CHOWN`` or ``CAP_CHOWN``); every other one leaves the container's bounding set, so
    #: a job running as root is not root over the node. None: Podman's default set
    #: (``fuzzball_runtime.capabilities.DEFAULT``); ``[ALL]``: every one the agent has
    job_capabilities: list[str] | None = None
    #: the backstop of per-workflow volumes: how long a workflow's directory (its ephemeral
    #: volumes, its ingress markers) outlives its last run on this node when no Orchestrate
    #: that tells workflow ends was connected meanwhile (an older one, or none). While one
    #: is, a directory lives until Orchestrate says its workflow ended, however long that is
    workflow_volume_retention: Seconds = 7 * 24 * 3600.0


class HealthConfig(_Section):
    """A node's health settings (``health``, read by Substrate; issue 15).

    ``metrics-address`` narrows the node's metrics endpoints (fuzzball_node_* on 9101, the
    bundled node_exporter on 9100) to one address; ``metrics-disabled`` turns both off;
    ``disabled: true`` means monitoring never places a hold on this node.
    """

    metrics_address: str = ""
    metrics_disabled: bool = False
    disabled: bool = False


#: keys of v4.3's in-product node health model (reliability score, DEGRADED state, policy
#: engine, automated replacement), retired in v4.4: accepted under ``node-health`` with a
#: warning, so an upgraded configuration still loads
RETIRED_NODE_HEALTH_KEYS = frozenset(
    {
        "reliability-score",
        "reliability-threshold",
        "reliability-window",
        "degraded-threshold",
        "degraded-after",
        "policies",
        "policy-engine",
        "automated-replacement",
        "replacement",
        "replace-after",
    }
)
_config_log = logging.getLogger("fuzzball.config")


def _retired_node_health_keys(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    kept = {}
    for key, setting in value.items():
        spelled = "".join(f"-{c.lower()}" if c.isupper() else c for c in str(key))
        if spelled.replace("_", "-") in RETIRED_NODE_HEALTH_KEYS:
            _config_log.warning(
                "node-health.%s is retired (v4.4 replaced the node health model with the"
                " monitoring stack's rules) and has no effect",
                key,
            )
            continue
        kept[key] = setting
    return kept


class NodeHealthConfig(_Section):
    """What monitoring may do to nodes (``node-health``, read by Orchestrate).

    ``max-monitoring-held-percent``: monitoring holds cover at most this share of a pool's
    nodes (a provisioner definition's, or the static nodes'); further holds are refused.
    """

    max_monitoring_held_percent: float = Field(default=20.0, ge=0, le=100)


class MonitoringConfig(_Section):
    """The monitoring stack (``monitoring``; docs/monitoring.md).

    ``enabled``: ``fuzzball local up`` starts the bundled Prometheus and Alertmanager.
    ``node-metrics-mode``: how Prometheus reaches nodes: ``direct`` (their own ports, found
    through ``/v4/nodes/-/sd_config``) or ``proxy`` (through ``/v4/metrics/node``, over the
    node's stream). ``webhook-listen``: Orchestrate's Alertmanager receiver (mTLS, clients
    certified by the CA in ``ca-dir``; empty: no receiver). ``ca-dir``: the monitoring CA
    (``ca.crt``, ``ca.key``), made on first start; default ``data-dir/monitoring-ca``.
    """

    enabled: bool = True
    node_metrics_mode: Literal["direct", "proxy"] = "direct"
    webhook_listen: Listen = ""
    ca_dir: Path | None = None
    prometheus_listen: Listen = "127.0.0.1:9090"
    alertmanager_listen: Listen = "127.0.0.1:9093"
    scrape_interval: Seconds = 15.0
    evaluation_interval: Seconds = 15.0


class SchedulerConfig(_Section):
    """Which ``fuzzball.schedulers`` driver places jobs, and its own options."""

    driver: str = "default"
    options: dict[str, Any] = Field(default_factory=dict)


def _mirror(value: str) -> str:
    if not value.startswith(("http://", "https://")) or len(value) <= len("https://"):
        raise ValueError(f"a mirror is an http:// or https:// URL, got {value!r}")
    return value


class RegistryConfig(_Section):
    """Per-registry settings: mirrors tried in order before the registry itself."""

    mirrors: list[Annotated[str, AfterValidator(_mirror)]] = Field(default_factory=list)
    insecure: bool = False


class ImagesConfig(_Section):
    """Image pulls and the node's EROFS cache."""

    registries: dict[str, RegistryConfig] = Field(default_factory=dict)
    cache_max_bytes: ByteSize = Field(default=20 * 1024**3, gt=0)
    cache_write_back: bool = False
    #: seconds without upload progress after which a write-back is abandoned (the pull stays)
    cache_write_back_stall: Seconds = 60.0
    #: Orchestrate's REST address, from which nodes fetch fuzzball:// and fb:// images
    object_cache_url: str = ""
    #: the node token nodes present to the object cache (substrate.node-token's value)
    object_cache_token: str = ""


class PluginsConfig(_Section):
    """Hook plugins the processes must load (refuse to start otherwise) or must leave out."""

    require: list[str] = Field(default_factory=list)
    disable: list[str] = Field(default_factory=list)


class FederateMemberConfig(_Section):
    """One Orchestrate cluster joined to the federation, reached through its REST API."""

    name: str = Field(min_length=1)
    #: the member's REST address (``host:port`` or a URL), as a CLI context's address
    address: str = Field(min_length=1)
    #: a bearer token of an account on the member (Federate submits as that account)
    token: str = ""
    #: free-form labels the router may prefer or price (``cost: "3"``, ``site: onprem``)
    labels: dict[str, str] = Field(default_factory=dict)
    #: the CA an https member's certificate is verified with; empty: the system's roots
    ca_file: Path | None = None


class FederateConfig(_Section):
    """Federate's routing policy (a ``fuzzball.routers`` driver) and its member clusters."""

    #: how long a member may stay unreachable before the workflows it holds that have not
    #: started any job are submitted to another member (once each; ``federation/failover.py``)
    failover_grace: SecondsOrZero = 60.0

    router: str = "fit"
    router_options: dict[str, Any] = Field(default_factory=dict)
    clusters: list[FederateMemberConfig] = Field(default_factory=list)
    #: where Federate's REST gateway listens
    listen: Listen = Field(default="127.0.0.1:8090", min_length=1)
    #: seconds Federate waits for a member's API before calling it unreachable
    member_timeout: Seconds = 10.0
    #: the name Federate signs the identities it forwards to members with (the name members
    #: trust it by, in their ``orchestrate.trusted-federates``)
    name: str = Field(default="federate", min_length=1)


class TlsConfig(_Section):
    """Transport security (``tls``): the certificate Orchestrate serves REST and gRPC with (and
    Federate its REST), and the CA Substrate and the clients trust for them.

    A serving process needs ``cert-file`` and ``key-file``, or ``plaintext: true`` said
    explicitly (tests, a proxy terminating TLS in front); with neither it refuses to start.
    ``ca-file`` is the CA a client of the services trusts (Substrate dialling Orchestrate and
    fetching from its object cache); without it the system's roots are trusted.
    ``plaintext: true`` also makes Substrate dial without TLS.
    """

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    plaintext: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> TlsConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert-file and key-file go together: set both or neither")
        if self.plaintext and self.cert_file is not None:
            raise ValueError(
                "plaintext: true and cert-file both set: serve either plaintext or with the"
                " certificate"
            )
        return self


class ProvisionerDefinitionConfig(_Section):
    """One provisioner definition (``provisioner.definitions[]``): a shape of node a driver
    can create on demand, and the bounds the provisioning loop keeps for it."""

    id: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
    #: the ``fuzzball.provisioners`` driver (aws, gcp, oci, onprem, local, a site's own)
    driver: str = Field(min_length=1)
    cores: int = Field(ge=1)
    memory: ByteSize = Field(gt=0)
    devices: DeviceCounts = Field(default_factory=dict)
    #: carried by every node of this definition (jobs select them as node annotations)
    annotations: dict[str, str] = Field(default_factory=dict)
    cost_per_hour_estimate: float = Field(default=0.0, ge=0)
    #: how long from the request until one of its nodes takes work (Federate's routing
    #: weighs it against free capacity elsewhere; listed as ``startupTimeEstimate``)
    startup_time_estimate: SecondsOrZero = 300.0
    #: how many of its instances may exist at once (CREATING or CREATED)
    max_nodes: int = Field(default=1, ge=1)
    #: an empty node is deprovisioned after this long
    idle_timeout: Seconds = 300.0
    #: an instance is deprovisioned this long after it was created, busy or not (None: never)
    ttl: Seconds | None = None
    #: a job whose timeout would run past the node's ttl less this is not placed on it (its
    #: nodes carry ``fuzzball.io/place-until``)
    ttl_buffer: Seconds | None = None
    #: one job per node at a time (its nodes carry ``fuzzball.io/exclusive: "true"``)
    exclusive: bool = False
    #: the driver's own settings (instance type, image, inventory, commands, ...)
    config: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _buffer_within_ttl(self) -> ProvisionerDefinitionConfig:
        if self.ttl_buffer is not None and self.ttl is None:
            raise ValueError("ttl-buffer needs a ttl: it is kept free before an instance's ttl")
        if self.ttl_buffer is not None and self.ttl is not None and self.ttl_buffer >= self.ttl:
            raise ValueError(
                "ttl-buffer must be shorter than ttl: no job could be placed on its nodes"
            )
        return self


class ProvisionerConfig(_Section):
    """Nodes created on demand (``provisioner``): the definitions, and the deadlines of the
    provisioning loop."""

    definitions: list[ProvisionerDefinitionConfig] = Field(default_factory=list)
    #: an instance must register this long after it was requested ...
    registration_deadline: Seconds = 600.0
    #: ... and is deleted this long after that deadline if it never did (release notes 4.4)
    unregistered_grace: Seconds = 900.0
    #: the address nodes dial (their user data names it); empty: ``orchestrate.grpc-listen``
    node_address: str = ""

    @model_validator(mode="after")
    def _unique_ids(self) -> ProvisionerConfig:
        ids = [definition.id for definition in self.definitions]
        repeated = sorted({d for d in ids if ids.count(d) > 1})
        if repeated:
            raise ValueError(f"definition ids must be unique: {', '.join(repeated)} repeated")
        return self


class FuzzballConfig(_Section):
    """The whole file."""

    data_dir: Path = Field(default_factory=default_data_dir)
    database: DatabaseConfig = DatabaseConfig()
    accounts: AccountsConfig = AccountsConfig()
    orchestrate: OrchestrateConfig = OrchestrateConfig()
    substrate: SubstrateConfig = SubstrateConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    images: ImagesConfig = ImagesConfig()
    plugins: PluginsConfig = PluginsConfig()
    federate: FederateConfig = FederateConfig()
    tls: TlsConfig = TlsConfig()
    health: HealthConfig = HealthConfig()
    node_health: Annotated[NodeHealthConfig, BeforeValidator(_retired_node_health_keys)] = (
        NodeHealthConfig()
    )
    monitoring: MonitoringConfig = MonitoringConfig()
    provisioner: ProvisionerConfig = ProvisionerConfig()

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL of Orchestrate's store (SQLite in data-dir by default)."""
        return self.database.url or f"sqlite:///{self.data_dir / 'orchestrate.db'}"

    @property
    def node_metrics_listen(self) -> str:
        """Where the node serves fuzzball_node_* ("": off): ``substrate.metrics-listen``, else
        ``health.metrics-address`` port 9101."""
        return _node_listen(self, self.substrate.metrics_listen, 9101)

    @property
    def node_exporter_listen(self) -> str:
        """Where the node's bundled node_exporter listens ("": none is started)."""
        return _node_listen(self, self.substrate.node_exporter_listen, 9100)

    @property
    def monitoring_ca_dir(self) -> Path:
        """The monitoring CA's directory (``monitoring.ca-dir``, else in the data directory)."""
        return self.monitoring.ca_dir or self.data_dir / "monitoring-ca"


def _node_listen(config: FuzzballConfig, explicit: str | None, port: int) -> str:
    if config.health.metrics_disabled:
        return ""
    if explicit is not None:
        return explicit
    address = config.health.metrics_address or "0.0.0.0"
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


class ConfigError(InvalidArgument):
    """The configuration file is unreadable or invalid; processes refuse to start."""


class _ConfigLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's booleans and no duplicate keys.

    YAML 1.1 reads ``on``, ``off``, ``yes`` and ``no`` as booleans, so the documented
    ``default-retry: {on: [node]}`` had the key ``True``; only ``true`` and ``false`` are
    booleans here, as in workflow files. A key written twice is refused: the first block
    would be dropped in silence.
    """

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _error_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path or "(top level)"


def _describe_error(error: Any) -> str:
    path = _error_path(tuple(error["loc"]))
    if error["type"] == "extra_forbidden":
        return f"{path}: unknown key"
    # pydantic prefixes the message of a ValueError a validator raised; the key says where
    return f"{path}: {error['msg'].removeprefix('Value error, ')}"


def parse_config(data: Any, *, source: str = "<config>") -> FuzzballConfig:
    """Validate already-parsed YAML content; raise InvalidArgument naming every bad key."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the configuration must be a mapping of keys to values")
    try:
        return FuzzballConfig.model_validate(data)
    except ValidationError as exc:
        problems = [_describe_error(e) for e in exc.errors()]
        raise ConfigError(
            f"{source}: invalid configuration: " + "; ".join(problems),
            details=[{"field": p.split(":", 1)[0], "description": p} for p in problems],
        ) from None


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The configuration file to read: ``explicit``, else ``$FUZZBALL_CONFIG``, else none."""
    if explicit:
        return Path(explicit)
    from_env = os.environ.get(CONFIG_ENV)
    return Path(from_env) if from_env else None


def load_config(explicit: str | os.PathLike[str] | None = None) -> FuzzballConfig:
    """Read and validate the configuration; the defaults when no file is named."""
    path = config_path(explicit)
    if path is None:
        return FuzzballConfig()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot read configuration {path}: {reason}") from None
    try:
        data = yaml.load(text, Loader=_ConfigLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"{path}:{where}: {problem}") from None
    return parse_config(data, source=str(path))
