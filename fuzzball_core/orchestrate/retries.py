"""Whether a failed run of a step runs again (``policy.retry``).

``on`` lists the causes that may retry: ``node`` (the node was lost or an evict hold took the
run off) and exit codes. ``attempts`` is one budget of reruns shared by every cause; reruns
caused by nodes are also capped by the cluster's ``max-eviction-restarts``, and the lower
applies. A step that declares neither ``retry`` nor ``restart`` follows the cluster's default
declaration, if one is configured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fuzzball_core.spec.models import Retry

NODE = "node"
#: Reruns allowed when ``attempts`` is not given.
DEFAULT_ATTEMPTS = 3


@dataclass(frozen=True)
class RetryDecision:
    """``retry`` says whether to run again; ``note`` is the words for the event or failure."""

    retry: bool
    exhausted: bool
    note: str


def retry_rule(definition: Any, cluster_default: Retry | None) -> Retry | None:
    """The rule that applies to a step: its own, or the cluster's when it declares none."""
    policy = getattr(definition, "policy", None)
    if policy is not None and (policy.retry is not None or policy.restart is not None):
        return policy.effective_retry
    return cluster_default if cluster_default is not None and cluster_default.on else None


def decide(
    rule: Retry | None,
    cause: str,
    *,
    reruns: int,
    node_reruns: int,
    max_eviction_restarts: int,
) -> RetryDecision:
    """Decide for a run that failed by ``cause`` (``"node"`` or an exit code as text).

    ``reruns`` counts the step's (or task's) earlier reruns of any cause, ``node_reruns`` those
    caused by nodes.
    """
    listed = {str(c) for c in (rule.on or ())} if rule is not None else set()
    if cause not in listed:
        if cause == NODE:
            return RetryDecision(
                False, False, "set policy.retry.on: [node] to rerun this step when its node is lost"
            )
        return RetryDecision(False, False, "")
    assert rule is not None
    budget = rule.attempts if rule.attempts is not None else DEFAULT_ATTEMPTS
    if cause == NODE:
        budget = min(budget, node_reruns + max(0, max_eviction_restarts - node_reruns))
        if node_reruns >= max_eviction_restarts:
            return RetryDecision(
                False,
                True,
                f"retries exhausted: {node_reruns} node reruns"
                f" reached max-eviction-restarts ({max_eviction_restarts})",
            )
    if reruns >= budget:
        return RetryDecision(
            False,
            True,
            f"retries exhausted after {reruns + 1} attempts (policy.retry.attempts: {budget})",
        )
    return RetryDecision(True, False, f"retrying (attempt {reruns + 2} of {budget + 1})")
