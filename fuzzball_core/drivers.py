"""Driver interfaces: the contracts behind the named-driver entry-point groups.

A driver is one implementation chosen by name (the configuration, a URI scheme or a provisioner
definition gives the name) and loaded with stevedore's ``DriverManager`` from its group:

==========================  ======================  =========================================
group                       interface               chosen by
==========================  ======================  =========================================
``fuzzball.schedulers``     :class:`Scheduler`      ``scheduler.driver`` in the configuration
``fuzzball.provisioners``   :class:`Provisioner`    each provisioner definition's ``driver``
``fuzzball.image_backends`` :class:`ImageBackend`   the image URI's scheme (docker, oras, ...)
``fuzzball.routers``        :class:`Router`         ``federate.router`` in the configuration
``fuzzball.storage_drivers`` :class:`StorageDriver` a storage class's ``driver``
==========================  ======================  =========================================

An entry point names a class; the loader instantiates it with the driver's own configuration
mapping (``{}`` when none is given).
"""

from __future__ import annotations

import json
import os
import types
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, SecretBytes, SecretStr

from fuzzball_core.backoff import Backoff
from fuzzball_core.errors import (
    FailedPrecondition,
    FuzzballError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
)
from fuzzball_core.scheduling import Scheduler
from fuzzball_core.vocabulary import InstanceState

__all__ = [
    "BOOTSTRAP_CA_PATH",
    "BOOTSTRAP_CONFIG_PATH",
    "CREATE_REFUSALS",
    "DEFAULT_IMAGE_RETRY",
    "DRIVER_INTERFACES",
    "ENV_SCRIPTS_KEY",
    "ENV_SHELL_KEY",
    "IMAGE_CONFIG_SUFFIX",
    "ClusterOffer",
    "ImageBackend",
    "ImageConfig",
    "InstanceSpec",
    "Launch",
    "NodeBootstrap",
    "ProvisionedInstance",
    "Provisioner",
    "ResolvedImage",
    "Router",
    "Scheduler",
    "StorageDriver",
    "VolumeLocation",
    "image_config_path",
]


# ---------------------------------------------------------------------------------------------
# Image backends
# ---------------------------------------------------------------------------------------------


#: the suffix of the image config kept beside a cached EROFS file (``X.erofs`` ->
#: ``X.config.json``)
IMAGE_CONFIG_SUFFIX = ".config.json"
#: the kept config's keys for :attr:`ImageConfig.env_scripts` and :attr:`ImageConfig.env_shell`
#: (not OCI's: only the oras backend writes them; an image's own config naming them changes
#: nothing but how that image's own jobs start)
ENV_SCRIPTS_KEY = "FuzzballApptainerEnvScripts"
ENV_SHELL_KEY = "FuzzballApptainerEnvShell"


