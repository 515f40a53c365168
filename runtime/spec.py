"""What a container is asked to be (:class:`ContainerSpec`) and what it came to."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from fuzzball_core.errors import InvalidArgument, NotFound

from . import capabilities
from .network import IsolatedNetwork

DEFAULT_STATE_DIR = Path("/run/fuzzball-runtime")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: stdout/stderr target: a pipe the handle exposes as a binary file.
PIPE: Literal["pipe"] = "pipe"
#: stdout/stderr target: /dev/null.
DEVNULL: Literal["devnull"] = "devnull"

#: None inherits the agent's descriptor; a path is a file (truncated); an int is a descriptor.
StreamTarget = Literal["pipe", "devnull"] | str | os.PathLike[str] | int | None


@dataclass(frozen=True)
class Bind:
    """A host path (volume) made visible at ``dst`` inside the container."""

    src: str
    dst: str
    readonly: bool = False

    @classmethod
    def parse(cls, text: str) -> Bind:
        """Parse ``SRC:DST[:ro]`` as given on the command line."""
        parts = text.split(":")
        if len(parts) == 3 and parts[2] in ("ro", "rw"):
            return cls(parts[0], parts[1], parts[2] == "ro")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ValueError(f"bind {text!r}: expected SRC:DST or SRC:DST:ro")
        return cls(parts[0], parts[1])


@dataclass
class ContainerSpec:
    """Everything one job's container needs; only ``image`` and ``command`` are required."""

    image: str | os.PathLike[str]
    command: list[str]
    #: without HOME, the container gets its uid's home from the image's /etc/passwd (as runc)
    env: dict[str, str] = field(default_factory=lambda: {"PATH": DEFAULT_PATH})
    cwd: str = "/"
    hostname: str | None = None
    uid: int = 0
    gid: int = 0
    groups: list[int] = field(default_factory=list)
    #: the capabilities the container's processes may hold (:mod:`fuzzball_runtime.
    #: capabilities` names); every other one leaves the bounding set. None: every one the
    #: agent has
    capabilities: frozenset[str] | None = capabilities.DEFAULT
    binds: list[Bind] = field(default_factory=list)
    #: host device nodes (under /dev) recreated at the same path inside
    devices: list[str] = field(default_factory=list)
    #: memory allocation in bytes: cgroup memory limit and RLIMIT_MEMLOCK
    memory: int | None = None
    #: CPU quota in cores (e.g. 1.5)
    cpus: float | None = None
    #: cpuset of the allocated cores, e.g. "0-1" or "3"
    cpuset: str | None = None
    pids_limit: int | None = None
    #: new network namespace with only lo up
    network: bool = False
    #: the job's own network namespace on the node's bridge: an address, NAT out, exposed
    #: ports (takes precedence over ``network``); None keeps ``network``'s choice
    isolated: IsolatedNetwork | None = None
    #: ports of the node this container serves on the node's network (``tcp/8080``), which
    #: the node's isolated jobs may then reach (they reach no other port of their node)
    node_ports: tuple[str, ...] = ()
    stdin: StreamTarget = None
    stdout: StreamTarget = None
    stderr: StreamTarget = None
    metering: bool = False
    #: drop what the job sends to the clouds' instance metadata addresses, whatever its
    #: network (:mod:`fuzzball_runtime.guard`: an eBPF program on the job's cgroup v2 group;
    #: for an isolated job also the node table's chain): a start that cannot attach it
    #: fails with ``MetadataGuardError`` rather than run the job unguarded
    metadata_guard: bool = False
    state_dir: str | os.PathLike[str] = DEFAULT_STATE_DIR
    #: host directory for the writable layer; None puts it on a per-container tmpfs
    scratch_dir: str | os.PathLike[str] | None = None
    #: /etc/resolv.conf content; None copies the host's (an isolated job's leaves out the
    #: resolvers on the host's loopback, which it cannot reach)
    resolv_conf: str | None = None
    extra_hosts: dict[str, str] = field(default_factory=dict)
    #: jobs with the same key may run in the same cgroups one after the other: this job's
    #: groups are kept after it for the next (and it may take a predecessor's) where
    #: :mod:`fuzzball_runtime.kept` finds that safe; None makes and removes them each time
    keep_cgroups: str | None = None

    def validate(self) -> None:
        """Raise ``InvalidArgument`` / ``NotFound`` naming the first bad field."""
        if not os.path.isfile(self.image):
            raise NotFound(f"spec.image: {os.fspath(self.image)}: no such image file")
        # an empty argument is an argument (sh -c 'echo "[$1]"' sh ""); only the program
        # itself must be named
        if not self.command or not all(isinstance(a, str) for a in self.command):
            raise InvalidArgument("spec.command: must be a non-empty list of strings")
        if not self.command[0]:
            raise InvalidArgument("spec.command[0]: the program to run may not be empty")
        if any("\0" in a for a in self.command):
            raise InvalidArgument("spec.command: arguments may not contain NUL")
        for name, value in self.env.items():
            if not name or "=" in name or "\0" in name or "\0" in value:
                raise InvalidArgument(f"spec.env[{name!r}]: invalid variable name or value")
        if not self.cwd.startswith("/"):
            raise InvalidArgument("spec.cwd: must be an absolute path")
        if self.hostname is not None and not 0 < len(self.hostname.encode()) <= 64:
            raise InvalidArgument("spec.hostname: must be 1 to 64 bytes")
        for label, ident in [("uid", self.uid), ("gid", self.gid)] + [
            (f"groups[{i}]", g) for i, g in enumerate(self.groups)
        ]:
            if not 0 <= ident < 2**32 - 1:
                raise InvalidArgument(f"spec.{label}: must be a numeric id in [0, 2^32-1)")
        for i, bind in enumerate(self.binds):
            if not os.path.isabs(bind.src) or not os.path.isabs(bind.dst):
                raise InvalidArgument(f"spec.binds[{i}]: source and target must be absolute")
            if not os.path.exists(bind.src):
                raise NotFound(f"spec.binds[{i}].src: {bind.src}: no such file or directory")
        for i, device in enumerate(self.devices):
            if not device.startswith("/dev/") or "/../" in device:
                raise InvalidArgument(f"spec.devices[{i}]: {device}: not a path under /dev")
        if self.memory is not None and self.memory <= 0:
            raise InvalidArgument("spec.memory: must be a positive number of bytes")
        if self.cpus is not None and self.cpus <= 0:
            raise InvalidArgument("spec.cpus: must be positive")
        if self.pids_limit is not None and self.pids_limit <= 0:
            raise InvalidArgument("spec.pids_limit: must be positive")
        if self.isolated is not None:
            self.isolated.validate()
        if self.capabilities is not None:
            capabilities.normalized(self.capabilities, "spec.capabilities")

    def needs_cgroups(self) -> bool:
        """Whether any limit, metering or the metadata guard asks for per-job cgroups."""
        return (
            self.memory is not None
            or self.cpus is not None
            or self.cpuset is not None
            or self.pids_limit is not None
            or self.metering
            or self.metadata_guard
        )


