"""The Linux capabilities a container's processes may hold (``ContainerSpec.capabilities``).

Every capability outside the container's set leaves its bounding set before its PID 1 starts
the command (``csrc/init.c``), so a job running as root is not root over the node: no
mounts, no kernel modules, no network configuration, no eBPF, no raw packets. The default is
Podman's set, what most images that run as root need (``chown``, writing files another user
owns, switching users, binding ports below 1024).
"""

from __future__ import annotations

from collections.abc import Iterable

from fuzzball_core.errors import InvalidArgument

#: capability name (as ``capabilities(7)`` spells it, less ``CAP_``) -> its number
NUMBERS: dict[str, int] = {
    name: number
    for number, name in enumerate(
        (
            "CHOWN",
            "DAC_OVERRIDE",
            "DAC_READ_SEARCH",
            "FOWNER",
            "FSETID",
            "KILL",
            "SETGID",
            "SETUID",
            "SETPCAP",
            "LINUX_IMMUTABLE",
            "NET_BIND_SERVICE",
            "NET_BROADCAST",
            "NET_ADMIN",
            "NET_RAW",
            "IPC_LOCK",
            "IPC_OWNER",
            "SYS_MODULE",
            "SYS_RAWIO",
            "SYS_CHROOT",
            "SYS_PTRACE",
            "SYS_PACCT",
            "SYS_ADMIN",
            "SYS_BOOT",
            "SYS_NICE",
            "SYS_RESOURCE",
            "SYS_TIME",
            "SYS_TTY_CONFIG",
            "MKNOD",
            "LEASE",
            "AUDIT_WRITE",
            "AUDIT_CONTROL",
            "SETFCAP",
            "MAC_OVERRIDE",
            "MAC_ADMIN",
            "SYSLOG",
            "WAKE_ALARM",
            "BLOCK_SUSPEND",
            "AUDIT_READ",
            "PERFMON",
            "BPF",
            "CHECKPOINT_RESTORE",
        )
    )
}

#: Podman's default set (containers.conf ``default_capabilities``)
DEFAULT: frozenset[str] = frozenset(
    {
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)

#: the one name that keeps every capability the agent has (nothing dropped)
ALL = "ALL"

#: the C side's "nothing dropped" mask
EVERY = (1 << 64) - 1


def normalized(names: Iterable[str], field: str) -> frozenset[str] | None:
    """The capability set ``names`` spell (``CAP_`` optional, any case); None for ``ALL``.
    InvalidArgument naming ``field`` and each unknown name."""
    spelled = [str(n).strip().upper().removeprefix("CAP_") for n in names]
    if ALL in spelled:
        if len(spelled) > 1:
            raise InvalidArgument(f"{field}: ALL keeps every capability; list nothing beside it")
        return None
    unknown = [n for n in spelled if n not in NUMBERS]
    if unknown:
        raise InvalidArgument(
            f"{field}: unknown capabilit{'y' if len(unknown) == 1 else 'ies'}"
            f" {', '.join(unknown)} (capabilities(7) names, e.g. CHOWN or CAP_CHOWN)"
        )
    return frozenset(spelled)


def configured(names: Iterable[str] | None, field: str) -> frozenset[str] | None:
    """The set a setting (``field``) names: :data:`DEFAULT` when it is unset, None for
    ``ALL``; InvalidArgument naming ``field`` and each unknown name."""
    return DEFAULT if names is None else normalized(names, field)


def mask(kept: frozenset[str] | None) -> int:
    """The C side's mask of ``kept`` (bit N: capability N); :data:`EVERY` for None."""
    if kept is None:
        return EVERY
    return sum(1 << NUMBERS[name] for name in kept)
