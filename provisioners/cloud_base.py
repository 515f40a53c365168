"""The base class of the cloud drivers (``aws``, ``gcp``, ``oci``): what their contracts do
alike, so each driver module keeps only its cloud's calls.

* A definition's ``config`` is split into the account (one SDK client per account, see
  :class:`~fuzzball_provisioners.cloud.Accounts`) and the instance's shape, each read with the
  driver's settings model (:meth:`CloudProvisioner.shape`); ``check_definition`` refuses a bad
  one and remembers its account, so ``delete`` and ``list_instances`` reach it.
* ``create`` refuses unknown directives, lays the known ones over the shape, and makes one
  cloud call per launch (:meth:`CloudProvisioner.launch`, each launch has its own user data
  and token). A launch the cloud refused is answered as an ERROR instance with the reason;
  when every launch was refused, the first refusal is raised, so the loop sees that nothing
  was created. A launch whose call failed without a refusal (a timeout: the cloud may have
  started it) is answered CREATING with no instance id, so the loop finds it by its
  ``fuzzball-instance`` mark instead of forgetting it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from fuzzball_core.drivers import (
    CREATE_REFUSALS,
    InstanceSpec,
    Launch,
    ProvisionedInstance,
    Provisioner,
    secret_fields,
)
from fuzzball_core.errors import FuzzballError
from fuzzball_core.vocabulary import InstanceState
from fuzzball_provisioners.cloud import Accounts, hush_wire_logs, read_settings, with_directives

__all__ = ["CloudProvisioner"]

#: the driver's account settings, its instance settings, its SDK client
_A = TypeVar("_A", bound=BaseModel)
_S = TypeVar("_S", bound=BaseModel)
_C = TypeVar("_C")


class CloudProvisioner(Provisioner, Generic[_A, _S, _C]):
    """A :class:`~fuzzball_core.drivers.Provisioner` over a cloud SDK. A subclass names its
    cloud and models in ``__init__`` and implements :meth:`launch`, ``delete``,
    ``describe`` and ``list_instances``."""

    def __init__(
        self,
        config: Mapping[str, Any] | None,
        *,
        cloud: str,
        account_model: type[_A],
        shape_model: type[_S],
        connect: Callable[[_A], _C],
        create_call: str,
    ) -> None:
        super().__init__(config)
        hush_wire_logs()
        #: the driver's name, in logs and errors
        self.cloud = cloud
        self.account_model = account_model
        self.shape_model = shape_model
        #: the cloud's create call, named in logs when it fails (``RunInstances``)
        self.create_call = create_call
        self.log = logging.getLogger(f"fuzzball.provisioners.{cloud}")
        self.accounts: Accounts[_A, _C] = Accounts(cloud, account_model, self.config, connect)

    def secret_settings(self) -> frozenset[tuple[str, ...]]:
        """The credentials among a definition's settings: the ``SecretStr`` fields of the
        account and shape models."""
        return secret_fields(self.account_model) | secret_fields(self.shape_model)

    def shape(self, definition: InstanceSpec) -> tuple[_A, _S]:
        """The definition's account and instance settings (InvalidArgument naming what is
        wrong)."""
        account, rest = self.accounts.split(definition)
        where = f"definition {definition.definition}: config"
        return account, read_settings(self.shape_model, rest, where)

    def check_definition(self, definition: InstanceSpec) -> None:
        """Refuse a definition the cloud could not take; remember its account (and make its
        client: credentials that cannot be read are refused now)."""
        self.shape(definition)
        self.accounts.of(definition)

    def check_request(
        self,
        definition: InstanceSpec,
        *,
        annotations: Mapping[str, str],
        directives: Mapping[str, str],
    ) -> None:
        """Refuse directives this driver does not know or whose values the shape's rules
        refuse (``backendDirectives.KEY``), before anything is created."""
        self.check_directives(directives)
        shape = self.shape(definition)[1]
        with_directives(self.shape_model, definition.definition, shape, dict(directives))

    def launch(
        self,
        definition: str,
        account: _A,
        shape: _S,
        client: _C,
        launch: Launch,
        annotations: Mapping[str, str],
    ) -> ProvisionedInstance:
        """One create call for ``launch`` (of the definition named ``definition``): the
        instance the cloud accepted; a FuzzballError saying why it refused."""
        raise NotImplementedError

    def create(
        self,
        definition: InstanceSpec,
        launches: Sequence[Launch],
        *,
        annotations: Mapping[str, str],
        ttl: float | None = None,
        directives: Mapping[str, str] | None = None,
    ) -> Sequence[ProvisionedInstance]:
        """One :meth:`launch` per launch, with the request's directives over the shape."""
        directives = dict(directives or {})
        self.check_directives(directives)
        account, shape = self.shape(definition)
        shape = with_directives(self.shape_model, definition.definition, shape, directives)
        client = self.accounts.of(definition)[1]
        created: list[ProvisionedInstance] = []
        first_refusal: FuzzballError | None = None
        for launch in launches:
            try:
                created.append(
                    self.launch(definition.definition, account, shape, client, launch, annotations)
                )
            except FuzzballError as error:
                self.log.warning(
                    "%s: %s for instance %s: %s", self.cloud, self.create_call, launch.name, error
                )
                refused = isinstance(error, CREATE_REFUSALS)
                first_refusal = first_refusal or (error if refused else None)
                created.append(
                    ProvisionedInstance(
                        instance_id="",
                        name=launch.name,
                        definition=definition.definition,
                        # not refused: the cloud may have started it; the loop looks for it
                        state=InstanceState.ERROR if refused else InstanceState.CREATING,
                        detail=str(error),
                    )
                )
        if first_refusal is not None and all(i.state == InstanceState.ERROR for i in created):
            raise first_refusal
        return created
