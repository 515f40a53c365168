"""Workflow files the Federate tests submit: CPU-only, GPU, and one no member can hold."""

from __future__ import annotations


def workflow(cores: int, memory: str, devices: dict[str, int] | None = None) -> str:
    """One job ``main`` asking for ``cores``, ``memory`` and ``devices`` per node."""
    lines = "".join(f"        {kind}: {count}\n" for kind, count in (devices or {}).items())
    devices_block = f"      devices:\n{lines}" if lines else ""
    return (
        "version: v1\n"
        "jobs:\n"
        "  main:\n"
        "    image:\n"
        "      uri: docker://alpine:latest\n"
        "    command: ['/bin/sh', '-c', 'echo hello']\n"
        "    resource:\n"
        "      cpu:\n"
        f"        cores: {cores}\n"
        "      memory:\n"
        f"        size: {memory}\n"
        f"{devices_block}"
    )


CPU = workflow(2, "4GiB")
GPU = workflow(2, "4GiB", {"nvidia.com/gpu": 1})
TOO_BIG = workflow(64, "4GiB", {"nvidia.com/gpu": 1})