@dataclass(frozen=True)
class Metering:
    """Traffic of one job's cgroup, counted by the cgroup_skb programs."""

    ingress_bytes: int
    ingress_packets: int
    egress_bytes: int
    egress_packets: int

    def as_dict(self) -> dict[str, int]:
        """The counters as a JSON-ready mapping."""
        return {
            "ingress_bytes": self.ingress_bytes,
            "ingress_packets": self.ingress_packets,
            "egress_bytes": self.egress_bytes,
            "egress_packets": self.egress_packets,
        }

    def since(self, start: Metering | None) -> Metering:
        """The counts since ``start`` (a reading of the same counters; None: since zero)."""
        if start is None:
            return self
        return Metering(
            self.ingress_bytes - start.ingress_bytes,
            self.ingress_packets - start.ingress_packets,
            self.egress_bytes - start.egress_bytes,
            self.egress_packets - start.egress_packets,
        )


@dataclass(frozen=True)
class ExitStatus:
    """How the command ended: an exit code or a terminating signal, and whether OOM killed it."""

    exit_code: int | None
    signal: int | None
    oom_killed: bool = False
    warnings: tuple[str, ...] = ()

    @classmethod
    def from_wait_status(
        cls, status: int, *, oom_killed: bool = False, warnings: tuple[str, ...] = ()
    ) -> ExitStatus:
        """Decode a waitpid(2) status word."""
        if os.WIFSIGNALED(status):
            return cls(None, os.WTERMSIG(status), oom_killed, warnings)
        return cls(os.waitstatus_to_exitcode(status), None, oom_killed, warnings)

    @property
    def returncode(self) -> int:
        """Shell convention: the exit code, or 128 + the signal number."""
        if self.signal is not None:
            return 128 + self.signal
        # from_wait_status always sets one of the two
        return self.exit_code if self.exit_code is not None else 0

    def describe(self) -> str:
        """One line for logs and the CLI."""
        if self.signal is None:
            text = f"exited with code {self.exit_code}"
        else:
            text = f"killed by {signal.Signals(self.signal).name}"
        return text + (" (out of memory)" if self.oom_killed else "")
