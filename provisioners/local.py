"""The ``local`` provisioner: each instance is a ``fuzzball-substrate`` process on this machine.

The easiest way to try autoscaling (``fuzzball local up --provisioner local``) and what the
provisioning tests run against. An instance is a directory under ``state-dir`` holding the
node's configuration (written from the instance's user data, as cloud-init would), its work
directory, its log and a pid file; so instances outlive Orchestrate's restarts and
:meth:`LocalProvisioner.list_instances` reads them back.

Driver settings (a definition's ``config``):

``state-dir``
    where instances live (required).
``base-config``
    a Fuzzball configuration file whose ``images``, ``tls``, ``health`` and ``plugins``
    sections each node also gets (image mirrors, the cluster CA); optional.
``substrate``
    further ``substrate`` settings for every node (``job-subnet``, ``annotations``, ...).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from fuzzball_core.config import ConfigError, parse_config
from fuzzball_core.drivers import (
    InstanceSpec,
    Launch,
    NodeBootstrap,
    ProvisionedInstance,
    Provisioner,
)
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.vocabulary import InstanceState

#: the sections of ``base-config`` a node gets (not Orchestrate's own: its database, its
#: node token, its provisioner definitions)
NODE_SECTIONS = ("images", "tls", "health", "plugins")
#: how the node process is started: the Substrate's entry point under this Python
SUBSTRATE_MAIN = "from fuzzball_core.substrate.main import main; main()"


def _alive(pid: int, config: Path) -> bool:
    """Whether ``pid`` is a live (not zombie) process started on ``config``: a pid reused by
    a stranger is never signalled."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X") and str(config).encode() in cmdline


#: what a definition's ``config`` holds for this driver
_DEFINITION_KEYS = frozenset({"state-dir", "base-config", "substrate"})


def _where(definition: InstanceSpec) -> str:
    """Where a refusal points: the definition's ``config``, by the definition's id."""
    return f"provisioner definition {definition.definition}: config"


