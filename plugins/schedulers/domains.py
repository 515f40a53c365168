"""NVLink domains in the default scheduler: a multinode job kept inside one domain.

Nodes report their domain as the annotation :data:`~fuzzball_core.scheduling.NVLINK_DOMAIN`
(the NVIDIA device plugin sets it from each GPU's fabric cluster and clique). For a job with
a :class:`~fuzzball_core.scheduling.DomainPolicy`, the default scheduler gathers every node
with room for it (in its usual best-fit order) and :func:`choose` picks:

* the domain with enough of them that has the fewest (keeping big domains for big jobs),
  its best-fitting nodes;
* otherwise, for ``prefer``, nodes across domains, the domains with most room first so the
  job spans as few as it can, and a note saying why it spread; for ``require``, nothing (the
  job waits, and :func:`shortfall` words its diagnosis).

:func:`infeasible` answers, for ``require``, whether any domain has enough nodes that could
hold the job when idle.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fuzzball_core.scheduling import NVLINK_DOMAIN, DomainPolicy, JobShape
from fuzzball_plugins.schedulers.node_index import IndexedNode, NodeIndex


def domain_of(node: IndexedNode) -> str | None:
    """The node's NVLink domain, or None when it reports none."""
    return node.info.annotations.get(NVLINK_DOMAIN)


def _by_domain(nodes: Iterable[IndexedNode]) -> dict[str, list[IndexedNode]]:
    grouped: dict[str, list[IndexedNode]] = {}
    for node in nodes:
        domain = domain_of(node)
        if domain is not None:
            grouped.setdefault(domain, []).append(node)
    return grouped


def choose(
    shape: JobShape, candidates: Sequence[IndexedNode]
) -> tuple[list[IndexedNode] | None, str]:
    """``shape.nodes`` of ``candidates`` (every node with room, best fit first) for a job
    with a domain policy, and the note of a spread placement; (None, "") when it must wait."""
    need = shape.nodes
    grouped = _by_domain(candidates)
    fitting = [(len(nodes), domain) for domain, nodes in grouped.items() if len(nodes) >= need]
    if fitting:
        _, domain = min(fitting)
        return grouped[domain][:need], ""
    if shape.domain is DomainPolicy.REQUIRE or len(candidates) < need:
        return None, ""
    if not grouped:  # no node with room reports a domain: nothing to keep together
        return list(candidates[:need]), ""
    ordered = sorted(grouped.items(), key=lambda item: (-len(item[1]), item[0]))
    chosen = [node for _, nodes in ordered for node in nodes]
    chosen += [node for node in candidates if domain_of(node) is None]
    chosen = chosen[:need]
    spanned = len({domain_of(node) for node in chosen})
    return chosen, (
        f"spread over {spanned} NVLink domains ({NVLINK_DOMAIN}): {shortfall(shape, candidates)}"
    )


def shortfall(shape: JobShape, candidates: Sequence[IndexedNode]) -> str:
    """Why no domain takes the job now: ``no NVLink domain has 4 nodes with room (the most:
    2 in d1; 5 in all)``."""
    grouped = _by_domain(candidates)
    text = f"no NVLink domain has {shape.nodes} nodes with room"
    if grouped:
        most, domain = max((len(nodes), domain) for domain, nodes in grouped.items())
        text += f" (the most: {most} in {domain}; {len(candidates)} in all)"
    else:
        text += f" (none of the {len(candidates)} with room reports a domain)"
    return text


def infeasible(index: NodeIndex, shape: JobShape) -> str | None:
    """For a job that requires one domain: why no domain could ever hold it (too few of its
    registered nodes could, when idle), else None."""
    if shape.domain is not DomainPolicy.REQUIRE or shape.nodes <= 1:
        return None
    sizes: dict[str, int] = {}
    for cls in index.classes.values():
        request_key = cls.request_key(shape)
        if (
            request_key is None
            or not cls.matches_annotations(shape)
            or not cls.holds_when_idle(request_key, shape.memory)
        ):
            continue
        for node in cls.members.values():
            domain = domain_of(node)
            if domain is not None:
                sizes[domain] = sizes.get(domain, 0) + 1
    if any(size >= shape.nodes for size in sizes.values()):
        return None
    text = f"job needs {shape.nodes} nodes in one NVLink domain ({NVLINK_DOMAIN})"
    if not sizes:
        return f"{text}; no node that could hold it reports a domain"
    largest, domain = max((size, domain) for domain, size in sizes.items())
    return f"{text}; the largest domain, {domain}, has {largest} that could hold it"
