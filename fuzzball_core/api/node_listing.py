"""The REST body of ``GET /v3/nodes``, each node's JSON text kept between lists.

Serializing a node through the proto3 JSON mapping (``ListNodeInfo`` to a dict to text) cost
about 0.4 ms of CPU a node here: the first list of 500 nodes spent 190 ms of it, on the REST
gateway's loop. :func:`node_json` writes the same JSON from the view directly (the fields in
the message's order, as ``MessageToDict`` writes them: 64-bit integers as strings, every
field without presence shown), about 15 µs a node; a node's holds, rarely more than one,
still go through the mapping (their timestamps). And between two lists most nodes of a large
cluster are unchanged but for ``last_seen``, which a list does not show, and the names of
their running stages, of which it shows only the count; so each node's text is kept with the
view it was made from, and made again only when what it shows changed. While an array runs,
though, every node's usage changes between two lists: what a node's text shows of it (the
running jobs' count and the free resources) is put between its kept parts each time, the
free resources' text made once for the nodes that have as much free.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from fuzzball_core.api import proto_messages as msg
from fuzzball_core.api.rest_messages import to_json
from fuzzball_core.service.views import NodeView

#: the fields of a node's view its listed text shows as they are: every field but
#: ``last_seen`` (renewed by each heartbeat, and not part of a listed node), ``stages``
#: (listed as their number only) and what the scheduler uses of the node (its free
#: resources, which change with every run started or ended there); a field added to the view
#: later counts too, so a kept text cannot miss it
_FIXED_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(NodeView)
    if f.name not in ("last_seen", "stages", "used_cores", "used_memory", "used_devices")
)
_fixed_fields: Callable[[NodeView], tuple[Any, ...]] = operator.attrgetter(*_FIXED_FIELDS)


def _resource(cores: int, memory: int, devices: Mapping[str, int]) -> dict[str, Any]:
    """A ``Resource``'s REST JSON (``mem.bytes`` is an int64: a string)."""
    return {"cpu": {"cores": cores}, "mem": {"bytes": str(memory)}, "devices": dict(devices)}


class _NodeText(NamedTuple):
    """A node's listed text but for what its usage changes: the text is ``head``, its
    running jobs' count, ``middle``, its free resources' JSON, ``tail``."""

    head: str
    middle: str
    tail: str


class _Texts:
    """JSON texts many nodes of one list share (their total resources and annotations: most
    nodes of a cluster have the same, often none), made once each: a first list of 5,000
    nodes made them a node."""

    def __init__(self) -> None:
        self._made: dict[tuple[Any, ...], str] = {}

    def total(self, cores: int, memory: int, devices: Mapping[str, int]) -> str:
        key = ("total", cores, memory, *devices.items())
        text = self._made.get(key)
        if text is None:
            text = self._made[key] = json.dumps(_resource(cores, memory, devices))
        return text

    def annotations(self, annotations: Mapping[str, str]) -> str:
        key = ("annotations", *annotations.items())
        text = self._made.get(key)
        if text is None:
            text = self._made[key] = json.dumps(dict(annotations))
        return text


def _node_text(node: NodeView, shared: _Texts | None = None) -> _NodeText:
    """The parts of ``node``'s listed text that its usage does not change (those it shares
    with other nodes from ``shared``)."""
    shared = shared or _Texts()
    devices = dict(node.devices)
    head = json.dumps(
        {
            "id": node.id,
            "hostName": node.name,
            "status": node.status,
            "cores": node.cores,
            "memoryGb": msg.gib(node.memory),
            "devices": sum(devices.values()),
        }
    )
    total = shared.total(node.cores, node.memory, devices)
    annotations = shared.annotations(node.annotations)
    # most nodes have none: "[]" without the encoder
    holds = json.dumps([to_json(msg.hold_message(h)) for h in node.holds]) if node.holds else "[]"
    return _NodeText(
        # json.dumps writes ", " and ": " between items, as it would for the whole node
        head[:-1] + ', "runningJobs": ',
        ', "resource": {"total": ' + total + ', "free": ',
        ', "annotations": ' + annotations + '}, "holds": ' + holds + "}",
    )


