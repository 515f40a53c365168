"""The ``onprem`` provisioner: a static inventory of machines woken and powered off by commands.

Each machine is named in the definition's ``inventory`` with the commands that power it on
and off (IPMI, SSH, a site's script). Creating an instance takes a machine no instance holds,
writes the instance's user data to a file (mode 0600) and runs ``power-on``; deleting it runs
``power-off`` and frees the machine. Which machine holds which instance is kept in
``state-dir`` (one file per machine), so a restarted Orchestrate knows it again, and a delete
of an instance that no longer holds its machine (a newer instance took it) touches nothing.

Driver settings (a definition's ``config``)::

    state-dir: /var/lib/fuzzball/onprem
    inventory:
      - host: node17
        power-on: ipmitool -H node17-bmc chassis power on
        power-off: ipmitool -H node17-bmc chassis power off

The commands are split like a shell would (``shlex``) but run without one; ``{host}``,
``{name}`` (the instance's node name) and ``{user_data}`` (the user data file's path) are
replaced in each word. The token inside the user data never appears on a command line.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fuzzball_core.drivers import InstanceSpec, Launch, ProvisionedInstance, Provisioner
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, Unavailable
from fuzzball_core.vocabulary import InstanceState

#: how long a power command may take
COMMAND_TIMEOUT = 120.0
_PLACEHOLDERS = ("host", "name", "user_data")


def _words(template: str, **values: str) -> list[str]:
    words = shlex.split(template)
    if not words:
        raise InvalidArgument("onprem inventory: a power command is empty")
    return [word.format(**values) for word in words]


def _check_template(template: Any, where: str) -> None:
    if not isinstance(template, str) or not template.strip():
        raise InvalidArgument(f"{where}: a command is required")
    try:
        _words(template, **dict.fromkeys(_PLACEHOLDERS, "x"))
    except (ValueError, KeyError, IndexError) as exc:
        raise InvalidArgument(
            f"{where}: {exc} (placeholders: {', '.join('{' + p + '}' for p in _PLACEHOLDERS)})"
        ) from None


class OnPremProvisioner(Provisioner):
    """Machines from a fixed inventory, powered on for work and off when idle.

    An instance's id is ``NAME@HOST``: the instance and the machine it holds.
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        #: host -> (its power commands, the state directory), from the definitions seen
        self._machines: dict[str, tuple[Mapping[str, Any], Path]] = {}

    def check_definition(self, definition: InstanceSpec) -> None:
        """A definition needs a ``state-dir`` and an inventory of hosts with both commands."""
        settings = definition.driver_config
        unknown = sorted(set(settings) - {"state-dir", "inventory"})
        if unknown:
            raise InvalidArgument(
                f"provisioner definition {definition.definition}: {unknown[0]}: unknown key "
                "(onprem reads state-dir and inventory)"
            )
        if not settings.get("state-dir"):
            raise InvalidArgument(
                f"provisioner definition {definition.definition}: state-dir is required (onprem)"
            )
        inventory = settings.get("inventory")
        if not isinstance(inventory, list) or not inventory:
            raise InvalidArgument(
                f"provisioner definition {definition.definition}: inventory must list machines"
            )
        state = Path(str(settings["state-dir"]))
        listed: dict[str, int] = {}
        for index, machine in enumerate(inventory):
            where = f"provisioner definition {definition.definition}: inventory[{index}]"
            if not isinstance(machine, dict) or not machine.get("host"):
                raise InvalidArgument(f"{where}: host is required")
            host = str(machine["host"])
            if host in listed:
                # one holder file per host: the second entry could never be used
                raise InvalidArgument(
                    f"{where}.host: {host} is listed twice (also inventory[{listed[host]}])"
                )
            listed[host] = index
            extra = sorted(set(machine) - {"host", "power-on", "power-off"})
            if extra:
                raise InvalidArgument(
                    f"{where}.{extra[0]}: unknown key (a machine has host, power-on, power-off)"
                )
            for key in ("power-on", "power-off"):
                _check_template(machine.get(key), f"{where}.{key}")
            self._machines[host] = (machine, state)

    def _holder_file(self, host: str) -> Path:
        return self._machines[host][1] / f"{host}.json"

    def _holder(self, host: str) -> str | None:
        try:
            return str(json.loads(self._holder_file(host).read_text())["name"])
        except (OSError, ValueError, KeyError):
            return None

    def _run(self, host: str, key: str, name: str, user_data: Path) -> None:
        machine = self._machines[host][0]
        words = _words(str(machine[key]), host=host, name=name, user_data=str(user_data))
        try:
            done = subprocess.run(
                words, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"onprem {host}: {key} could not run: {exc}") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            raise Unavailable(f"onprem {host}: {key} exited {done.returncode}: {tail[0]}")

    def create(
        self,
        definition: InstanceSpec,
        launches: Sequence[Launch],
        *,
        annotations: Mapping[str, str],
        ttl: float | None = None,
        directives: Mapping[str, str] | None = None,
    ) -> Sequence[ProvisionedInstance]:
        """Power on a free machine of the inventory for each launch; a launch left without
        one is answered ERROR (FailedPrecondition when none got a machine), so the machines
        already powered on stay recorded."""
        self.check_definition(definition)
        hosts = [str(m["host"]) for m in definition.driver_config["inventory"]]
        made: list[ProvisionedInstance] = []
        for launch in launches:
            free = [host for host in hosts if self._holder(host) is None]
            if not free:
                full = (
                    f"onprem: every machine of {definition.definition} is in use"
                    f" ({len(hosts)} in its inventory)"
                )
                if not made:
                    raise FailedPrecondition(full)
                made.append(
                    ProvisionedInstance(
                        "", launch.name, definition.definition, InstanceState.ERROR, detail=full
                    )
                )
                continue
            host = free[0]
            state = self._machines[host][1]
            state.mkdir(parents=True, exist_ok=True)
            user_data = state / f"{launch.name}.user-data"
            descriptor = os.open(user_data, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as out:
                out.write(launch.user_data)
            self._holder_file(host).write_text(json.dumps({"name": launch.name}))
            instance_id = f"{launch.name}@{host}"
            try:
                self._run(host, "power-on", launch.name, user_data)
            except Unavailable as exc:
                self._release(host, launch.name)
                made.append(
                    ProvisionedInstance(
                        instance_id,
                        launch.name,
                        definition.definition,
                        InstanceState.ERROR,
                        address=host,
                        detail=exc.message,
                    )
                )
                continue
            made.append(
                ProvisionedInstance(
                    instance_id, launch.name, definition.definition, InstanceState.CREATING, host
                )
            )
        return made

    def _release(self, host: str, name: str) -> None:
        self._holder_file(host).unlink(missing_ok=True)
        (self._machines[host][1] / f"{name}.user-data").unlink(missing_ok=True)

    def delete(self, instance_id: str) -> None:
        """Power off the machine if this instance still holds it; otherwise do nothing."""
        name, _, host = instance_id.partition("@")
        if host not in self._machines or self._holder(host) != name:
            return  # gone already, or a newer instance holds the machine: never touch it
        user_data = self._machines[host][1] / f"{name}.user-data"
        self._run(host, "power-off", name, user_data)
        self._release(host, name)

    def describe(self, instance_id: str) -> ProvisionedInstance | None:
        """The instance while it holds its machine."""
        name, _, host = instance_id.partition("@")
        if host not in self._machines or self._holder(host) != name:
            return None
        return ProvisionedInstance(instance_id, name, "", InstanceState.CREATED, host)

    def list_instances(self) -> Sequence[ProvisionedInstance]:
        """Every machine held by an instance."""
        found = []
        for host in self._machines:
            name = self._holder(host)
            if name is not None:
                found.append(
                    ProvisionedInstance(f"{name}@{host}", name, "", InstanceState.CREATED, host)
                )
        return found
