"""The REST body of ``GET /v3/nodes``, each node's JSON text kept between lists.

Serializing a node through the proto3 JSON mapping (``ListNodeInfo`` to a dict to text) cost
about 0.4 ms of CPU a node here: the first list of 500 nodes spent 190 ms of it, on the REST
gateway's loop. :func:`node_json` writes the same JSON from the view directly (the fields in
the message's order, as ``MessageToDict`` writes them: 64-bit integers as strings, every
field without presence shown), about 15 µs a node; a node's holds, rarely more than one,
still go through the mapping (their timestamps). And between two lists most nodes of a large
cluster are unchanged but for ``last_seen``, which a list does not show, and the names of
their running stages, of which it shows only the count; so each node's text is kept with the
view it was made from, and made again only when what it shows changed.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable, Iterable
from typing import Any

from fuzzball_core.api import proto_messages as msg
from fuzzball_core.api.rest_messages import to_json
from fuzzball_core.service.views import NodeView

#: every field of a node's view but ``last_seen`` (renewed by each heartbeat, and not part of
#: a listed node) and ``stages`` (listed as their number only): a view whose other fields are
#: unchanged lists as it did; a field added to the view later counts too, so a cached text
#: cannot miss it
_LISTED_FIELDS = tuple(
    f.name for f in dataclasses.fields(NodeView) if f.name not in ("last_seen", "stages")
)
_listed_fields: Callable[[NodeView], tuple[Any, ...]] = operator.attrgetter(*_LISTED_FIELDS)


def _listed(node: NodeView) -> tuple[Any, ...]:
    """What a node's listed text is made of."""
    return (*_listed_fields(node), len(node.stages))


def _resource(cores: int, memory: int, devices: dict[str, int]) -> dict[str, Any]:
    """A ``Resource``'s REST JSON (``mem.bytes`` is an int64: a string)."""
    return {"cpu": {"cores": cores}, "mem": {"bytes": str(memory)}, "devices": devices}


def node_json(node: NodeView) -> str:
    """One node as the list shows it: its ``ListNodeInfo`` as REST JSON text (what
    ``to_json(node_list_message(node))`` makes, written without the message)."""
    devices = dict(node.devices)
    free_devices = {name: count - node.used_devices.get(name, 0) for name, count in devices.items()}
    return json.dumps(
        {
            "id": node.id,
            "hostName": node.name,
            "status": node.status,
            "cores": node.cores,
            "memoryGb": msg.gib(node.memory),
            "devices": sum(devices.values()),
            "runningJobs": len(node.stages),
            "resource": {
                "total": _resource(node.cores, node.memory, devices),
                "free": _resource(
                    node.cores - node.used_cores, node.memory - node.used_memory, free_devices
                ),
                "annotations": dict(node.annotations),
            },
            "holds": [to_json(msg.hold_message(hold)) for hold in node.holds],
        }
    )


class NodeListBody:
    """Makes node lists' bodies, remembering each listed node's text until it changes."""

    def __init__(self) -> None:
        self._texts: dict[str, tuple[tuple[Any, ...], str]] = {}

    def body(self, nodes: Iterable[NodeView]) -> str:
        """The JSON text of a ``ListNodesResponse`` of ``nodes``, in their order: the same
        text ``json.dumps`` makes of the whole message's REST JSON."""
        texts: dict[str, tuple[tuple[Any, ...], str]] = {}
        for node in nodes:
            listed = _listed(node)
            kept = self._texts.get(node.id)
            if kept is None or kept[0] != listed:
                kept = (listed, node_json(node))
            texts[node.id] = kept
        # only the nodes of this list are kept: a removed node's text goes with it
        self._texts = texts
        return '{"nodes": [' + ", ".join(text for _, text in texts.values()) + "]}"
