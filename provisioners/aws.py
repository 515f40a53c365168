"""The ``aws`` provisioner: EC2 instances through boto3.

A thin layer over EC2's API: :meth:`AwsProvisioner.create` is one ``RunInstances`` per launch,
:meth:`~AwsProvisioner.delete` one ``TerminateInstances``, the rest ``DescribeInstances``.
Orchestrate's loop decides when; this module only says how.

A definition's ``config`` (``provisioner.definitions[].config``) names the account and the
instance; the account keys may also be given to the driver itself, as every account's
defaults::

    # the account
    region: us-east-1
    cluster: prod                 # the fuzzball-cluster tag value (default "fuzzball")
    access-key-id: AKIA...        # optional: boto3's own chain otherwise (env, profile, role)
    secret-access-key: ...
    profile: fuzzball             # optional, instead of keys
    endpoint-url: https://...     # optional: a VPC endpoint (the tests: moto's server)
    fabric-manager-image: ami-... # the NVIDIA Fabric Manager AMI for p4d/p4de/p5/p5e/p5en
    # the instance
    instance-type: p5.48xlarge
    image: ami-...                # the node image (cloud-init and fuzzball-substrate on it)
    market: spot                  # or on-demand (the default)
    max-spot-price: "12.50"       # optional, spot only
    subnet-id: subnet-...
    security-group-ids: [sg-...]
    key-name: ops
    iam-instance-profile: fuzzball-node   # a name or an ARN
    availability-zone: us-east-1a
    tags: {team: hpc}

Backend directives (per request): ``market``, ``availability-zone``, ``subnet-id``.

Every instance is tagged ``Name`` and ``fuzzball-instance`` (its Fuzzball name),
``fuzzball-cluster`` and ``fuzzball-definition``, each annotation as
``fuzzball-annotation:KEY``, and the definition's own tags. It boots with the user data
Orchestrate rendered (the one-time registration token and the cluster's CA certificate, no
other secret) and with IMDSv2 required at a hop limit of 1, so a job's container cannot read
that user data from the instance metadata service. NVLink instance types (p4d, p4de, p5, p5e,
p5en) need NVIDIA Fabric Manager running before their GPUs work together, so they boot the
Fabric Manager AMI, and a definition of such a type without one is refused.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from fuzzball_core.drivers import InstanceSpec, Launch, ProvisionedInstance
from fuzzball_core.errors import (
    FailedPrecondition,
    FuzzballError,
    InvalidArgument,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
)
from fuzzball_core.vocabulary import InstanceState
from fuzzball_provisioners.cloud import (
    CLUSTER_LABEL,
    DEFINITION_LABEL,
    INSTANCE_LABEL,
    DriverSettings,
)
from fuzzball_provisioners.cloud_base import CloudProvisioner
from fuzzball_provisioners.sdk_modules import sdk_module

if TYPE_CHECKING:
    import boto3.session
    from botocore import config as botocore_config
    from botocore import exceptions as botocore_exceptions
else:  # loaded when the driver first uses them (sdk_modules says why)
    boto3 = sdk_module("boto3")
    botocore_config = sdk_module("botocore.config")
    botocore_exceptions = sdk_module("botocore.exceptions")

__all__ = ["NVLINK_FAMILIES", "AwsDefinition", "AwsProvisioner", "AwsSettings", "image_for"]

log = logging.getLogger("fuzzball.provisioners.aws")

#: instance families whose GPUs are joined by NVSwitch: they need NVIDIA Fabric Manager
NVLINK_FAMILIES = frozenset({"p4d", "p4de", "p5", "p5e", "p5en"})
#: the tag prefix of an instance's annotations
ANNOTATION_TAG_PREFIX = "fuzzball-annotation:"
_OURS = frozenset({CLUSTER_LABEL, DEFINITION_LABEL, INSTANCE_LABEL, "Name"})
#: EC2's limits on a tag (characters)
_TAG_KEY_MAX, _TAG_VALUE_MAX = 128, 256
#: RunInstances' ClientToken: at most 64 ASCII characters
_CLIENT_TOKEN_MAX = 64

_STATES = {
    "pending": InstanceState.CREATING,
    "running": InstanceState.CREATED,
    "shutting-down": InstanceState.DELETING,
    "terminated": InstanceState.DELETED,
    "stopping": InstanceState.ERROR,
    "stopped": InstanceState.ERROR,
}
_LIVE_STATES = ["pending", "running", "shutting-down", "stopping", "stopped"]

#: error codes by what they mean to the caller (the rest are Unavailable: worth a retry)
_EXHAUSTED = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InstanceLimitExceeded",
        "VcpuLimitExceeded",
        "MaxSpotInstanceCountExceeded",
        "SpotMaxPriceTooLow",
        "InsufficientFreeAddressesInSubnet",
    }
)
_REFUSED = frozenset(
    {
        "UnauthorizedOperation",
        "AuthFailure",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "OptInRequired",
        "Blocked",
        "PendingVerification",
    }
)
_GONE = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})


class AwsSettings(DriverSettings):
    """The driver's own configuration (credentials, region, the cluster's tag)."""

    region: str
    cluster: str = Field(default="fuzzball", min_length=1, max_length=_TAG_VALUE_MAX)
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    profile: str | None = None
    endpoint_url: str | None = None
    fabric_manager_image: str | None = None

    @model_validator(mode="after")
    def _keys_together(self) -> AwsSettings:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("access-key-id and secret-access-key go together: set both or neither")
        if self.profile is not None and self.access_key_id is not None:
            raise ValueError("profile and access-key-id both set: name a profile or give keys")
        return self


def _spot_price(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        price = Decimal(value)
    except InvalidOperation:
        raise ValueError("not a number of US dollars per hour") from None
    if not price.is_finite() or price <= 0:
        raise ValueError("must be a positive number of US dollars per hour")
    return value


class AwsDefinition(DriverSettings):
    """A definition's ``driver-config``: the instance it asks EC2 for."""

    instance_type: str = Field(min_length=1)
    image: str = Field(min_length=1)
    market: Literal["on-demand", "spot"] = "on-demand"
    max_spot_price: str | None = None
    subnet_id: str | None = None
    security_group_ids: list[str] = Field(default_factory=list)
    key_name: str | None = None
    iam_instance_profile: str | None = None
    availability_zone: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("max_spot_price")
    @classmethod
    def _price(cls, value: str | None) -> str | None:
        return _spot_price(value)

    @field_validator("tags")
    @classmethod
    def _own_tags_only(cls, tags: dict[str, str]) -> dict[str, str]:
        for key, value in tags.items():
            if key.lower().startswith("aws:") or key in _OURS or key.startswith("fuzzball-"):
                raise ValueError(f"{key!r} is reserved (aws:, Name and fuzzball- tags)")
            _check_tag(key, value)
        return tags

    @model_validator(mode="after")
    def _price_needs_spot(self) -> AwsDefinition:
        if self.max_spot_price is not None and self.market != "spot":
            raise ValueError("max-spot-price is for market: spot")
        return self

    @property
    def family(self) -> str:
        """The instance family (``p5`` of ``p5.48xlarge``)."""
        return self.instance_type.split(".", 1)[0]