def _free(node: NodeView) -> tuple[int, int, tuple[tuple[str, int], ...]]:
    """What is free on ``node``: cores, memory and each of its device kinds."""
    used = node.used_devices
    return (
        node.cores - node.used_cores,
        node.memory - node.used_memory,
        tuple((name, count - used.get(name, 0)) for name, count in node.devices.items()),
    )


def _free_json(free: tuple[int, int, tuple[tuple[str, int], ...]]) -> str:
    cores, memory, devices = free
    return json.dumps(_resource(cores, memory, dict(devices)))


def node_json(node: NodeView) -> str:
    """One node as the list shows it: its ``ListNodeInfo`` as REST JSON text (what
    ``to_json(node_list_message(node))`` makes, written without the message)."""
    text = _node_text(node)
    return text.head + str(len(node.stages)) + text.middle + _free_json(_free(node)) + text.tail


class _Kept(NamedTuple):
    """A listed node's text, and what it was made of."""

    fixed: tuple[Any, ...]
    parts: _NodeText
    #: the used cores, memory and devices and the running jobs' count
    usage: tuple[Any, ...]
    text: str
    #: the view it was made from (or last found unchanged from)
    view: NodeView


class NodeListBody:
    """Makes node lists' bodies, remembering each listed node's text and its parts until
    they change, and the free resources' texts: while jobs start and end across a cluster
    most busy nodes' usage changes between two lists, and a node's text made whole each time
    cost 19 µs (10 ms a list of 500), against 2-3 µs put together from its kept parts."""

    def __init__(self) -> None:
        self._texts: dict[str, _Kept] = {}
        #: the last body and the views it was made of (replaced whole)
        self._last: tuple[Sequence[NodeView], str] = ((), "")
        #: one body made at a time (the list worker makes them on several threads): each
        #: starts from the texts the one before kept
        self._making = threading.Lock()

    def body(self, nodes: Sequence[NodeView]) -> str:
        """The JSON text of a ``ListNodesResponse`` of ``nodes``, in their order: the same
        text ``json.dumps`` makes of the whole message's REST JSON."""
        # the last body's, without waiting for one being made (the list worker's GETs are
        # mostly given the views of the list it made ahead of them)
        text = self._last_of(nodes)
        if text is not None:
            return text
        with self._making:
            text = self._last_of(nodes)  # made meanwhile
            if text is None:
                text = self._body(nodes)
                self._last = (tuple(nodes), text)  # the caller's list may change after
            return text

    def _last_of(self, nodes: Sequence[NodeView]) -> str | None:
        """The last body's text when ``nodes`` are the very views it was made of (the
        service lists unchanged nodes with their last views; views never change): not
        5,000 nodes' texts joined again."""
        views, text = self._last
        if text and len(views) == len(nodes) and all(map(operator.is_, nodes, views)):
            return text
        return None

    def _body(self, nodes: Sequence[NodeView]) -> str:
        """The body of ``nodes`` made from each node's kept text or parts."""
        texts: dict[str, _Kept] = {}
        # most nodes of a cluster have as much free as many others (none, or all of it)
        frees: dict[tuple[int, int, tuple[tuple[str, int], ...]], str] = {}
        shared = _Texts()
        for node in nodes:
            kept = self._texts.get(node.id)
            if kept is not None and kept.view is node:
                # the same view as the last list's (the service keeps unchanged nodes' views)
                texts[node.id] = kept
                continue
            fixed = _fixed_fields(node)
            usage = (node.used_cores, node.used_memory, node.used_devices, len(node.stages))
            if kept is not None and kept.fixed == fixed:
                if kept.usage == usage:
                    # kept with this view: the next list finds it by identity
                    texts[node.id] = _Kept(fixed, kept.parts, usage, kept.text, node)
                    continue
                parts = kept.parts
            else:
                parts = _node_text(node, shared)
            free = _free(node)
            free_json = frees.get(free)
            if free_json is None:
                free_json = frees[free] = _free_json(free)
            text = parts.head + str(usage[3]) + parts.middle + free_json + parts.tail
            texts[node.id] = _Kept(fixed, parts, usage, text, node)
        # only the nodes of this list are kept: a removed node's text goes with it
        self._texts = texts
        return '{"nodes": [' + ", ".join(kept.text for kept in texts.values()) + "]}"
