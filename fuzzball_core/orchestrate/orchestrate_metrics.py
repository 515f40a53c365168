"""Orchestrate's own metrics (``GET /v4/metrics``, Prometheus's text format):

* ``fuzzball_node_attributed_job_failures_total{node, reason}``: runs that failed because of
  their node, by reason (``node_lost``: it stopped responding or restarted; ``evicted``; and
  ``start_failed``: the node could not start the command), read from the runs' records, so
  a restart does not reset them; every node has a series per reason from its registration
  on (``increase()`` sees the first failure). The same values are published as the
  deprecated ``fuzzball_scheduler_node_attributed_job_failures_total``.
* ``fuzzball_scheduler_queue_depth`` (runs waiting to be placed), ``fuzzball_scheduler_
  placements_total`` (runs ever placed), ``fuzzball_scheduler_decision_seconds`` and
  ``fuzzball_engine_pass_seconds`` (summaries: count and sum since Orchestrate started),
  ``fuzzball_engine_failed_passes_total``;
* ``fuzzball_engine_dropped_node_reports_total{kind}``: node reports about a run not placed
  on the reporting node, or a volume another node holds, dropped since Orchestrate started,
  by report kind (every kind has a series from the start);
* ``fuzzball_monitoring_hold_ceiling_reached{pool}`` (see
  :mod:`~fuzzball_core.orchestrate.alert_holds`) and ``fuzzball_monitoring_held_nodes{pool}``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    SummaryMetricFamily,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.orchestrate.alert_holds import AlertHolds, pool_of
from fuzzball_core.orchestrate.pass_timings import PassTimings
from fuzzball_core.orchestrate.retries import NODE as NODE_CAUSE
from fuzzball_core.orchestrate.states import DEPROVISIONED
from fuzzball_core.store.models import Node, NodeHold, Run
from fuzzball_core.vocabulary import Status

REASONS = ("node_lost", "evicted", "start_failed")
#: the node reports that name a run or a volume, as ``fuzzball_engine_dropped_node_reports``
#: labels them (the report's kind; ``volume_sizes``: a size an exit report carried)
REPORT_KINDS = ("started", "exited", "log", "ready", "fence", "volume_removed", "volume_sizes")
ATTRIBUTED = "fuzzball_node_attributed_job_failures"
#: the name before v4.4, published with the same values until it is removed
DEPRECATED_ATTRIBUTED = "fuzzball_scheduler_node_attributed_job_failures"


def failure_reason(run: Run) -> str | None:
    """Why a failed run is the node's fault, or None when it is not (its command failed)."""
    if run.failure_cause == NODE_CAUSE:
        return "evicted" if run.message.startswith("evicted") else "node_lost"
    if run.failure_cause is None and run.exit_code is None and run.message:
        return "start_failed"
    return None


class OrchestrateCollector(Collector):
    """Reads the store (and the hold receiver's state) afresh on every scrape."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        holds: AlertHolds | None = None,
        failed_passes: Callable[[], int] = lambda: 0,
        timings: PassTimings | None = None,
        dropped_reports: Callable[[], Mapping[str, int]] = dict,
    ) -> None:
        self.sessions = sessions
        self.holds = holds
        self.failed_passes = failed_passes
        self.timings = timings or PassTimings()
        self.dropped_reports = dropped_reports

    def collect(self) -> Iterator[Metric]:
        """Every family above."""
        with self.sessions() as session:
            node_list = list(session.scalars(select(Node).where(Node.status != DEPROVISIONED)))
            names = {node.id: node.name for node in node_list}
            failures: Counter[tuple[str, str]] = Counter()
            # only runs that may be the node's fault: a command's own failure has its exit code
            failed = session.scalars(
                select(Run).where(
                    Run.status == Status.FAILED,
                    or_(
                        Run.failure_cause == NODE_CAUSE,
                        and_(Run.failure_cause.is_(None), Run.exit_code.is_(None)),
                    ),
                )
            )
            for run in failed:
                reason = failure_reason(run)
                if reason is None:
                    continue
                for node_id in run.node_ids:
                    if node_id in names:
                        failures[names[node_id], reason] += 1
            waiting = session.scalar(
                select(func.count()).select_from(Run).where(Run.status == Status.PENDING)
            )
            placed = session.scalar(
                select(func.count()).select_from(Run).where(Run.assigned_at.is_not(None))
            )
            monitored = set(
                session.scalars(select(NodeHold.node_id).where(NodeHold.source == "monitoring"))
            )
        for family_name, help_text in (
            (ATTRIBUTED, "Job runs that failed because of the node, by reason."),
            (DEPRECATED_ATTRIBUTED, f"Deprecated: the same values as {ATTRIBUTED}."),
        ):
            family = CounterMetricFamily(family_name, help_text, labels=["node", "reason"])
            for name in sorted(names.values()):
                for reason in REASONS:
                    family.add_metric([name, reason], failures[name, reason])
            yield family
        yield GaugeMetricFamily(
            "fuzzball_scheduler_queue_depth", "Runs waiting to be placed.", value=waiting or 0
        )
        yield CounterMetricFamily(
            "fuzzball_scheduler_placements", "Runs placed on nodes.", value=placed or 0
        )
        decisions, passes = self.timings.decisions, self.timings.passes
        yield SummaryMetricFamily(
            "fuzzball_scheduler_decision_seconds",
            "Time the scheduler took to place waiting runs, per engine pass.",
            count_value=decisions.count,
            sum_value=decisions.seconds,
        )
        yield SummaryMetricFamily(
            "fuzzball_engine_pass_seconds",
            "Time engine passes that committed took.",
            count_value=passes.count,
            sum_value=passes.seconds,
        )
        yield CounterMetricFamily(
            "fuzzball_engine_failed_passes",
            "Engine passes that raised since Orchestrate started.",
            value=self.failed_passes(),
        )
        dropped = CounterMetricFamily(
            "fuzzball_engine_dropped_node_reports",
            "Node reports about a run or volume that is not the reporting node's, dropped.",
            labels=["kind"],
        )
        counted = self.dropped_reports()
        for kind in REPORT_KINDS:
            dropped.add_metric([kind], counted.get(kind, 0))
        yield dropped
        held = GaugeMetricFamily(
            "fuzzball_monitoring_held_nodes", "Nodes held by monitoring, per pool.", labels=["pool"]
        )
        pools = Counter(pool_of(node) for node in node_list if node.id in monitored)
        for pool in sorted({pool_of(node) for node in node_list}):
            held.add_metric([pool], pools[pool])
        yield held
        reached = GaugeMetricFamily(
            "fuzzball_monitoring_hold_ceiling_reached",
            "1 while a monitoring hold the ceiling refused is still asked for, per pool.",
            labels=["pool"],
        )
        states = self.holds.ceiling_reached() if self.holds is not None else {}
        for pool in sorted({pool_of(node) for node in node_list} | set(states)):
            reached.add_metric([pool], 1 if states.get(pool) else 0)
        yield reached


def exposition(collector: OrchestrateCollector) -> bytes:
    """The collector's families in Prometheus's text format."""
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry)
