"""Federate's routing cost: how long the fit router takes to choose among many members.

Prints routing decisions per second for a four-job workflow (one GPU job) over 10, 50 and
200 member clusters of 100 nodes each, a third of them with GPUs. Run:
``python bench/federate.py``.
"""

from __future__ import annotations

import time

from fuzzball_core.api.rest_messages import read_reply
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_federation.offers import member_offer
from fuzzball_federation.routers.fit import FitRouter

GIB = 1024**3

WORKFLOW = {
    "version": "v1",
    "jobs": {
        f"step{i}": {
            "image": {"uri": "docker://alpine:latest"},
            "command": ["true"],
            "resource": {
                "cpu": {"cores": 4 * (i + 1)},
                "memory": {"size": f"{8 * (i + 1)}GiB"},
                **({"devices": {"nvidia.com/gpu": 1}} if i == 3 else {}),
            },
        }
        for i in range(4)
    },
}


def _node(index: int, gpus: int) -> pb.ListNodeInfo:
    """A node of a member's ``GET /v3/nodes`` listing, as Federate's client reads it."""
    devices = {"nvidia.com/gpu": gpus} if gpus else {}
    resource = {"cpu": {"cores": 32}, "mem": {"bytes": str(128 * GIB)}, "devices": devices}
    listed = {
        "hostName": f"n{index}",
        "status": "READY",
        "resource": {"total": resource, "free": resource, "annotations": {}},
    }
    return read_reply(listed, pb.ListNodeInfo)


def main() -> None:
    router = FitRouter({})
    for members in (10, 50, 200):
        offers = [
            member_offer(f"c{m}", {}, [_node(n, 4 if m % 3 == 0 else 0) for n in range(100)])
            for m in range(members)
        ]
        rounds = 20
        started = time.perf_counter()
        for _ in range(rounds):
            chosen = router.route(WORKFLOW, offers)
        elapsed = time.perf_counter() - started
        print(
            f"fit router: {members} members x 100 nodes: {rounds / elapsed:.1f} decisions/s"
            f" ({elapsed / rounds * 1000:.2f} ms each; {len(chosen)} eligible)"
        )


if __name__ == "__main__":
    main()