def _strings(value: Any) -> tuple[str, ...] | None:
    """A JSON list of strings as a tuple; None for null or absent (OCI's "not set")."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidArgument(f"image config: expected a list of strings, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class ImageConfig:
    """What an image says about running it: the ``config`` object of an OCI image config.

    ``entrypoint`` and ``cmd`` are None when the image does not set them (an empty list is
    set, and empty); ``env`` holds ``NAME=VALUE`` entries; ``working_dir`` and ``user`` are
    empty when unset (``user`` is ``NAME``, ``UID``, ``NAME:GROUP`` or ``UID:GID`` as in
    the image, resolved against the image's /etc/passwd and /etc/group when a job starts).

    ``env_scripts`` and ``env_shell`` are Apptainer's, not OCI's: the names of a SIF image's
    environment scripts (``/.singularity.d/env/*.sh``, which ``apptainer exec`` and ``run``
    source before the command), empty when its tree has none, None when nobody looked (any
    image but a SIF a node unpacked, or one unpacked before they were looked for), and
    whether the image has the ``/bin/sh`` to source them with. The kept config carries them
    under :data:`ENV_SCRIPTS_KEY` and :data:`ENV_SHELL_KEY`, only where they were looked
    for, so that every other image's config document stays what it was.
    """

    env: tuple[str, ...] = ()
    entrypoint: tuple[str, ...] | None = None
    cmd: tuple[str, ...] | None = None
    working_dir: str = ""
    user: str = ""
    env_scripts: tuple[str, ...] | None = None
    env_shell: bool = False

    @classmethod
    def from_oci(cls, document: Mapping[str, Any]) -> ImageConfig:
        """Read an OCI or Docker image config: the whole document (with its ``config``
        object) or that object alone, as Apptainer stores it in a SIF."""
        inner = document.get("config") if isinstance(document.get("config"), dict) else None
        config: Mapping[str, Any] = inner if inner is not None else document
        return cls(
            env=_strings(config.get("Env")) or (),
            entrypoint=_strings(config.get("Entrypoint")),
            cmd=_strings(config.get("Cmd")),
            working_dir=str(config.get("WorkingDir") or ""),
            user=str(config.get("User") or ""),
            env_scripts=_strings(config.get(ENV_SCRIPTS_KEY)),
            env_shell=config.get(ENV_SHELL_KEY) is True,
        )

    @property
    def runs_something(self) -> bool:
        """Whether the image names a command of its own (a non-empty Entrypoint or Cmd)."""
        return bool(self.entrypoint or self.cmd)

    def as_oci(self) -> dict[str, Any]:
        """The OCI ``config`` object (what :meth:`from_oci` reads back)."""
        document: dict[str, Any] = {"Env": list(self.env)}
        if self.entrypoint is not None:
            document["Entrypoint"] = list(self.entrypoint)
        if self.cmd is not None:
            document["Cmd"] = list(self.cmd)
        if self.working_dir:
            document["WorkingDir"] = self.working_dir
        if self.user:
            document["User"] = self.user
        if self.env_scripts is not None:
            document[ENV_SCRIPTS_KEY] = list(self.env_scripts)
        if self.env_scripts:
            document[ENV_SHELL_KEY] = self.env_shell
        return document

    def write_beside(self, image: Path) -> Path:
        """Keep this config next to the cached EROFS file ``image`` (written atomically)."""
        path = image_config_path(image)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps(self.as_oci(), separators=(",", ":")))
        os.replace(partial, path)
        return path

    @classmethod
    def read_beside(cls, image: Path) -> ImageConfig | None:
        """The config kept next to the EROFS file ``image``; None when it has none (an image
        converted before configs were kept, or one whose source carries no config)."""
        try:
            text = image_config_path(image).read_text()
        except FileNotFoundError:
            return None
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise InvalidArgument(f"{image_config_path(image)}: not JSON: {exc}") from None
        return cls.from_oci(document)


def image_config_path(image: Path) -> Path:
    """Where the config of the cached EROFS file ``image`` is kept."""
    return image.with_name(image.name.removesuffix(".erofs") + IMAGE_CONFIG_SUFFIX)


@dataclass(frozen=True)
class ResolvedImage:
    """An image reference pinned to immutable content.

    ``digest`` identifies the content (``sha256:...``) and keys every node cache; ``size`` is
    the total bytes a node will download; ``platform`` is ``os/arch[/variant]``; ``config``
    is what the image says about running it, None where the backend cannot tell at
    submission (Orchestrate then lets the node decide).
    """

    uri: str
    digest: str
    size: int
    platform: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    config: ImageConfig | None = None


#: How image requests are retried while their source is unreachable, unless a backend's
#: configuration says otherwise: 6 attempts, the delays doubling from 0.25 s up to 4 s.
DEFAULT_IMAGE_RETRY = Backoff(initial=0.25, factor=2.0, maximum=4.0, attempts=6)


class ImageBackend(ABC):
    """Fetches images of one URI scheme and hands the node runtime an EROFS file.

    A backend may also *store* images (the object cache's ``fuzzball`` scheme does): the node
    writes pulled images back and stores workflow-built ones through :meth:`store`, retried on
    the backend's own :attr:`retry` schedule.
    """

    #: URI schemes this backend serves, e.g. ``("docker",)``.
    schemes: tuple[str, ...] = ()
    #: the schedule this backend's requests are retried on (a backend reading a ``retry``
    #: setting sets its own); the node retries a :meth:`store` on it too
    retry: Backoff = DEFAULT_IMAGE_RETRY

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config: Mapping[str, Any] = config or {}

    def check_reference(self, uri: str) -> None:
        """Raise ``InvalidArgument`` when ``uri`` cannot name an image this backend pins, as
        far as that is told without a registry (``fuzzball workflow validate`` asks it
        offline, before a submission would). The default checks nothing."""
        return None

    @abstractmethod
    def resolve(self, uri: str, *, credentials: Mapping[str, str] | None = None) -> ResolvedImage:
        """Pin ``uri`` to a digest without downloading layers (runs at submission time).

        Raises ``NotFound``, ``Unauthenticated`` or ``InvalidArgument`` (e.g. no image for the
        node's architecture) so a bad image fails the submission rather than a job.
        """

    @abstractmethod
    def fetch(
        self,
        image: ResolvedImage,
        cache_dir: Path,
        *,
        credentials: Mapping[str, str] | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> Path:
        """Make ``image`` available as an EROFS file under ``cache_dir`` and return its path.

        The image's config is kept beside the file (:meth:`ImageConfig.write_beside`, before
        the file appears) when the source carries one; the node reads it back with
        :meth:`ImageConfig.read_beside`. ``progress(step, done, total)`` is called as layers
        download and convert.
        """

    def store_unavailable(self) -> str | None:
        """Why :meth:`store` cannot work on this node (a missing setting, say); None if it can.

        Checked before the node spends time on an image that would have nowhere to go.
        """
        return f"the {'/'.join(self.schemes) or type(self).__name__} image backend stores no images"

    def store(
        self,
        target: Mapping[str, Any],
        image: Path,
        *,
        progress: Callable[[str, int, int], None] | None = None,
        timeout: float = 60.0,
    ) -> Mapping[str, Any]:
        """Store the EROFS file ``image`` at ``target`` and return the store's answer.

        ``target`` is the address the image payload names (for the object cache: ``owner``,
        ``scope``, ``name``, ``definition-hash`` and ``ttl``); the answer carries the stored
        ``digest``. ``progress(step, done, total)`` is called as bytes move; ``timeout`` bounds
        each wait for the store. Raises ``Unavailable`` for a failure worth retrying; backends
        that store nothing keep this default, which raises ``FailedPrecondition``.
        """
        raise FailedPrecondition(self.store_unavailable() or "this image backend stores no images")


# ---------------------------------------------------------------------------------------------
# Provisioners
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InstanceSpec:
    """What a provisioner definition offers: one shape of node its driver can create.

    ``definition`` is the definition's id; ``driver_config`` its driver-specific settings
    (an AWS instance type and AMI, an on-prem inventory, ...), exactly as configured.
    """

    definition: str
    cores: int
    memory: int
    devices: Mapping[str, int] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    cost_per_hour: float = 0.0
    driver_config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Launch:
    """One instance Orchestrate asks a driver to create.

    ``name`` is chosen by Orchestrate and never reused (the node registers under it; a driver
    names or tags the instance with it). ``user_data`` is what the instance boots with (see
    :class:`NodeBootstrap`): it carries the instance's one-time registration token and no
    other secret. A driver must not log it.
    """

    name: str
    user_data: str


@dataclass(frozen=True)
class ProvisionedInstance:
    """An instance as its driver sees it.

    ``instance_id`` is the driver's own id (an EC2 instance id, an inventory host, a pid);
    ``name`` the :attr:`Launch.name` it was created for; ``state`` one of
    :class:`~fuzzball_core.vocabulary.InstanceState`'s values; ``detail`` why, for ERROR.
    """

    instance_id: str
    name: str
    definition: str
    state: InstanceState = InstanceState.CREATING
    address: str | None = None
    detail: str = ""


class Provisioner(ABC):
    """Creates and deletes compute nodes on one infrastructure (AWS, GCP, OCI, on-prem, ...).

    A driver is a thin layer over its infrastructure's own API. Orchestrate's provisioning
    loop decides *when* (waiting work no node can hold, idle nodes, deadlines) and keeps the
    records; the driver only does what it is told and reports what exists. Calls come from a
    worker thread, never from the engine's pass, so a driver may block on its API.

    Rules every driver keeps:

    - :meth:`create` returns as soon as the infrastructure accepted the request; the node
      registers with Orchestrate by itself, from its user data.
    - :meth:`delete` is idempotent and deletes only the instance named: an id the driver
      does not know, or one already gone, is not an error.
    - Nothing secret in logs or errors: the user data holds the registration token.
    - ``directives`` (the API's ``backendDirectives``) a driver does not understand are refused
      by :meth:`check_directives` (InvalidArgument naming them), never ignored.
    """

    #: the backend directives this driver understands: name -> what it does
    directives: Mapping[str, str] = {}

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config: Mapping[str, Any] = config or {}

    def secret_settings(self) -> frozenset[tuple[str, ...]]:
        """The keys (paths) of a definition's ``config`` that hold credentials: the central
        configuration seals them at rest and shows them redacted. The default is none; a
        driver reading its settings with a pydantic model answers :func:`secret_fields` of
        it."""
        return frozenset()

    def check_definition(self, definition: InstanceSpec) -> None:  # noqa: B027  (optional)
        """Refuse a definition this driver could never create (``InvalidArgument`` naming the
        setting), when the configuration is loaded; the default accepts any."""

    def check_directives(self, directives: Mapping[str, str]) -> None:
        """Refuse directives this driver does not understand, naming them."""
        unknown = sorted(set(directives) - set(self.directives))
        if unknown:
            known = ", ".join(sorted(self.directives)) or "none"
            raise InvalidArgument(
                f"backendDirectives: {', '.join(unknown)} not understood by this provisioner"
                f" (it understands: {known})"
            )

    def check_request(
        self,
        definition: InstanceSpec,
        *,
        annotations: Mapping[str, str],
        directives: Mapping[str, str],
    ) -> None:
        """Refuse, before anything is recorded or created, a request this driver would refuse
        whatever its infrastructure says (``InvalidArgument`` naming the field: a directive's
        value, an annotation it cannot carry). It must not call the infrastructure. The
        default checks the directives' names (:meth:`check_directives`)."""
        self.check_directives(directives)

    @abstractmethod
    def create(
        self,
        definition: InstanceSpec,
        launches: Sequence[Launch],
        *,
        annotations: Mapping[str, str],
        ttl: float | None = None,
        directives: Mapping[str, str] | None = None,
    ) -> Sequence[ProvisionedInstance]:
        """Create one instance per launch of shape ``definition``; return them in order.

        ``annotations`` are the instance's (tags or labels where the infrastructure has them);
        ``ttl`` the seconds it may live (Orchestrate deletes it then; a driver may also tell
        its infrastructure). Raises one of :data:`CREATE_REFUSALS` when the infrastructure
        refused and nothing was created; an instance that failed on its own comes back with
        state ERROR and a ``detail``. A launch whose outcome is unknown (the call timed out,
        the connection dropped) comes back CREATING with an empty ``instance_id`` and a
        ``detail``; any other error raised means the same for every launch. Orchestrate then
        finds such an instance by its name (:meth:`list_instances`) and deletes it if it never
        registers, so a lost answer never leaves a machine running unrecorded.
        """

    @abstractmethod
    def delete(self, instance_id: str) -> None:
        """Delete one instance. Idempotent: an instance already gone is not an error."""

    @abstractmethod
    def describe(self, instance_id: str) -> ProvisionedInstance | None:
        """One instance as the infrastructure sees it now; None when it does not exist."""

    @abstractmethod
    def list_instances(self) -> Sequence[ProvisionedInstance]:
        """Every instance this driver created and that is not yet deleted, each with the
        :attr:`Launch.name` it was created for as its ``name`` (the cloud drivers read it
        from the ``fuzzball-instance`` tag or label): Orchestrate finds by it the instances
        whose create call's answer it never got."""


#: The errors with which an infrastructure refuses a create call: nothing was created. Any
#: other (``Unavailable``: a timeout, a dropped connection, a server error) leaves it unknown
#: whether the instance exists.
CREATE_REFUSALS: tuple[type[FuzzballError], ...] = (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Unauthenticated,
)


def secret_fields(model: type[BaseModel]) -> frozenset[tuple[str, ...]]:
    """The paths of ``model``'s fields holding a ``SecretStr`` or ``SecretBytes`` (alone, in
    an optional, a list or a mapping), through nested models; each path once by the fields'
    aliases and once by their names, since a model may accept both."""
    paths: set[tuple[str, ...]] = set()
    for name, field_info in model.model_fields.items():
        keys = {name, field_info.alias or name}
        if _holds_secret(field_info.annotation):
            paths.update((key,) for key in keys)
        for nested in _models_in(field_info.annotation):
            paths.update((key, *inner) for key in keys for inner in secret_fields(nested))
    return frozenset(paths)


def _holds_secret(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, (SecretStr, SecretBytes)):
        return True
    return any(_holds_secret(arg) for arg in get_args(annotation))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field holds directly or as an optional (not in a list or mapping: their
    paths would need a key or index)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for arg in get_args(annotation) for m in _models_in(arg)]
    return []


#: where :class:`NodeBootstrap`'s user data writes the node's configuration
BOOTSTRAP_CONFIG_PATH = "/etc/fuzzball/config.yaml"
#: where it writes the cluster's CA certificate (when the cluster has one)
BOOTSTRAP_CA_PATH = "/etc/fuzzball/ca.pem"
_CLOUD_CONFIG = "#cloud-config\n"


@dataclass(frozen=True)
class NodeBootstrap:
    """What a provisioned node boots with: the user data every driver hands its instance.

    The user data is a cloud-config document that writes a Fuzzball configuration file
    (mode 0600, so neither cloud-init's console output nor other users see the token) and
    starts ``fuzzball-substrate`` on it. Its only secret is ``registration_token``: the
    instance's own one-time token, good for registering this instance's name until its
    deadline and nothing else; the cluster's node token never leaves Orchestrate.

    A driver that does not boot cloud images (``local``, ``onprem``) reads it back with
    :meth:`parse` and starts the Substrate itself from :meth:`config_document`.
    """

    orchestrate_address: str
    node_name: str
    registration_token: str
    #: the PEM of the cluster's CA, so the node trusts Orchestrate's certificate; "" for none
    ca_pem: str = ""
    #: the node dials Orchestrate without TLS (the cluster's ``tls.plaintext``)
    plaintext: bool = False
    #: further ``substrate`` settings (work-dir, cores, ...) for drivers that need them
    substrate: Mapping[str, Any] = field(default_factory=dict)

    def config_document(self, ca_file: str = BOOTSTRAP_CA_PATH) -> dict[str, Any]:
        """The Fuzzball configuration file's content for this node, its CA (when it has one)
        read from ``ca_file``."""
        substrate: dict[str, Any] = {
            **dict(self.substrate),
            "orchestrate-address": self.orchestrate_address,
            "node-name": self.node_name,
            "node-token": self.registration_token,
        }
        document: dict[str, Any] = {"substrate": substrate}
        tls: dict[str, Any] = {}
        if self.ca_pem:
            tls["ca-file"] = ca_file
        if self.plaintext:
            tls["plaintext"] = True
        if tls:
            document["tls"] = tls
        return document

    def render(self) -> str:
        """The cloud-config user data."""
        files = [
            {
                "path": BOOTSTRAP_CONFIG_PATH,
                "permissions": "0600",
                "owner": "root:root",
                "content": json.dumps(self.config_document(), indent=1, sort_keys=True),
            }
        ]
        if self.ca_pem:
            files.append({"path": BOOTSTRAP_CA_PATH, "permissions": "0644", "content": self.ca_pem})
        document = {
            "write_files": files,
            "runcmd": [["fuzzball-substrate", "--config", BOOTSTRAP_CONFIG_PATH, "serve"]],
        }
        # JSON is YAML: cloud-init reads this, and parse() needs no YAML library here
        return _CLOUD_CONFIG + json.dumps(document, indent=1)

    @classmethod
    def parse(cls, user_data: str) -> NodeBootstrap:
        """Read back what :meth:`render` wrote (``InvalidArgument`` for anything else)."""
        if not user_data.startswith(_CLOUD_CONFIG):
            raise InvalidArgument("user data: not a Fuzzball node's cloud-config")
        try:
            document = json.loads(user_data[len(_CLOUD_CONFIG) :])
            files = {item["path"]: item["content"] for item in document["write_files"]}
            config = json.loads(files[BOOTSTRAP_CONFIG_PATH])
            substrate = dict(config["substrate"])
            address = substrate.pop("orchestrate-address")
            name = substrate.pop("node-name")
            token = substrate.pop("node-token")
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgument(
                f"user data: not a Fuzzball node's cloud-config ({exc})"
            ) from None
        return cls(
            orchestrate_address=str(address),
            node_name=str(name),
            registration_token=str(token),
            ca_pem=str(files.get(BOOTSTRAP_CA_PATH, "")),
            plaintext=bool((config.get("tls") or {}).get("plaintext", False)),
            substrate=substrate,
        )


# ---------------------------------------------------------------------------------------------
# Federate routers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterOffer:
    """One member cluster as a router sees it when choosing where a workflow goes."""

    name: str
    free_cores: int
    free_memory: int
    free_devices: Mapping[str, int] = field(default_factory=dict)
    largest_node_cores: int = 0
    largest_node_memory: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    healthy: bool = True


class Router(ABC):
    """Federate's policy: which member cluster runs a workflow."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config: Mapping[str, Any] = config or {}

    @abstractmethod
    def route(self, workflow: Mapping[str, Any], clusters: Sequence[ClusterOffer]) -> Sequence[str]:
        """Return the names of the clusters that can run ``workflow``, best first.

        An empty sequence means no member can run it; Federate then rejects the submission.
        """

    def use_hooks(self, hook: Any) -> None:  # noqa: B027  (optional: the default ignores hooks)
        """Receive the plugin manager's hook relay once, before the first :meth:`route`.

        A router that lets plugins weigh in (``fuzzball_federate_score_cluster``) keeps
        ``hook`` and calls it while routing; the default ignores it.
        """

    def rejections(
        self, workflow: Mapping[str, Any], clusters: Sequence[ClusterOffer]
    ) -> Mapping[str, str]:
        """Why each member that :meth:`route` would not choose is refused, by cluster name.

        Federate asks only after :meth:`route` chose none, to name the reasons in its refusal.
        The default gives none, and each member is reported as "not chosen by the router".
        """
        return {}


# ---------------------------------------------------------------------------------------------
# Storage drivers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VolumeLocation:
    """Where a job's volume lives: the node-side mount contract.

    Orchestrate resolves each ``volume://SCOPE/CLASS[/NAME]`` reference of a job to one of
    these (per the workflow's owner) and sends it with the assignment; the node hands it to
    the :class:`StorageDriver` named by ``driver``, which answers the host directory to bind.
    Nothing in it comes from the user unchecked: ``volume_id`` is Orchestrate's id (or, for a
    per-workflow volume, empty with ``workflow_id`` and ``name`` set), ``organization_id`` the
    owner's organization, ``parameters`` the storage class's.

    ``workflow_id`` is set for per-workflow (non-persistent) volumes; ``node_id`` names the
    node holding a node-local persistent volume (None until a job first used it).
    ``capacity_bytes`` is the storage class's ``capacity`` (0: none): the most a volume may
    hold, enforced by a driver that can (:attr:`StorageDriver.enforces_capacity`) and checked
    by the node before every ingress transfer whatever the driver.
    """

    driver: str
    storage_class: str
    organization_id: str
    volume_id: str = ""
    name: str = ""
    workflow_id: str | None = None
    node_id: str | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)
    capacity_bytes: int = 0

    @property
    def persistent(self) -> bool:
        """Whether the volume outlives its workflow (it has an id of its own)."""
        return bool(self.volume_id)

    def to_json(self) -> dict[str, Any]:
        """The JSON object sent in the assignment."""
        return {
            "driver": self.driver,
            "storageClass": self.storage_class,
            "organizationId": self.organization_id,
            "volumeId": self.volume_id,
            "name": self.name,
            "workflowId": self.workflow_id,
            "nodeId": self.node_id,
            "parameters": dict(self.parameters),
            "capacityBytes": self.capacity_bytes,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> VolumeLocation:
        """Read :meth:`to_json`'s object back; InvalidArgument naming a malformed field."""
        if not isinstance(document, Mapping):
            raise InvalidArgument("volume location: expected an object")
        if document.get("error"):  # Orchestrate could not resolve it any more
            raise InvalidArgument(str(document["error"]))
        text = {}
        for key in ("driver", "storageClass", "organizationId", "volumeId", "name"):
            value = document.get(key, "")
            if not isinstance(value, str):
                raise InvalidArgument(f"volume location: {key} must be a string")
            text[key] = value
        optional = {}
        for key in ("workflowId", "nodeId"):
            value = document.get(key)
            if value is not None and not isinstance(value, str):
                raise InvalidArgument(f"volume location: {key} must be a string or null")
            optional[key] = value
        parameters = document.get("parameters") or {}
        if not isinstance(parameters, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in parameters.items()
        ):
            raise InvalidArgument("volume location: parameters must map strings to strings")
        if not text["driver"]:
            raise InvalidArgument("volume location: driver is required")
        capacity = document.get("capacityBytes", 0)
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise InvalidArgument("volume location: capacityBytes must be a whole number >= 0")
        return cls(
            driver=text["driver"],
            storage_class=text["storageClass"],
            organization_id=text["organizationId"],
            volume_id=text["volumeId"],
            name=text["name"],
            workflow_id=optional["workflowId"],
            node_id=optional["nodeId"],
            parameters=dict(parameters),
            capacity_bytes=capacity,
        )


class StorageDriver(ABC):
    """A kind of storage volumes live on (entry-point group ``fuzzball.storage_drivers``,
    chosen by a storage class's ``driver``).

    Orchestrate reads only the class attributes and :meth:`check_parameters` (to accept a
    storage class and to place jobs); each node calls :meth:`fit_capacity` when a run takes a
    persistent volume no other run of the node uses, :meth:`directory` before a job that
    mounts a volume starts (and to measure it after), and :meth:`remove` when a volume's data
    is to go. ``work_dir``
    is the node's Substrate work directory (node-local data lives beneath it).
    """

    #: every node sees the same bytes of a volume (an NFS or Lustre tree): jobs of one
    #: workflow sharing a per-workflow volume may run on different nodes
    shared: bool = False
    #: a persistent volume lives on one node, and the jobs using it are placed there
    node_local: bool = False
    #: the driver keeps a volume within its class's ``capacity`` while jobs write to it (a
    #: quota); without, the capacity is only checked before ingress transfers
    enforces_capacity: bool = False

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config: Mapping[str, Any] = config or {}

    def check_parameters(self, parameters: Mapping[str, str]) -> list[tuple[str, str]]:
        """``(parameter, why)`` for each of a storage class's ``parameters`` this driver
        cannot use (unknown ones included); empty when all are fine. The default takes none."""
        return [(name, "this driver takes no parameters") for name in sorted(parameters)]

    @abstractmethod
    def directory(self, location: VolumeLocation, *, work_dir: Path) -> Path:
        """The host directory holding ``location``'s data on this node, created if it is not
        there yet, and never outside the driver's own root (the names in ``location`` are
        Orchestrate's ids, checked again here)."""

    @abstractmethod
    def remove(self, location: VolumeLocation, *, work_dir: Path) -> None:
        """Delete ``location``'s data on this node (nothing when it is not here); an error
        naming the path and the reason when it could not be deleted."""

    def fit_capacity(  # noqa: B027  (optional: the default does nothing)
        self, location: VolumeLocation, *, work_dir: Path
    ) -> None:
        """Bring a persistent volume to its class's ``capacity`` where that is unsafe while
        a job uses it (the ``local`` driver grows its filesystem). The node calls it when a
        run takes the volume and no other run on the node uses it, before :meth:`directory`;
        :meth:`directory` itself must leave a volume in use as it is. The default does
        nothing."""


#: the entry-point group of the image backends, each named by the URI scheme it serves
IMAGE_BACKENDS = "fuzzball.image_backends"

#: entry-point group -> the interface every driver in it implements
DRIVER_INTERFACES: dict[str, type] = {
    "fuzzball.schedulers": Scheduler,
    "fuzzball.provisioners": Provisioner,
    IMAGE_BACKENDS: ImageBackend,
    "fuzzball.routers": Router,
    "fuzzball.storage_drivers": StorageDriver,
}
