"""The ``gcp`` provisioner: Compute Engine instances through google-cloud-compute.

A thin layer over Compute Engine's API (the SDK's REST transport): :meth:`GcpProvisioner.create`
is one ``instances.insert`` per launch, :meth:`~GcpProvisioner.delete` one
``instances.delete``, :meth:`~GcpProvisioner.list_instances` one ``instances.aggregatedList``
filtered on the cluster's label. Orchestrate's loop decides when; this module only says how.

A definition's ``config`` (``provisioner.definitions[].config``) names the account and the
instance; the account keys may also be given to the driver itself, as every account's
defaults::

    # the account
    project: my-project
    cluster: prod                 # the fuzzball-cluster label value (default "fuzzball")
    credentials-file: /etc/fuzzball/gcp-sa.json   # a service-account key; optional:
                                  # application default credentials otherwise
    endpoint-url: https://...     # optional: a private endpoint (the tests: a stand-in)
    # the instance
    zone: us-central1-a
    machine-type: a3-highgpu-8g
    image: projects/my-project/global/images/family/fuzzball-node
    disk-size-gb: 100             # default 50
    disk-type: pd-ssd             # optional
    network: global/networks/default      # optional (the default network)
    subnetwork: regions/us-central1/subnetworks/hpc
    external-ip: false            # the default: nodes reach Orchestrate privately
    service-account: node@my-project.iam.gserviceaccount.com   # optional, scopes below
    scopes: [https://www.googleapis.com/auth/cloud-platform]
    accelerators: {nvidia-tesla-t4: 1}    # for machine types without built-in GPUs
    market: spot                  # or on-demand (the default)
    network-tags: [fuzzball-node]
    labels: {team: hpc}

Backend directives (per request): ``market``, ``zone``.

An instance's Compute Engine name is its Fuzzball name when that is a valid one (lower case,
a letter first, at most 63 characters) and a name derived from it otherwise; the Fuzzball name,
the definition and the annotations are in its metadata (``fuzzball-instance``,
``fuzzball-definition``, ``fuzzball-annotations``), the cluster in its labels. Its user data is
the ``user-data`` metadata item cloud-init reads (the one-time registration token and the
cluster's CA certificate, no other secret). An instance id is ``ZONE/NAME``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import requests
from pydantic import Field, field_validator

from fuzzball_core.drivers import Launch, ProvisionedInstance
from fuzzball_core.errors import (
    FailedPrecondition,
    FuzzballError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
)
from fuzzball_core.vocabulary import InstanceState
from fuzzball_provisioners.cloud import (
    ANNOTATIONS_KEY,
    CLUSTER_LABEL,
    DEFINITION_LABEL,
    INSTANCE_LABEL,
    DriverSettings,
)
from fuzzball_provisioners.cloud_base import CloudProvisioner
from fuzzball_provisioners.sdk_modules import sdk_module

if TYPE_CHECKING:
    from google.api_core import client_options
    from google.api_core import exceptions as api_exceptions
    from google.auth import exceptions as auth_exceptions
    from google.cloud import compute_v1
    from google.oauth2 import service_account
else:  # loaded when the driver first uses them (sdk_modules says why)
    client_options = sdk_module("google.api_core.client_options")
    api_exceptions = sdk_module("google.api_core.exceptions")
    auth_exceptions = sdk_module("google.auth.exceptions")
    compute_v1 = sdk_module("google.cloud.compute_v1")
    service_account = sdk_module("google.oauth2.service_account")

__all__ = ["GcpDefinition", "GcpProvisioner", "GcpSettings", "instance_name"]

log = logging.getLogger("fuzzball.provisioners.gcp")

_SCOPE = "https://www.googleapis.com/auth/compute"
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")

_STATES = {
    "PROVISIONING": InstanceState.CREATING,
    "STAGING": InstanceState.CREATING,
    "RUNNING": InstanceState.CREATED,
    "REPAIRING": InstanceState.CREATED,
    "STOPPING": InstanceState.DELETING,
    "PENDING_STOP": InstanceState.DELETING,
    "SUSPENDING": InstanceState.ERROR,
    "SUSPENDED": InstanceState.ERROR,
    "TERMINATED": InstanceState.ERROR,
}


def instance_name(name: str) -> str:
    """The Compute Engine name of the instance named ``name`` by Orchestrate: ``name`` itself
    when Compute Engine takes it, else a name made of its valid characters and a hash of it
    (two Fuzzball names never share one)."""
    if _NAME.fullmatch(name):
        return name
    cleaned = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"fb-{cleaned[:48]}-{digest}".replace("--", "-")


def _label_value(value: str) -> str:
    """``value`` as a label value (lower case, ``[a-z0-9_-]``, at most 63 characters)."""
    return re.sub(r"[^a-z0-9_-]", "-", value.lower())[:63]


class GcpSettings(DriverSettings):
    """The driver's own configuration."""

    project: str = Field(min_length=1)
    cluster: str = "fuzzball"
    credentials_file: Path | None = None
    endpoint_url: str | None = None

    @field_validator("cluster")
    @classmethod
    def _label(cls, value: str) -> str:
        if not value or not _LABEL_VALUE.fullmatch(value):
            raise ValueError("must be a label value: 1 to 63 of a-z, 0-9, _ and -")
        return value


