"""The ``oci`` provisioner: Oracle Cloud Infrastructure compute instances through the oci SDK.

A thin layer over OCI's Core Services API: :meth:`OciProvisioner.create` is one
``LaunchInstance`` per launch, :meth:`~OciProvisioner.delete` one ``TerminateInstance``,
:meth:`~OciProvisioner.list_instances` ``ListInstances`` over the compartment, keeping the
instances tagged with the cluster's name. Orchestrate's loop decides when.

A definition's ``config`` (``provisioner.definitions[].config``) names the account and the
instance; the account keys may also be given to the driver itself, as every account's
defaults::

    # the account (an API signing key, as in an OCI CLI config file)
    region: us-ashburn-1
    tenancy: ocid1.tenancy.oc1..aaaa
    user: ocid1.user.oc1..aaaa
    fingerprint: 12:34:...:ef
    key-file: /etc/fuzzball/oci-api-key.pem   # or key-content: the PEM itself
    pass-phrase: ...              # optional, for an encrypted key
    compartment-id: ocid1.compartment.oc1..aaaa
    cluster: prod                 # the fuzzball-cluster freeform tag (default "fuzzball")
    endpoint-url: https://...     # optional: a private endpoint (the tests: a stand-in)
    # the instance
    availability-domain: Uocm:US-ASHBURN-AD-1
    shape: VM.Standard.E4.Flex    # or BM.GPU.H100.8, ...
    ocpus: 4                      # flexible shapes only (and required for them)
    memory-gb: 32                 # flexible shapes only
    image: ocid1.image.oc1..aaaa
    subnet-id: ocid1.subnet.oc1..aaaa
    boot-volume-size-gb: 100      # optional
    assign-public-ip: false       # the default
    fault-domain: FAULT-DOMAIN-1  # optional
    market: spot                  # preemptible capacity; or on-demand (the default)
    freeform-tags: {team: hpc}

Backend directives (per request): ``market``, ``availability-domain``, ``fault-domain``.

Every instance is named (``displayName``) and tagged ``fuzzball-instance`` with its Fuzzball
name, and tagged ``fuzzball-cluster`` and ``fuzzball-definition``; its annotations are its
``fuzzball-annotations`` metadata. Its ``user_data`` metadata is what cloud-init runs (the
one-time registration token and the cluster's CA certificate, no other secret), and the
legacy IMDSv1 endpoints are disabled, so the metadata service answers only requests carrying
its v2 header.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

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
    import oci
else:  # loaded when the driver first uses it (sdk_modules says why)
    oci = sdk_module("oci")

__all__ = ["OciDefinition", "OciProvisioner", "OciSettings"]

log = logging.getLogger("fuzzball.provisioners.oci")

_STATES = {
    "PROVISIONING": InstanceState.CREATING,
    "STARTING": InstanceState.CREATING,
    "RUNNING": InstanceState.CREATED,
    "MOVING": InstanceState.CREATED,
    "CREATING_IMAGE": InstanceState.CREATED,
    "TERMINATING": InstanceState.DELETING,
    "TERMINATED": InstanceState.DELETED,
    "STOPPING": InstanceState.ERROR,
    "STOPPED": InstanceState.ERROR,
}
#: OCI's retry token: at most 64 characters
_RETRY_TOKEN_MAX = 64
_OURS = frozenset({CLUSTER_LABEL, DEFINITION_LABEL, INSTANCE_LABEL})
#: codes OCI answers for want of capacity or quota
_EXHAUSTED = frozenset({"LimitExceeded", "QuotaExceeded", "TooManyRequests"})


class OciSettings(DriverSettings):
    """The driver's own configuration: an API signing key and where instances go."""

    region: str = Field(min_length=1)
    tenancy: str = Field(min_length=1)
    user: str = Field(min_length=1)
    fingerprint: str = Field(min_length=1)
    key_file: Path | None = None
    key_content: SecretStr | None = None
    pass_phrase: SecretStr | None = None
    compartment_id: str = Field(min_length=1)
    cluster: str = Field(default="fuzzball", min_length=1, max_length=256)
    endpoint_url: str | None = None

    @model_validator(mode="after")
    def _one_key(self) -> OciSettings:
        if (self.key_file is None) == (self.key_content is None):
            raise ValueError("give the API signing key as key-file or key-content (one of them)")
        return self


