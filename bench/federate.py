"""Federate's routing cost: how many routing decisions per second over many members.

A decision reads the members' cached offers (``federation/capacity.py``: refreshed in the
background, never asked per decision) and has the fit router estimate each member. Each
member has 100 nodes, a third of them with GPUs, some busy, one held, and two provisioner
definitions; the workflow has four jobs (one GPU job). Printed for 10, 100 and 200 members:

* ``cached offers``: decisions as Federate makes them now, over offers built once (the
  workflow's needs read once per workflow, as ``_choose`` does);
* ``fresh needs``: the same, reading the workflow's needs anew each decision (a new mapping
  every time: YAML and the spec's validation included);
* the peer, ``per-node offers``: each member estimated on its own over one entry per node,
  then ranked (how routing went before offers were aggregated by shape and indexed across
  members), measured in the same run.

Run: ``python bench/federate.py``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import replace

from fuzzball_core.api.rest_messages import read_reply
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_federation.offers import MemberOffer, member_offer, node_shape
from fuzzball_federation.routers.fit import FitRouter, MemberEstimate

GIB = 1024**3
NODES = 100
TARGET = 1_000

WORKFLOW = {
    "version": "v1",
    "jobs": {
        f"step{i}": {
            "image": {"uri": "docker://alpine:latest"},
            "command": ["true"],
            "policy": {"timeout": {"execute": "2h"}},
            "resource": {
                "cpu": {"cores": 4 * (i + 1)},
                "memory": {"size": f"{8 * (i + 1)}GiB"},
                **({"devices": {"nvidia.com/gpu": 1}} if i == 3 else {}),
            },
        }
        for i in range(4)
    },
}

DEFINITIONS = [
    {
        "id": "m5-8xlarge",
        "resource": {"total": {"cpu": {"cores": 32}, "mem": {"bytes": str(128 * GIB)}}},
        "costPerHourEstimate": 1.5,
        "startupTimeEstimate": "240",
    },
    {
        "id": "p4d",
        "resource": {
            "total": {
                "cpu": {"cores": 96},
                "mem": {"bytes": str(1152 * GIB)},
                "devices": {"nvidia.com/gpu": 8},
            },
            "annotations": {"nvidia.com/gpu.model": "A100"},
        },
        "costPerHourEstimate": 32.0,
        "startupTimeEstimate": "600",
    },
]


def _node(index: int, gpus: int, *, busy: bool, held: bool) -> pb.ListNodeInfo:
    """A node of a member's ``GET /v3/nodes`` listing, as Federate's client reads it."""
    devices = {"nvidia.com/gpu": gpus} if gpus else {}
    total = {"cpu": {"cores": 32}, "mem": {"bytes": str(128 * GIB)}, "devices": devices}
    free = {"cpu": {"cores": 8}, "mem": {"bytes": str(32 * GIB)}, "devices": {}} if busy else total
    listed = {
        "hostName": f"n{index}",
        "status": "READY",
        "resource": {"total": total, "free": free, "annotations": {}},
        "holds": [{"effect": "cordon", "source": "admin"}] if held else [],
    }
    return read_reply(listed, pb.ListNodeInfo)


def _member(index: int) -> MemberOffer:
    gpus = 4 if index % 3 == 0 else 0
    nodes = [_node(n, gpus, busy=n % 10 == 0, held=n == 1) for n in range(NODES)]
    labels = {"price-per-hour": str(0.1 * (index % 7))}
    return member_offer(f"c{index}", labels, nodes, DEFINITIONS, fetched_at=time.time())


def _per_node(offer: MemberOffer, nodes: list[pb.ListNodeInfo]) -> MemberOffer:
    """``offer`` with one shape per ready node: the pre-aggregation peer."""
    return replace(offer, nodes=tuple(node_shape(n) for n in nodes if not n.holds))


def _peer_decide(router: FitRouter, offers: list[MemberOffer]) -> list[str]:
    """The peer: each member estimated on its own over one shape per node, then ranked (how
    routing went before offers were aggregated by shape and indexed across members)."""
    estimates = [router.estimate(WORKFLOW, offer) for offer in offers]
    eligible = [e for e in estimates if not isinstance(e, str)]
    return [e.name for e in sorted(eligible, key=MemberEstimate.rank)]


def _rate(decide: Callable[[], object], seconds: float = 1.0) -> float:
    """Decisions per second over about ``seconds``."""
    decide()  # warm
    count, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        decide()
        count += 1
    return count / elapsed


def main() -> None:
    router = FitRouter({})
    for members in (10, 100, 200):
        offers = [_member(m) for m in range(members)]
        listings = [
            [_node(n, 4 if m % 3 == 0 else 0, busy=n % 10 == 0, held=n == 1) for n in range(NODES)]
            for m in range(members)
        ]
        per_node = [_per_node(o, nodes) for o, nodes in zip(offers, listings, strict=True)]
        chosen = router.decide(WORKFLOW, offers).chosen
        cached = _rate(lambda offers=offers: router.decide(WORKFLOW, offers))
        fresh = _rate(lambda offers=offers: router.decide(copy.deepcopy(WORKFLOW), offers))
        peer = _rate(lambda per_node=per_node: _peer_decide(router, per_node))
        verdict = "meets" if cached >= TARGET else "misses"
        print(
            f"fit router, {members} members x {NODES} nodes ({len(chosen)} eligible):"
            f" cached offers {cached:,.0f} decisions/s ({verdict} target {TARGET:,}/s);"
            f" fresh needs {fresh:,.0f}/s; peer per-node offers {peer:,.0f}/s"
        )


if __name__ == "__main__":
    main()