class GcpDefinition(DriverSettings):
    """A definition's ``driver-config``: the instance it asks Compute Engine for."""

    zone: str
    machine_type: str = Field(min_length=1)
    image: str = Field(min_length=1)
    disk_size_gb: int = Field(default=50, ge=10)
    disk_type: str | None = None
    network: str | None = None
    subnetwork: str | None = None
    external_ip: bool = False
    service_account: str | None = None
    scopes: list[str] = Field(
        default_factory=lambda: ["https://www.googleapis.com/auth/cloud-platform"]
    )
    accelerators: dict[str, int] = Field(default_factory=dict)
    market: Literal["on-demand", "spot"] = "on-demand"
    network_tags: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        if not _ZONE.fullmatch(value):
            raise ValueError("not a Compute Engine zone (like us-central1-a)")
        return value

    @field_validator("accelerators")
    @classmethod
    def _counts(cls, value: dict[str, int]) -> dict[str, int]:
        if any(count < 1 for count in value.values()):
            raise ValueError("each accelerator count must be at least 1")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if key.startswith("fuzzball-"):
                raise ValueError(f"{key!r}: fuzzball- labels are the driver's own")
            if not _LABEL_KEY.fullmatch(key) or not _LABEL_VALUE.fullmatch(text):
                raise ValueError(f"{key!r}: labels take a-z, 0-9, _ and - (63 at most)")
        return value


_DIRECTIVES = {
    "market": "spot or on-demand, for these instances instead of the definition's market",
    "zone": "the zone to start these instances in",
}