def _check_tag(key: str, value: str) -> None:
    if not key or len(key) > _TAG_KEY_MAX:
        raise ValueError(f"tag key {key[:40]!r}: EC2 takes 1 to {_TAG_KEY_MAX} characters")
    if len(value) > _TAG_VALUE_MAX:
        raise ValueError(f"tag {key!r}: EC2 takes values of at most {_TAG_VALUE_MAX} characters")


#: backendDirectives this driver understands, per request
_DIRECTIVES = {
    "market": "spot or on-demand, for these instances instead of the definition's market",
    "availability-zone": "the availability zone to start these instances in",
    "subnet-id": "the subnet to start these instances in",
}


class AwsProvisioner(CloudProvisioner[AwsSettings, AwsDefinition, Any]):
    """EC2 instances for provisioner definitions whose driver is ``aws``."""

    directives = _DIRECTIVES

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(
            config,
            cloud="aws",
            account_model=AwsSettings,
            shape_model=AwsDefinition,
            connect=_connect,
            create_call="RunInstances",
        )

    # -- definitions -------------------------------------------------------------------------

    def check_definition(self, definition: InstanceSpec) -> None:
        """Refuse a definition EC2 could not start: bad settings, or an NVLink instance type
        with no Fabric Manager image to boot. Its account is remembered (and its client
        made), so :meth:`delete` and :meth:`list_instances` reach it."""
        account, shape = self.shape(definition)
        image_for(definition.definition, account, shape)
        self.accounts.of(definition)

    # -- the contract ------------------------------------------------------------------------

    def check_request(
        self,
        definition: InstanceSpec,
        *,
        annotations: Mapping[str, str],
        directives: Mapping[str, str],
    ) -> None:
        """The directives, and annotations EC2 could not carry as tags, refused naming them
        before anything is created."""
        super().check_request(definition, annotations=annotations, directives=directives)
        account, shape = self.shape(definition)
        _tags(definition.definition, account, shape, annotations)

    def launch(
        self,
        definition: str,
        account: AwsSettings,
        shape: AwsDefinition,
        client: Any,
        launch: Launch,
        annotations: Mapping[str, str],
    ) -> ProvisionedInstance:
        """One RunInstances (each launch has its own user data and token)."""
        image = image_for(definition, account, shape)
        tags = _tags(definition, account, shape, annotations)
        try:
            answer = client.run_instances(**_run_request(shape, image, launch, tags))
        except (botocore_exceptions.ClientError, botocore_exceptions.BotoCoreError) as exc:
            raise _translate(exc, "RunInstances") from None
        instance = answer["Instances"][0]
        log.info(
            "aws: started %s (%s, %s) for instance %s",
            instance["InstanceId"],
            shape.instance_type,
            shape.market,
            launch.name,
        )
        return _provisioned(instance)

    def delete(self, instance_id: str) -> None:
        """TerminateInstances, once: an instance already shutting down, gone, unknown or not
        this cluster's is left alone."""
        found = self._find(instance_id)
        if found is None:
            log.info("aws: %s is not an instance of this cluster; nothing to delete", instance_id)
            return
        ec2, current = found
        if current["State"]["Name"] in ("shutting-down", "terminated"):
            return
        try:
            ec2.terminate_instances(InstanceIds=[instance_id])
        except botocore_exceptions.ClientError as exc:
            if _code(exc) in _GONE:
                return
            raise _translate(exc, "TerminateInstances") from None
        except botocore_exceptions.BotoCoreError as exc:
            raise _translate(exc, "TerminateInstances") from None
        log.info("aws: terminating %s (instance %s)", instance_id, _tag(current, INSTANCE_LABEL))

    def describe(self, instance_id: str) -> ProvisionedInstance | None:
        """The instance as EC2 sees it; None when it does not exist or is not this cluster's."""
        found = self._find(instance_id)
        return _provisioned(found[1]) if found is not None else None

    def list_instances(self) -> Sequence[ProvisionedInstance]:
        """This cluster's instances that are not terminated, in every account seen."""
        found: list[ProvisionedInstance] = []
        for account, ec2 in self.accounts.known():
            filters = [
                {"Name": f"tag:{CLUSTER_LABEL}", "Values": [account.cluster]},
                {"Name": "instance-state-name", "Values": _LIVE_STATES},
            ]
            try:
                for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
                    for reservation in page["Reservations"]:
                        found.extend(_provisioned(i) for i in reservation["Instances"])
            except (botocore_exceptions.ClientError, botocore_exceptions.BotoCoreError) as exc:
                raise _translate(exc, "DescribeInstances") from None
        return found

    def _find(self, instance_id: str) -> tuple[Any, dict[str, Any]] | None:
        """The account's client and EC2's record of ``instance_id``, in the first account
        where it is this cluster's."""
        if not instance_id.startswith("i-"):
            return None
        for account, ec2 in self.accounts.known():
            try:
                answer = ec2.describe_instances(InstanceIds=[instance_id])
            except botocore_exceptions.ClientError as exc:
                if _code(exc) in _GONE:
                    continue
                raise _translate(exc, "DescribeInstances") from None
            except botocore_exceptions.BotoCoreError as exc:
                raise _translate(exc, "DescribeInstances") from None
            for reservation in answer.get("Reservations", []):
                for instance in reservation.get("Instances", []):
                    if _tag(instance, CLUSTER_LABEL) == account.cluster:
                        return ec2, dict(instance)
        return None


