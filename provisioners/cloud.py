"""What the cloud drivers (``aws``, ``gcp``, ``oci``) share.

* Their settings: a driver's own configuration (credentials, region, the cluster's name) and a
  definition's ``driver_config`` (the machine type, the image) are read with pydantic models
  spelled with hyphens like the rest of Fuzzball's configuration; an unknown key or a wrong
  value is an ``InvalidArgument`` naming the key, never its value (a value may be a secret).
* The names they mark instances with: every instance carries the cluster's name, its
  definition's id and its Fuzzball instance name, so :meth:`list_instances` finds exactly the
  cluster's own instances and an operator can tell them apart in the cloud's console.
* Their accounts: Orchestrate loads a driver once, with no settings of its own, and each
  definition's ``driver-config`` names the account it creates instances in (region,
  credentials, project) beside the instance's shape. :class:`Accounts` splits the two, keeps
  one SDK client per account and lists the accounts seen, so :meth:`delete` and
  :meth:`list_instances` (which get no definition) reach every account the driver was shown
  (Orchestrate shows each definition at start-up, through ``check_definition``). Settings
  given to the driver itself are every account's defaults.
* Their SDKs' wire logging: boto3, google-api-core and the oci SDK log whole request and
  response bodies at DEBUG, and those bodies hold the user data with the instance's one-time
  registration token. :func:`hush_wire_logs` keeps those loggers at INFO or above.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from fuzzball_core.drivers import InstanceSpec
from fuzzball_core.errors import InvalidArgument

__all__ = [
    "ANNOTATIONS_KEY",
    "CLUSTER_LABEL",
    "DEFINITION_LABEL",
    "INSTANCE_LABEL",
    "Accounts",
    "DriverSettings",
    "hush_wire_logs",
    "read_settings",
]

#: the label (tag) naming the Fuzzball cluster an instance belongs to
CLUSTER_LABEL = "fuzzball-cluster"
#: the label naming the provisioner definition it was created for
DEFINITION_LABEL = "fuzzball-definition"
#: the label holding the instance's Fuzzball name (the name its node registers under)
INSTANCE_LABEL = "fuzzball-instance"
#: the metadata key (GCP, OCI) holding the instance's annotations as a JSON object
ANNOTATIONS_KEY = "fuzzball-annotations"

_M = TypeVar("_M", bound=BaseModel)
_A = TypeVar("_A", bound=BaseModel)
_C = TypeVar("_C")


def _hyphenate(name: str) -> str:
    return name.replace("_", "-")


class DriverSettings(BaseModel):
    """Base of every cloud driver's settings model: hyphenated keys, no unknown ones."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=_hyphenate, populate_by_name=True, frozen=True
    )


def _where(prefix: str, loc: Iterable[Any]) -> str:
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def read_settings(model: type[_M], data: Mapping[str, Any] | None, where: str) -> _M:
    """Validate ``data`` as ``model``; ``InvalidArgument`` naming every bad key under
    ``where`` (``provisioner aws``, ``definition gpu: driver-config``) otherwise.

    Only pydantic's message is repeated, never the offending value: settings hold
    credentials, and this error reaches logs and API answers.
    """
    try:
        return model.model_validate(dict(data or {}))
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_input=False, include_url=False):
            path = _where(where, error["loc"])
            if error["type"] == "extra_forbidden":
                problems.append(f"{path}: unknown key")
            else:
                problems.append(f"{path}: {error['msg']}")
        raise InvalidArgument(
            "; ".join(problems),
            details=[{"field": p.split(": ", 1)[0], "description": p} for p in problems],
        ) from None


#: the SDK loggers that write request or response bodies at DEBUG
_WIRE_LOGGERS = (
    "botocore.endpoint",
    "botocore.parsers",
    "botocore.hooks",
    "botocore.retryhandler",
    "google.api_core",
    "google.cloud.compute_v1",
    "google.auth.transport.requests",
    "urllib3.connectionpool",
    "oci",
)


def with_directives(
    model: type[_M], definition: str, shape: _M, directives: Mapping[str, str]
) -> _M:
    """``shape`` (a definition's instance settings) with one request's ``backendDirectives``
    laid over it, read again as ``model`` so a directive is held to the same rules as the
    configuration (and refused naming it)."""
    if not directives:
        return shape
    merged = {**shape.model_dump(by_alias=True, exclude_none=True), **directives}
    return read_settings(model, merged, f"definition {definition}: backendDirectives")


def hush_wire_logs() -> None:
    """Keep the SDKs' body-logging loggers at INFO or above, whatever the root level.

    Their DEBUG records carry whole requests (RunInstances' UserData, an instance's metadata)
    and so the registration token; a Fuzzball process run with ``--log-level debug`` must not
    write it. A logger someone set to INFO or above already is left as it is.
    """
    for name in _WIRE_LOGGERS:
        logger = logging.getLogger(name)
        # NOTSET (0) counts as below: such a logger follows the root down to DEBUG
        if logger.level < logging.INFO:
            logger.setLevel(logging.INFO)


class Accounts(Generic[_A, _C]):
    """The accounts one driver has been shown, each with its SDK client.

    ``model`` is the driver's account settings model (region, credentials, ...): those of its
    keys found in a definition's ``driver-config`` (over the driver's own ``defaults``) name
    the account; the rest of the ``driver-config`` is the instance's shape. ``connect`` makes
    an account's client (once per account).
    """

    def __init__(
        self,
        driver: str,
        model: type[_A],
        defaults: Mapping[str, Any],
        connect: Callable[[_A], _C],
    ) -> None:
        self.driver = driver
        self.model = model
        self.defaults = dict(defaults)
        self.connect = connect
        self._keys = {(f.alias or n) for n, f in model.model_fields.items()}
        self._clients: dict[_A, _C] = {}
        self._lock = threading.Lock()
        if self.defaults:
            self._client(read_settings(model, self.defaults, f"provisioner {driver}"))

    def split(self, definition: InstanceSpec) -> tuple[_A, dict[str, Any]]:
        """The definition's account settings (InvalidArgument naming a bad key) and the rest
        of its ``driver-config``."""
        config = dict(definition.driver_config)
        account = {k: v for k, v in config.items() if k in self._keys}
        shape = {k: v for k, v in config.items() if k not in self._keys}
        where = f"definition {definition.definition}: config"
        return read_settings(self.model, {**self.defaults, **account}, where), shape

    def of(self, definition: InstanceSpec) -> tuple[_A, _C]:
        """The definition's account and its client."""
        settings, _ = self.split(definition)
        return settings, self._client(settings)

    def known(self) -> list[tuple[_A, _C]]:
        """Every account seen so far, with its client."""
        with self._lock:
            return list(self._clients.items())

    def _client(self, settings: _A) -> _C:
        with self._lock:
            client = self._clients.get(settings)
            if client is None:
                client = self._clients[settings] = self.connect(settings)
            return client