class GcpProvisioner(CloudProvisioner[GcpSettings, GcpDefinition, "compute_v1.InstancesClient"]):
    """Compute Engine instances for provisioner definitions whose driver is ``gcp``."""

    directives = _DIRECTIVES

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(
            config,
            cloud="gcp",
            account_model=GcpSettings,
            shape_model=GcpDefinition,
            connect=_connect,
            create_call="instances.insert",
        )

    def launch(
        self,
        definition: str,
        account: GcpSettings,
        shape: GcpDefinition,
        client: compute_v1.InstancesClient,
        launch: Launch,
        annotations: Mapping[str, str],
    ) -> ProvisionedInstance:
        """One ``instances.insert``, waiting for its operation's outcome."""
        body = _instance_body(definition, account, shape, launch, annotations)
        try:
            operation = client.insert(
                project=account.project, zone=shape.zone, instance_resource=body
            )
            operation.result(timeout=300)
        except Exception as exc:
            raise _translate(exc, "instances.insert") from None
        log.info(
            "gcp: started %s/%s (%s, %s) for instance %s",
            shape.zone,
            body.name,
            shape.machine_type,
            shape.market,
            launch.name,
        )
        return ProvisionedInstance(
            instance_id=f"{shape.zone}/{body.name}",
            name=launch.name,
            definition=definition,
            state=InstanceState.CREATING,
        )

    def delete(self, instance_id: str) -> None:
        """``instances.delete``; an instance gone, stopping or not this cluster's is left."""
        found = self._find(instance_id)
        if found is None:
            return
        account, client, instance = found
        if instance.status in ("STOPPING", "PENDING_STOP"):
            return
        zone, name = instance_id.split("/", 1)
        try:
            client.delete(project=account.project, zone=zone, instance=name)
        except api_exceptions.NotFound:
            return
        except Exception as exc:
            raise _translate(exc, "instances.delete") from None
        log.info("gcp: deleting %s (instance %s)", instance_id, _metadata(instance, INSTANCE_LABEL))

    def describe(self, instance_id: str) -> ProvisionedInstance | None:
        """The instance as Compute Engine sees it; None when gone or not this cluster's."""
        found = self._find(instance_id)
        return _provisioned(found[2]) if found is not None else None

    def list_instances(self) -> Sequence[ProvisionedInstance]:
        """This cluster's instances in every zone of every project seen."""
        found: list[ProvisionedInstance] = []
        for account, client in self.accounts.known():
            request = compute_v1.AggregatedListInstancesRequest(
                project=account.project,
                filter=f"labels.{CLUSTER_LABEL} = {account.cluster}",
            )
            try:
                for _scope, scoped in client.aggregated_list(request=request):
                    found.extend(_provisioned(i) for i in scoped.instances if _ours(i, account))
            except Exception as exc:
                raise _translate(exc, "instances.aggregatedList") from None
        return found

    def _find(
        self, instance_id: str
    ) -> tuple[GcpSettings, compute_v1.InstancesClient, compute_v1.Instance] | None:
        zone, _, name = instance_id.partition("/")
        if not _ZONE.fullmatch(zone) or not _NAME.fullmatch(name):
            return None
        for account, client in self.accounts.known():
            try:
                found = client.get(project=account.project, zone=zone, instance=name)
            except api_exceptions.NotFound:
                continue
            except Exception as exc:
                raise _translate(exc, "instances.get") from None
            if _ours(found, account):
                return account, client, found
        return None


def _connect(account: GcpSettings) -> compute_v1.InstancesClient:
    """A Compute Engine client for ``account``; InvalidArgument when its key file is not a
    readable service-account key."""
    credentials = None
    if account.credentials_file is not None:
        try:
            credentials = service_account.Credentials.from_service_account_file(
                str(account.credentials_file), scopes=[_SCOPE]
            )
        except (OSError, ValueError, KeyError) as exc:
            # the reason's kind only: a parse error of a key file could quote the key
            reason = exc.strerror if isinstance(exc, OSError) else type(exc).__name__
            raise InvalidArgument(
                f"provisioner gcp: credentials-file {account.credentials_file}:"
                f" not a readable service-account key ({reason})"
            ) from None
    options = client_options.ClientOptions(api_endpoint=account.endpoint_url)
    return compute_v1.InstancesClient(
        credentials=credentials, transport="rest", client_options=options
    )