def _connect(account: AwsSettings) -> Any:
    """An EC2 client for ``account`` (no request is made yet)."""
    session = boto3.session.Session(
        aws_access_key_id=_reveal(account.access_key_id),
        aws_secret_access_key=_reveal(account.secret_access_key),
        aws_session_token=_reveal(account.session_token),
        profile_name=account.profile,
        region_name=account.region,
    )
    return session.client(
        "ec2",
        endpoint_url=account.endpoint_url,
        config=botocore_config.Config(
            retries={"mode": "standard", "max_attempts": 3}, connect_timeout=10, read_timeout=60
        ),
    )


def image_for(definition: str, account: AwsSettings, shape: AwsDefinition) -> str:
    """The AMI an instance of ``shape`` boots: the Fabric Manager AMI for NVLink types (the
    definition's ``fabric-manager-image``), InvalidArgument when there is none."""
    if shape.family not in NVLINK_FAMILIES:
        return shape.image
    image = account.fabric_manager_image
    if not image:
        raise InvalidArgument(
            f"definition {definition}: instance-type {shape.instance_type} joins its GPUs"
            " with NVSwitch and needs an NVIDIA Fabric Manager image: set"
            " fabric-manager-image in the definition's config (or the aws driver's)"
        )
    return image


def _tags(
    definition: str, account: AwsSettings, shape: AwsDefinition, annotations: Mapping[str, str]
) -> list[dict[str, str]]:
    tags = {CLUSTER_LABEL: account.cluster, DEFINITION_LABEL: definition, **shape.tags}
    for key, value in annotations.items():
        tag = ANNOTATION_TAG_PREFIX + key
        try:
            _check_tag(tag, value)
        except ValueError as exc:
            raise InvalidArgument(f"annotations: {key[:60]!r}: {exc}") from None
        tags[tag] = value
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def _run_request(
    shape: AwsDefinition, image: str, launch: Launch, tags: list[dict[str, str]]
) -> dict[str, Any]:
    named = [
        {"Key": "Name", "Value": launch.name},
        {"Key": INSTANCE_LABEL, "Value": launch.name},
    ]
    request: dict[str, Any] = {
        "ImageId": image,
        "InstanceType": shape.instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "UserData": launch.user_data,
        # IMDSv2 only, and one hop: a container on the node cannot reach the metadata
        # service, so it cannot read the user data (the registration token) back
        "MetadataOptions": {
            "HttpTokens": "required",
            "HttpEndpoint": "enabled",
            "HttpPutResponseHopLimit": 1,
        },
        # a node that powers itself off is gone, not a stopped instance still billing
        "InstanceInitiatedShutdownBehavior": "terminate",
        "TagSpecifications": [
            {"ResourceType": kind, "Tags": [*named, *tags]} for kind in ("instance", "volume")
        ],
        # EC2 answers a repeated request with the instance it already started
        "ClientToken": _client_token(launch.name),
    }
    if shape.market == "spot":
        spot: dict[str, Any] = {
            "SpotInstanceType": "one-time",
            "InstanceInterruptionBehavior": "terminate",
        }
        if shape.max_spot_price is not None:
            spot["MaxPrice"] = shape.max_spot_price
        request["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": spot}
    if shape.subnet_id:
        request["SubnetId"] = shape.subnet_id
    if shape.security_group_ids:
        request["SecurityGroupIds"] = list(shape.security_group_ids)
    if shape.key_name:
        request["KeyName"] = shape.key_name
    if shape.iam_instance_profile:
        profile = shape.iam_instance_profile
        key = "Arn" if profile.startswith("arn:") else "Name"
        request["IamInstanceProfile"] = {key: profile}
    if shape.availability_zone:
        request["Placement"] = {"AvailabilityZone": shape.availability_zone}
    return request


