"""The REST body of ``GET /v3/nodes``, each node's JSON text kept between lists.

Serializing a node through the proto3 JSON mapping (``ListNodeInfo`` to a dict to text) costs
about a tenth of a millisecond, on the loop that also reads the nodes' streams: a list of
5,000 nodes held it for over half a second, every time. Between two lists most nodes of a
large cluster are unchanged but for ``last_seen``, which a list does not show; so each node's
text is kept with the view it was made from, and made again only when another field of that
view changed.
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
#: a listed node): a view whose other fields are unchanged lists as it did; a field added to
#: the view later counts too, so a cached text cannot miss it
_LISTED_FIELDS = tuple(f.name for f in dataclasses.fields(NodeView) if f.name != "last_seen")
_listed: Callable[[NodeView], tuple[Any, ...]] = operator.attrgetter(*_LISTED_FIELDS)


def node_json(node: NodeView) -> str:
    """One node as the list shows it: its ``ListNodeInfo`` as REST JSON text."""
    return json.dumps(to_json(msg.node_list_message(node)))


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
