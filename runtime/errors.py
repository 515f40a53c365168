"""Typed failures and warnings of the node runtime.

Every C entry point fills a ``struct fbrt_error`` (errno plus what was attempted, in words);
:func:`fuzzball_runtime.native.check` turns it into a :class:`RuntimeFailure` carrying both.
"""

from __future__ import annotations

import errno as errno_codes

from fuzzball_core.errors import Internal


class RuntimeFailure(Internal):
    """A kernel operation the runtime needed failed; ``errno`` says how, the message what."""

    def __init__(self, message: str, *, errno: int = errno_codes.EIO) -> None:
        super().__init__(message)
        self.errno = errno


class ContainerStartError(RuntimeFailure):
    """The container could not be set up or its command could not be executed."""


class MetadataGuardError(ContainerStartError):
    """The instance metadata guard (:mod:`fuzzball_runtime.guard`) cannot be attached to a
    job's group, or does not work on this host: the job is not started without it."""


class MeteringError(RuntimeFailure):
    """The eBPF metering programs could not be created, loaded or attached."""


class NetworkError(RuntimeFailure):
    """An isolated job's network (its namespace, veth, address, NAT or ports) could not be set
    up or released."""


class PortInUse(NetworkError):
    """A port a job exposes is already forwarded to another job on this node."""


class AbiMismatch(ImportError):
    """The compiled C module implements another ABI version than this package calls."""


class RuntimeWarningMessage(UserWarning):
    """A job started, but not exactly as asked (e.g. a clamped RLIMIT_MEMLOCK, no metering)."""