class OciDefinition(DriverSettings):
    """A definition's ``driver-config``: the instance it asks OCI for."""

    availability_domain: str = Field(min_length=1)
    shape: str = Field(min_length=1)
    ocpus: float | None = Field(default=None, gt=0)
    memory_gb: float | None = Field(default=None, gt=0)
    image: str = Field(min_length=1)
    subnet_id: str = Field(min_length=1)
    boot_volume_size_gb: int | None = Field(default=None, ge=50)
    assign_public_ip: bool = False
    fault_domain: str | None = None
    market: Literal["on-demand", "spot"] = "on-demand"
    freeform_tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("freeform_tags")
    @classmethod
    def _own_tags_only(cls, tags: dict[str, str]) -> dict[str, str]:
        for key in tags:
            if key in _OURS or key.startswith("fuzzball-"):
                raise ValueError(f"{key!r}: fuzzball- tags are the driver's own")
        return tags

    @model_validator(mode="after")
    def _flex_only(self) -> OciDefinition:
        flexible = self.shape.endswith(".Flex")
        if not flexible and (self.ocpus is not None or self.memory_gb is not None):
            raise ValueError(f"ocpus and memory-gb are for flexible shapes, not {self.shape}")
        if flexible and self.ocpus is None:
            raise ValueError(f"a flexible shape ({self.shape}) needs ocpus")
        return self


_DIRECTIVES = {
    "market": "spot (preemptible) or on-demand, for these instances instead of the definition's",
    "availability-domain": "the availability domain to start these instances in",
    "fault-domain": "the fault domain to start these instances in",
}


class OciProvisioner(CloudProvisioner[OciSettings, OciDefinition, Any]):
    """OCI compute instances for provisioner definitions whose driver is ``oci``."""

    directives = _DIRECTIVES

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(
            config,
            cloud="oci",
            account_model=OciSettings,
            shape_model=OciDefinition,
            connect=_connect,
            create_call="LaunchInstance",
        )

    def launch(
        self,
        definition: str,
        account: OciSettings,
        shape: OciDefinition,
        client: Any,
        launch: Launch,
        annotations: Mapping[str, str],
    ) -> ProvisionedInstance:
        """One LaunchInstance (each launch has its own user data and token)."""
        details = _launch_details(definition, account, shape, launch, annotations)
        try:
            answer = client.launch_instance(details, opc_retry_token=_retry_token(launch.name))
        except Exception as exc:
            raise _translate(exc, "LaunchInstance") from None
        log.info(
            "oci: started %s (%s, %s) for instance %s",
            answer.data.id,
            shape.shape,
            shape.market,
            launch.name,
        )
        return _provisioned(answer.data)

    def delete(self, instance_id: str) -> None:
        """TerminateInstance (with its boot volume), once: an instance terminating, gone,
        unknown or not this cluster's is left alone."""
        found = self._find(instance_id)
        if found is None:
            return
        compute, instance = found
        if instance.lifecycle_state in ("TERMINATING", "TERMINATED"):
            return
        try:
            compute.terminate_instance(instance_id, preserve_boot_volume=False)
        except oci.exceptions.ServiceError as exc:
            if exc.status == 404:
                return
            raise _translate(exc, "TerminateInstance") from None
        except Exception as exc:
            raise _translate(exc, "TerminateInstance") from None
        log.info(
            "oci: terminating %s (instance %s)",
            instance_id,
            (instance.freeform_tags or {}).get(INSTANCE_LABEL, ""),
        )

    def describe(self, instance_id: str) -> ProvisionedInstance | None:
        """The instance as OCI sees it; None when unknown or not this cluster's."""
        found = self._find(instance_id)
        return _provisioned(found[1]) if found is not None else None

    def list_instances(self) -> Sequence[ProvisionedInstance]:
        """This cluster's instances that are not terminated, in every compartment seen."""
        found: list[ProvisionedInstance] = []
        for account, compute in self.accounts.known():
            try:
                answer = oci.pagination.list_call_get_all_results(
                    compute.list_instances, compartment_id=account.compartment_id
                )
            except Exception as exc:
                raise _translate(exc, "ListInstances") from None
            found.extend(
                _provisioned(i)
                for i in answer.data
                if _ours(i, account) and i.lifecycle_state != "TERMINATED"
            )
        return found

    def _find(self, instance_id: str) -> tuple[Any, Any] | None:
        """The account's client and OCI's record of ``instance_id``, in the first account
        where it is this cluster's."""
        if not instance_id.startswith("ocid1.instance."):
            return None
        for account, compute in self.accounts.known():
            try:
                found = compute.get_instance(instance_id).data
            except oci.exceptions.ServiceError as exc:
                if exc.status == 404:
                    continue
                raise _translate(exc, "GetInstance") from None
            except Exception as exc:
                raise _translate(exc, "GetInstance") from None
            if _ours(found, account):
                return compute, found
        return None


def _ours(instance: Any, account: OciSettings) -> bool:
    return (instance.freeform_tags or {}).get(CLUSTER_LABEL) == account.cluster


