"""Whether a failed run of a step runs again (``policy.retry``).

``on`` lists the causes that may retry: ``node`` (the node was lost or an evict hold took the
run off) and exit codes. ``attempts`` is one budget of reruns shared by every cause; reruns
caused by nodes are also capped by the cluster's ``max-eviction-restarts``, and the lower
applies. A step that declares neither ``retry`` nor ``restart`` follows the cluster's default
declaration, if one is configured.

:func:`decide` is the rule itself; :func:`retry_or_explain` applies it to a failed run in
the engine's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from fuzzball_core.orchestrate import events, placement
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.transaction import Transaction, task_label
from fuzzball_core.spec.models import Retry
from fuzzball_core.store.models import Run, Stage, Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES, EventKind, Status

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


def decision_for(
    ctx: EngineContext, tx: Transaction, run: Run, stage: Stage, cause: str
) -> RetryDecision:
    """Whether the failed ``run`` runs again: its step's rule against the earlier failures
    of the same step (or task)."""
    workflow = tx.session.get(Workflow, run.workflow_id)
    if workflow is None or workflow.status in TERMINAL_STATUSES:
        return RetryDecision(False, False, "")
    rule = retry_rule(ctx.plans.run_definition(workflow, stage.name), ctx.default_retry)
    earlier = select(Run.failure_cause).where(
        Run.stage_id == stage.id,
        Run.id != run.id,
        Run.status == Status.FAILED,
        Run.task_id.is_(None) if run.task_id is None else Run.task_id == run.task_id,
    )
    causes = list(tx.session.scalars(earlier))
    return decide(
        rule,
        cause,
        reruns=len(causes),
        node_reruns=sum(1 for c in causes if c == NODE),
        max_eviction_restarts=ctx.max_eviction_restarts,
    )


def retry_or_explain(
    ctx: EngineContext,
    tx: Transaction,
    run: Run,
    stage: Stage,
    *,
    cause: str,
    message: str,
    was_started: bool,
) -> str | None:
    """A run failed by ``cause``: run it again if its rule says so (None), or return the
    failure's message with the rule's note (``retries exhausted``, or how to retry)."""
    decision = decision_for(ctx, tx, run, stage, cause)
    node_id = run.node_ids[0] if run.node_ids else None
    if decision.retry:
        events.record(
            tx,
            EventKind.RETRIED,
            f"{stage.name}{task_label(run)}: {message}; {decision.note}",
            workflow_id=run.workflow_id,
            stage_name=stage.name,
            node_id=node_id,
            cause=cause,
            task_id=run.task_id,
            attempt=run.attempt + 1,
        )
        if was_started and stage.task_count is not None:
            stage.tasks_running = max(0, stage.tasks_running - 1)
        workflow = tx.session.get(Workflow, run.workflow_id)
        if workflow is not None:
            stage.attempt = max(stage.attempt, run.attempt + 1)
            placement.new_runs(ctx, tx, workflow, stage, [run.task_id], attempt=run.attempt + 1)
        return None
    if decision.exhausted:
        events.record(
            tx,
            EventKind.RETRIES_EXHAUSTED,
            f"{stage.name}{task_label(run)}: {decision.note}",
            workflow_id=run.workflow_id,
            stage_name=stage.name,
            node_id=node_id,
            cause=cause,
            task_id=run.task_id,
        )
    return f"{message}; {decision.note}" if decision.note else message