def _provisioned(instance: Mapping[str, Any]) -> ProvisionedInstance:
    state_name = instance["State"]["Name"]
    state = _STATES.get(state_name, InstanceState.ERROR)
    detail = ""
    if state == InstanceState.ERROR:
        reason = instance.get("StateReason", {}).get("Message", "")
        detail = f"EC2 says the instance is {state_name}" + (f": {reason}" if reason else "")
    return ProvisionedInstance(
        instance_id=instance["InstanceId"],
        name=_tag(instance, INSTANCE_LABEL),
        definition=_tag(instance, DEFINITION_LABEL),
        state=state,
        address=instance.get("PrivateIpAddress") or None,
        detail=detail,
    )


def _reveal(secret: SecretStr | None) -> str | None:
    return secret.get_secret_value() if secret is not None else None


def _tag(instance: Mapping[str, Any], key: str) -> str:
    return next((t["Value"] for t in instance.get("Tags", []) if t["Key"] == key), "")


def _client_token(name: str) -> str:
    if name.isascii() and len(name) <= _CLIENT_TOKEN_MAX:
        return name
    return hashlib.sha256(name.encode()).hexdigest()[:_CLIENT_TOKEN_MAX]


def _code(exc: botocore_exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _translate(
    exc: botocore_exceptions.ClientError | botocore_exceptions.BotoCoreError, action: str
) -> FuzzballError:
    """EC2's answer as the Fuzzball error it amounts to; the message names the call and
    EC2's code and message (which never echo the request's user data)."""
    if isinstance(exc, botocore_exceptions.NoCredentialsError):
        return FailedPrecondition(
            f"aws: {action}: no AWS credentials: set access-key-id and secret-access-key or"
            " profile in the aws provisioner's configuration, or give this process a role"
        )
    if isinstance(exc, botocore_exceptions.BotoCoreError):
        return Unavailable(f"aws: {action}: {exc}")
    code = _code(exc)
    message = str(exc.response.get("Error", {}).get("Message", "")).strip()
    text = f"aws: {action}: {code}: {message}" if message else f"aws: {action}: {code}"
    if code in _EXHAUSTED:
        return ResourceExhausted(text)
    if code in _REFUSED:
        return PermissionDenied(text)
    if code.startswith(("Invalid", "Missing", "Unsupported")):
        return InvalidArgument(text)
    return Unavailable(text)
