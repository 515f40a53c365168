"""Fixtures: ``onprem`` and ``aws`` members and a Federate in front of them (see the harness)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.federation_harness import (
    GIB,
    Federation,
    MemberCluster,
    start_federation,
    start_member,
)


@pytest.fixture
def members(tmp_path) -> Iterator[list[MemberCluster]]:
    """``onprem`` (4 cores, 16 GiB, 2 GPUs) and ``aws`` (two nodes of 16 cores, 64 GiB)."""
    onprem = start_member(
        tmp_path,
        "onprem",
        [{"name": "gpu-1", "cores": 4, "memory": 16 * GIB, "devices": {"nvidia.com/gpu": 2}}],
    )
    aws = start_member(
        tmp_path,
        "aws",
        [
            {"name": "cpu-1", "cores": 16, "memory": 64 * GIB},
            {"name": "cpu-2", "cores": 16, "memory": 64 * GIB},
        ],
    )
    try:
        yield [onprem, aws]
    finally:
        onprem.close()
        aws.close()


@pytest.fixture
def federation(tmp_path, members) -> Iterator[Federation]:
    """Federate in front of ``onprem`` and ``aws`` with the fit router."""
    running = start_federation(tmp_path, members)
    try:
        yield running
    finally:
        running.close()