def _connect(account: OciSettings) -> Any:
    """A ComputeClient signing with ``account``'s API key; InvalidArgument (naming keys, not
    values) when the SDK refuses the settings or the key."""
    sdk_config: dict[str, Any] = {
        "region": account.region,
        "tenancy": account.tenancy,
        "user": account.user,
        "fingerprint": account.fingerprint,
    }
    if account.key_file is not None:
        sdk_config["key_file"] = str(account.key_file)
    if account.key_content is not None:
        sdk_config["key_content"] = account.key_content.get_secret_value()
    if account.pass_phrase is not None:
        sdk_config["pass_phrase"] = account.pass_phrase.get_secret_value()
    try:
        oci.config.validate_config(sdk_config)
        return oci.core.ComputeClient(
            sdk_config,
            service_endpoint=account.endpoint_url,
            retry_strategy=oci.retry.DEFAULT_RETRY_STRATEGY,
            timeout=(10, 60),
        )
    except (oci.exceptions.InvalidConfig, oci.exceptions.InvalidPrivateKey) as exc:
        problem = _keys_only(exc)
        raise InvalidArgument(f"provisioner oci: {type(exc).__name__}: {problem}") from None
    except OSError as exc:
        raise InvalidArgument(
            f"provisioner oci: key-file {account.key_file}: {exc.strerror}"
        ) from None


def _launch_details(
    definition: str,
    account: OciSettings,
    shape: OciDefinition,
    launch: Launch,
    annotations: Mapping[str, str],
) -> Any:
    models = oci.core.models
    source = models.InstanceSourceViaImageDetails(image_id=shape.image)
    if shape.boot_volume_size_gb is not None:
        source.boot_volume_size_in_gbs = shape.boot_volume_size_gb
    details = models.LaunchInstanceDetails(
        availability_domain=shape.availability_domain,
        compartment_id=account.compartment_id,
        display_name=launch.name,
        shape=shape.shape,
        source_details=source,
        create_vnic_details=models.CreateVnicDetails(
            subnet_id=shape.subnet_id, assign_public_ip=shape.assign_public_ip
        ),
        metadata={
            "user_data": base64.b64encode(launch.user_data.encode()).decode(),
            ANNOTATIONS_KEY: json.dumps(dict(annotations), sort_keys=True),
        },
        freeform_tags={
            **shape.freeform_tags,
            CLUSTER_LABEL: account.cluster,
            DEFINITION_LABEL: definition,
            INSTANCE_LABEL: launch.name,
        },
        # only the v2 metadata endpoints, which need a header a redirected request lacks
        instance_options=models.InstanceOptions(are_legacy_imds_endpoints_disabled=True),
    )
    if shape.ocpus is not None:
        details.shape_config = models.LaunchInstanceShapeConfigDetails(
            ocpus=shape.ocpus, memory_in_gbs=shape.memory_gb
        )
    if shape.fault_domain:
        details.fault_domain = shape.fault_domain
    if shape.market == "spot":
        details.preemptible_instance_config = models.PreemptibleInstanceConfigDetails(
            preemption_action=models.TerminatePreemptionAction(preserve_boot_volume=False)
        )
    return details


def _retry_token(name: str) -> str:
    if len(name) <= _RETRY_TOKEN_MAX and name.isascii():
        return name
    return hashlib.sha256(name.encode()).hexdigest()[:_RETRY_TOKEN_MAX]


def _provisioned(instance: Any) -> ProvisionedInstance:
    state = _STATES.get(instance.lifecycle_state, InstanceState.ERROR)
    tags = instance.freeform_tags or {}
    detail = ""
    if state == InstanceState.ERROR:
        detail = f"OCI says the instance is {instance.lifecycle_state}"
    return ProvisionedInstance(
        instance_id=instance.id,
        name=tags.get(INSTANCE_LABEL) or instance.display_name or "",
        definition=tags.get(DEFINITION_LABEL, ""),
        state=state,
        detail=detail,
    )


def _keys_only(exc: Exception) -> str:
    """An SDK configuration error's text without values: InvalidConfig carries a mapping of
    key to problem; anything else is named by its type only."""
    problems = exc.args[0] if exc.args else None
    if isinstance(problems, Mapping):
        return ", ".join(f"{key}: {problem}" for key, problem in sorted(problems.items()))
    return "the API signing key could not be read"


def _translate(exc: Exception, action: str) -> FuzzballError:
    """A failure of the SDK as the Fuzzball error it amounts to, naming the call."""
    if isinstance(exc, FuzzballError):
        return exc
    if isinstance(exc, oci.exceptions.ServiceError):
        text = f"oci: {action}: {exc.status} {exc.code}: {exc.message}"
        if exc.code in _EXHAUSTED or "capacity" in str(exc.message).lower():
            return ResourceExhausted(text)
        if exc.status == 401:
            return FailedPrecondition(text + " (the API signing key was refused)")
        if exc.status == 403:
            return PermissionDenied(text)
        if exc.status == 404:
            return NotFound(text)
        if exc.status in (400, 409):
            return InvalidArgument(text)
        return Unavailable(text)
    if isinstance(exc, oci.exceptions.RequestException | ConnectionError | TimeoutError):
        return Unavailable(f"oci: {action}: OCI did not answer ({type(exc).__name__})")
    return Unavailable(f"oci: {action}: {type(exc).__name__}")
