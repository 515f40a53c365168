"""The test "boot" hook: what a cloud machine does when it starts, done on this machine.

The cloud stand-ins (moto's server for EC2, :mod:`support.gcp_standin`,
:mod:`support.oci_standin`) keep instances as records; none starts a machine. :class:`BootHook`
watches one stand-in through its API, as an operator's console would: for each new instance it
reads the instance's user data back from the cloud (EC2's ``DescribeInstanceAttribute
userData``, the ``user-data`` / ``user_data`` metadata) and does what cloud-init would do with
it: write the configuration and CA file it carries and start ``fuzzball-substrate`` on them.
When the cloud says the instance is terminated or gone, the Substrate is killed, as the
machine's power going off would.

Nothing but the user data tells the node where Orchestrate is, what its name is and which token
to register with: the hook adds only what this machine needs to share itself among several
nodes (a work directory, resource limits, the registry mirror, no metrics ports).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzzball_core.drivers import NodeBootstrap
from fuzzball_runtime import sweep
from support.cluster import SubstrateProcess, write_config


@dataclass(frozen=True)
class CloudView:
    """How the hook sees one cloud: ``instances()`` maps each instance id to whether it is
    up (True) or terminated (False; absent when gone), ``user_data(id)`` reads its user data."""

    instances: Callable[[], Mapping[str, bool]]
    user_data: Callable[[str], str]


def ec2_view(moto: Any) -> CloudView:
    """EC2 (moto) as the hook sees it."""
    return CloudView(
        instances=lambda: {
            i: state in ("pending", "running") for i, state in moto.states().items()
        },
        user_data=moto.user_data,
    )


def gcp_view(standin: Any) -> CloudView:
    """Compute Engine (the stand-in) as the hook sees it."""
    return CloudView(
        instances=lambda: {
            f"{zone}/{name}": status in ("PROVISIONING", "STAGING", "RUNNING")
            for (zone, name), status in standin.statuses().items()
        },
        user_data=lambda key: standin.user_data(*key.split("/", 1)),
    )


def oci_view(standin: Any) -> CloudView:
    """OCI (the stand-in) as the hook sees it."""
    return CloudView(
        instances=lambda: {
            i: state in ("PROVISIONING", "STARTING", "RUNNING")
            for i, state in standin.states().items()
        },
        user_data=standin.user_data,
    )


class BootHook:
    """Boots every instance the cloud starts as a Substrate process here, until closed."""

    def __init__(
        self,
        directory: Path,
        cloud: CloudView,
        *,
        substrate: Mapping[str, Any] | None = None,
        base: Mapping[str, Any] | None = None,
        interval: float = 0.2,
    ) -> None:
        """``substrate``: this machine's share for each node (cores, memory); ``base``: the
        other sections each node's configuration also gets (``images`` mirrors)."""
        self.directory = directory
        self.cloud = cloud
        self.substrate = dict(substrate or {})
        self.base = dict(base or {})
        self.interval = interval
        #: instance id -> its Substrate (killed ones stay, so a test can read their logs)
        self.nodes: dict[str, SubstrateProcess] = {}
        #: instance id -> the directory the node lived in
        self.homes: dict[str, Path] = {}
        #: instance ids whose machines were powered off because the cloud terminated them
        self.powered_off: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # the test reads errors; the hook keeps watching
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(self.interval)

    def poll(self) -> None:
        """Boot the instances that appeared, power off those the cloud terminated."""
        instances = self.cloud.instances()
        for instance_id, up in instances.items():
            if up and instance_id not in self.nodes:
                self.boot(instance_id, self.cloud.user_data(instance_id))
        for instance_id, node in self.nodes.items():
            gone = not instances.get(instance_id, False)
            if gone and instance_id not in self.powered_off:
                node.kill()
                self.powered_off.append(instance_id)

    def boot(self, instance_id: str, user_data: str) -> SubstrateProcess:
        """Do what cloud-init does with ``user_data``: write its files, start the node."""
        bootstrap = NodeBootstrap.parse(user_data)
        home = self.directory / instance_id.replace("/", "_")
        home.mkdir(parents=True)
        ca_file = home / "ca.pem"
        if bootstrap.ca_pem:
            ca_file.write_text(bootstrap.ca_pem)
        document = {**self.base, **bootstrap.config_document(ca_file=str(ca_file))}
        document["substrate"] = {
            "work-dir": str(home / "work"),
            "metrics-listen": "",
            "node-exporter-listen": "",
            **self.substrate,
            **document["substrate"],
        }
        config = write_config(home / "config.yaml", document)
        config.chmod(0o600)
        node = SubstrateProcess(config, home / "substrate.log")
        self.homes[instance_id] = home
        self.nodes[instance_id] = node
        return node

    def logs(self) -> str:
        """Every node's log so far."""
        return "\n".join(
            (home / "substrate.log").read_text(errors="replace")
            for home in self.homes.values()
            if (home / "substrate.log").exists()
        )

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for instance_id, node in self.nodes.items():
            node.stop()
            with contextlib.suppress(OSError):
                sweep(self.homes[instance_id] / "work" / "runtime")


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``condition`` until it returns something true; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {timeout}s")
        time.sleep(0.1)
