"""A provisioner driver that only records what it was asked: the loop's tests watch its calls.

It keeps every create and delete call, hands out instance ids ``i-1``, ``i-2``, ... and can be
told to refuse creates (out of capacity: nothing made) or to lose their answers (the instances
are made, then the call fails as a timeout would). It boots nothing: a test registers its
instances itself, reading each launch's user data as a node would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fuzzball_core.drivers import InstanceSpec, Launch, ProvisionedInstance, Provisioner
from fuzzball_core.errors import ResourceExhausted, Unavailable


class ScriptedProvisioner(Provisioner):
    """Records creates and deletes; instances exist until deleted."""

    directives = {"zone": "where the instance goes (recorded only)"}

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self.launches: list[Launch] = []
        self.deleted: list[str] = []
        self.existing: dict[str, ProvisionedInstance] = {}
        self.fail_creates = False
        self.lose_answers = False

    def create(
        self,
        definition: InstanceSpec,
        launches: Sequence[Launch],
        *,
        annotations: Mapping[str, str],
        ttl: float | None = None,
        directives: Mapping[str, str] | None = None,
    ) -> Sequence[ProvisionedInstance]:
        """Record the launches; refuse all of them, or lose the answer, when told to."""
        if self.fail_creates:
            raise ResourceExhausted("the scripted cloud is out of capacity")
        made = []
        for launch in launches:
            self.launches.append(launch)
            instance = ProvisionedInstance(
                instance_id=f"i-{len(self.launches)}",
                name=launch.name,
                definition=definition.definition,
            )
            self.existing[instance.instance_id] = instance
            made.append(instance)
        if self.lose_answers:
            raise Unavailable("the scripted cloud's answer timed out")
        return made

    def delete(self, instance_id: str) -> None:
        """Record the delete (every call, so a test sees a second one)."""
        self.deleted.append(instance_id)
        self.existing.pop(instance_id, None)

    def describe(self, instance_id: str) -> ProvisionedInstance | None:
        """The instance while it exists."""
        return self.existing.get(instance_id)

    def list_instances(self) -> Sequence[ProvisionedInstance]:
        """Every instance not yet deleted."""
        return list(self.existing.values())
