"""Platforms (``os/arch[/variant]``) as OCI image indexes name them, and the node's own."""

from __future__ import annotations

import platform as _platform
from collections.abc import Mapping
from typing import Any

# uname -m -> GOARCH, the vocabulary of OCI image configs and indexes.
_MACHINE_TO_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
    "i686": "386",
}


def node_platform() -> str:
    """The platform images must be built for to run on this node, e.g. ``linux/amd64``."""
    machine = _platform.machine().lower()
    return f"linux/{_MACHINE_TO_ARCH.get(machine, machine)}"


def platform_of(entry: Mapping[str, Any]) -> str:
    """``os/arch[/variant]`` from an index entry's ``platform`` or an image config."""
    os_name = str(entry.get("os", "unknown"))
    arch = str(entry.get("architecture", "unknown"))
    variant = entry.get("variant")
    return f"{os_name}/{arch}/{variant}" if variant else f"{os_name}/{arch}"


def platform_matches(candidate: str, wanted: str) -> bool:
    """True when an image for ``candidate`` runs on ``wanted``.

    A candidate without a variant matches any variant of the same os/arch, and ``wanted``
    without a variant accepts any candidate variant (amd64 has none in practice).
    """
    c_os, c_arch, *c_variant = candidate.split("/")
    w_os, w_arch, *w_variant = wanted.split("/")
    if (c_os, c_arch) != (w_os, w_arch):
        return False
    return not (c_variant and w_variant and c_variant != w_variant)