class LocalProvisioner(Provisioner):
    """Substrates as child processes of this machine, one per instance.

    An instance's id is its directory's name; the driver finds it in the state directories
    of the definitions it was shown (:meth:`check_definition` runs for each at start-up, so
    a restarted Orchestrate finds its instances again).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self._state_dirs: list[Path] = []

    def _state_dir(self, definition: InstanceSpec) -> Path:
        state = definition.driver_config.get("state-dir") or self.config.get("state-dir")
        if not state:
            raise InvalidArgument(f"{_where(definition)}: state-dir is required (local)")
        path = Path(str(state)).resolve()
        if path not in self._state_dirs:
            self._state_dirs.append(path)
        return path

    def check_definition(self, definition: InstanceSpec) -> None:
        """A definition needs a ``state-dir``; ``base-config`` must exist when given; its
        ``substrate`` settings must be a Substrate's; no other key is read (a misspelt one
        is refused rather than ignored)."""
        where = _where(definition)
        unknown = sorted(set(definition.driver_config) - _DEFINITION_KEYS)
        if unknown:
            raise InvalidArgument(
                f"{where}: {unknown[0]}: unknown key (local reads "
                f"{', '.join(sorted(_DEFINITION_KEYS))})"
            )
        substrate = definition.driver_config.get("substrate") or {}
        try:
            parse_config({"substrate": substrate}, source=where)
        except ConfigError as exc:
            raise InvalidArgument(exc.message) from None
        self._state_dir(definition)
        base = definition.driver_config.get("base-config")
        if base and not Path(str(base)).is_file():
            raise InvalidArgument(f"{where}: base-config {base} is no file")

    def create(
        self,
        definition: InstanceSpec,
        launches: Sequence[Launch],
        *,
        annotations: Mapping[str, str],
        ttl: float | None = None,
        directives: Mapping[str, str] | None = None,
    ) -> Sequence[ProvisionedInstance]:
        """Write each node's configuration from its user data and start its Substrate."""
        state = self._state_dir(definition)
        base: dict[str, Any] = {}
        if definition.driver_config.get("base-config"):
            loaded = yaml.safe_load(Path(str(definition.driver_config["base-config"])).read_text())
            base = {k: v for k, v in (loaded or {}).items() if k in NODE_SECTIONS}
        made = []
        for launch in launches:
            bootstrap = NodeBootstrap.parse(launch.user_data)
            home = state / launch.name
            home.mkdir(parents=True, exist_ok=False)  # names are never reused
            ca_file = home / "ca.pem"
            if bootstrap.ca_pem:
                ca_file.write_text(bootstrap.ca_pem)
            document = {**base, **bootstrap.config_document(ca_file=str(ca_file))}
            document["substrate"] = {
                "work-dir": str(home / "work"),
                "cores": definition.cores,
                "memory": definition.memory,
                "devices": dict(definition.devices),
                "metrics-listen": "",
                "node-exporter-listen": "",
                **dict(definition.driver_config.get("substrate") or {}),
                **document["substrate"],
            }
            if "tls" in base and "tls" in document:
                document["tls"] = {**base["tls"], **document["tls"]}
            config = home / "config.yaml"
            descriptor = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as out:
                yaml.safe_dump(document, out, sort_keys=False)
            with (home / "substrate.log").open("ab") as log:
                process = subprocess.Popen(
                    [sys.executable, "-c", SUBSTRATE_MAIN, "--config", str(config), "serve"],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # its own group: delete ends its children too
                )
            (home / "pid").write_text(str(process.pid))
            # CREATING, not what /proc says: until the child has exec'd, its cmdline is still
            # this process's, and the instance would look dead
            made.append(
                ProvisionedInstance(
                    home.name,
                    home.name,
                    definition.definition,
                    InstanceState.CREATING,
                    address="127.0.0.1",
                )
            )
        return made

    def _describe(self, home: Path, definition: str = "") -> ProvisionedInstance:
        pid = int((home / "pid").read_text()) if (home / "pid").exists() else 0
        deleted = (home / "deleted").exists()
        alive = pid > 0 and _alive(pid, home / "config.yaml")
        if deleted:
            state = InstanceState.DELETED
        elif alive:
            state = InstanceState.CREATED
        else:
            state = InstanceState.ERROR
        return ProvisionedInstance(
            instance_id=home.name,
            name=home.name,
            definition=definition,
            state=state,
            address="127.0.0.1",
            detail="" if alive or deleted else f"the Substrate exited; see {home}/substrate.log",
        )

    def _home(self, instance_id: str) -> Path | None:
        if not instance_id or "/" in instance_id or instance_id.startswith("."):
            return None
        for state in self._state_dirs:
            if (state / instance_id / "config.yaml").exists():
                return state / instance_id
        return None

    def delete(self, instance_id: str) -> None:
        """Stop the instance's Substrate (SIGTERM, then SIGKILL after 15 s) and mark it
        deleted; an unknown or deleted instance is left as it is."""
        home = self._home(instance_id)
        if home is None or (home / "deleted").exists():
            return
        pid = int((home / "pid").read_text())
        if _alive(pid, home / "config.yaml"):
            os.killpg(pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while _alive(pid, home / "config.yaml") and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid, home / "config.yaml"):
                os.killpg(pid, signal.SIGKILL)
        (home / "deleted").write_text(str(time.time()))

    def describe(self, instance_id: str) -> ProvisionedInstance | None:
        """The instance from its directory; None for one this driver never made."""
        home = self._home(instance_id)
        return None if home is None else self._describe(home)

    def list_instances(self) -> Sequence[ProvisionedInstance]:
        """Every instance not marked deleted, in every state directory known to it."""
        found = []
        for state in self._state_dirs:
            if state.is_dir():
                for home in sorted(state.iterdir()):
                    if (home / "config.yaml").exists() and not (home / "deleted").exists():
                        found.append(self._describe(home))
        return found