def _instance_body(
    definition: str,
    account: GcpSettings,
    shape: GcpDefinition,
    launch: Launch,
    annotations: Mapping[str, str],
) -> compute_v1.Instance:
    disk = compute_v1.AttachedDiskInitializeParams(
        source_image=shape.image, disk_size_gb=shape.disk_size_gb
    )
    if shape.disk_type:
        disk.disk_type = f"zones/{shape.zone}/diskTypes/{shape.disk_type}"
    interface = compute_v1.NetworkInterface()
    if shape.network:
        interface.network = shape.network
    if shape.subnetwork:
        interface.subnetwork = shape.subnetwork
    if shape.external_ip:
        interface.access_configs = [
            compute_v1.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")
        ]
    items = {
        "user-data": launch.user_data,
        INSTANCE_LABEL: launch.name,
        DEFINITION_LABEL: definition,
        ANNOTATIONS_KEY: json.dumps(dict(annotations), sort_keys=True),
    }
    scheduling = compute_v1.Scheduling()
    if shape.market == "spot":
        scheduling.provisioning_model = "SPOT"
        scheduling.instance_termination_action = "DELETE"
    if shape.accelerators:
        # GPUs cannot live-migrate: Compute Engine requires TERMINATE for them
        scheduling.on_host_maintenance = "TERMINATE"
    instance = compute_v1.Instance(
        name=instance_name(launch.name),
        machine_type=f"zones/{shape.zone}/machineTypes/{shape.machine_type}",
        disks=[compute_v1.AttachedDisk(boot=True, auto_delete=True, initialize_params=disk)],
        network_interfaces=[interface],
        metadata=compute_v1.Metadata(
            items=[compute_v1.Items(key=k, value=v) for k, v in items.items()]
        ),
        labels={
            **shape.labels,
            CLUSTER_LABEL: account.cluster,
            DEFINITION_LABEL: _label_value(definition),
        },
        scheduling=scheduling,
    )
    if shape.accelerators:
        instance.guest_accelerators = [
            compute_v1.AcceleratorConfig(
                accelerator_type=f"zones/{shape.zone}/acceleratorTypes/{kind}",
                accelerator_count=count,
            )
            for kind, count in shape.accelerators.items()
        ]
    if shape.network_tags:
        instance.tags = compute_v1.Tags(items=list(shape.network_tags))
    if shape.service_account:
        instance.service_accounts = [
            compute_v1.ServiceAccount(email=shape.service_account, scopes=list(shape.scopes))
        ]
    return instance


def _ours(instance: compute_v1.Instance, account: GcpSettings) -> bool:
    return instance.labels.get(CLUSTER_LABEL) == account.cluster


def _metadata(instance: compute_v1.Instance, key: str) -> str:
    return next((item.value for item in instance.metadata.items if item.key == key), "")


def _provisioned(instance: compute_v1.Instance) -> ProvisionedInstance:
    zone = instance.zone.rsplit("/", 1)[-1]
    state = _STATES.get(instance.status, InstanceState.ERROR)
    detail = ""
    if state == InstanceState.ERROR:
        detail = f"Compute Engine says the instance is {instance.status}"
        if instance.status_message:
            detail += f": {instance.status_message}"
    address = next((i.network_i_p for i in instance.network_interfaces if i.network_i_p), None)
    return ProvisionedInstance(
        instance_id=f"{zone}/{instance.name}",
        name=_metadata(instance, INSTANCE_LABEL) or instance.name,
        definition=_metadata(instance, DEFINITION_LABEL),
        state=state,
        address=address,
        detail=detail,
    )


def _translate(exc: Exception, action: str) -> FuzzballError:
    """A failure of the SDK as the Fuzzball error it amounts to, naming the call."""
    if isinstance(exc, FuzzballError):
        return exc
    if isinstance(exc, auth_exceptions.GoogleAuthError):
        # the token endpoint's answer, never the key
        return FailedPrecondition(
            f"gcp: {action}: the credentials were refused or could not be used"
            f" ({type(exc).__name__})"
        )
    if isinstance(exc, api_exceptions.GoogleAPICallError):
        text = f"gcp: {action}: {exc.code}: {exc.message}"
        if isinstance(exc, api_exceptions.NotFound):
            return NotFound(text)
        if isinstance(exc, api_exceptions.TooManyRequests | api_exceptions.ResourceExhausted):
            return ResourceExhausted(text)
        if isinstance(exc, api_exceptions.Unauthorized | api_exceptions.Forbidden):
            return PermissionDenied(text)
        if isinstance(exc, api_exceptions.BadRequest | api_exceptions.Conflict):
            return InvalidArgument(text)
        return Unavailable(text)
    if isinstance(exc, requests.RequestException | TimeoutError | ConnectionError):
        return Unavailable(f"gcp: {action}: Compute Engine did not answer ({type(exc).__name__})")
    return Unavailable(f"gcp: {action}: {type(exc).__name__}: {exc}")
