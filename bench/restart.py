"""Orchestrate restarted at scale: 10,000 running jobs held by hollow nodes and 100,000
finished workflows in PostgreSQL.

Steps, from one run: Orchestrate on a fresh PostgreSQL database; ``--nodes`` hollow nodes
(tests/support/hollow.py) that keep every run they are given running; one small workflow run
to its end and then copied ``--finished`` times in SQL (its workflow, stage, run and event
rows: finished workflows as the store holds them); ``--running`` jobs (arrays of 500) placed and
started on the nodes. Then Orchestrate is SIGKILLed and started again, and the benchmark
prints:

* serving again: process start to ``/readyz`` and a ``node list`` answered (target <= 5 s),
  and the CPU seconds Orchestrate spent until then (the wall time on a loaded machine is
  mostly other processes' turns);
* reconciled: restart to every node's stream welcomed again, against one lease period;
* the running jobs still running (none lost to the restart);
* memory: Orchestrate's RSS after the restart against the same process fresh on an empty
  database earlier in the run, per 10,000 finished workflows (target <= 50 MiB).

No peer runs here: the empty database's start is printed beside it. ``--profile DIR``
records py-spy on the restarted Orchestrate from its start until every node is back
(DIR/restart.txt, raw collapsed stacks). Needs root, Debian's postgresql and
docker-registry. Usage:
    python bench/restart.py [--nodes 1000] [--running 10000] [--finished 100000] [--profile DIR]
"""

from __future__ import annotations

import argparse
import time

import sqlalchemy as sa
from hollow_cluster import HollowCluster, cpu_seconds, rss_bytes, spy, unspy

#: the running jobs: arrays of 500 tasks, each within the default window (512) in flight
RUNNING = """
version: v1
jobs:
  zero:
    image: {uri: docker://alpine:latest}
    command: [/bin/true]
    resource: {cpu: {cores: 1}, memory: {size: 64MB}}
    task-array: {start: 1, end: 500}
"""

SMALL = """
version: v1
jobs:
  one:
    image: {uri: docker://alpine:latest}
    command: [/bin/true]
    resource: {cpu: {cores: 1}, memory: {size: 64MB}}
"""


def copy_finished(url: str, template: str, copies: int) -> None:
    """Copy the finished workflow ``template`` ``copies`` times: its workflow, stages, runs
    and events, with new workflow ids (uuids made from md5 of the copy's number)."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    new_id = "(md5('copy-' || g::text)::uuid)::text"
    with engine.begin() as db:

        def columns(table: str) -> list[str]:
            return list(
                db.execute(
                    sa.text(
                        "select column_name from information_schema.columns"
                        " where table_name = :t order by ordinal_position"
                    ),
                    {"t": table},
                ).scalars()
            )

        def clone(table: str, key: str, replace: dict[str, str], source: str) -> None:
            names = [c for c in columns(table) if c != key]
            chosen = [replace.get(c, f"t.{c}") for c in names]
            db.execute(
                sa.text(
                    f"insert into {table} ({', '.join(names)}) select {', '.join(chosen)}"
                    f" from {source}"
                ),
                {"template": template, "copies": copies},
            )

        series = "cross join generate_series(1, :copies) g"
        clone(
            "workflows",
            "",
            {"id": new_id},
            f"workflows t {series} where t.id = :template",
        )
        clone(
            "stages",
            "id",
            {"workflow_id": new_id},
            f"stages t {series} where t.workflow_id = :template",
        )
        clone(
            "runs",
            "id",
            {"workflow_id": "s.workflow_id", "stage_id": "s.id"},
            "runs t join stages ts on ts.id = t.stage_id"
            " join stages s on s.name = ts.name and s.workflow_id <> :template"
            " and s.workflow_id in (select (md5('copy-' || g::text)::uuid)::text"
            " from generate_series(1, :copies) g)"
            " where t.workflow_id = :template",
        )
        clone(
            "events",
            "seq",
            {"workflow_id": new_id},
            f"events t {series} where t.workflow_id = :template",
        )
    engine.dispose()


def expire_rows(url: str, lease: float) -> None:
    """Every READY node's stored lease ends ``lease`` seconds from now."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as db:
        db.execute(
            sa.text(
                "update nodes set lease_expires_at = extract(epoch from now()) + :lease"
                " where status = 'READY'"
            ),
            {"lease": lease},
        )
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--cores", type=int, default=16, help="cores per hollow node")
    parser.add_argument("--running", type=int, default=10_000)
    parser.add_argument("--finished", type=int, default=100_000)
    parser.add_argument("--lease", type=float, default=15.0, help="the lease at the restart")
    parser.add_argument(
        "--setup-lease",
        type=float,
        default=60.0,
        help="the lease while the runs are placed (a loaded machine's hollow nodes miss"
        " heartbeats under a short one, and the arrays fail before the restart)",
    )
    parser.add_argument("--profile", metavar="DIR", help="py-spy the restarted Orchestrate")
    options = parser.parse_args()

    cluster = HollowCluster(lease=options.setup_lease)
    try:
        fresh = cluster.start()
        fresh_cpu = cluster.cpu()
        time.sleep(2)
        empty_rss = rss_bytes(cluster.pid)
        print(
            f"empty database: serving in {fresh:.2f} s ({fresh_cpu:.2f} s CPU),"
            f" RSS {empty_rss / (1 << 20):.0f} MiB"
        )
        cluster.add_nodes(options.nodes, hold_runs="jobs.zero", cores=options.cores)
        cluster.wait_welcomed(options.nodes)
        template = cluster.submit(SMALL, name="finished")
        print(f"template workflow ended {cluster.wait(template)}")
        began = time.perf_counter()
        copy_finished(cluster.config["database"]["url"], template, options.finished)
        print(
            f"{options.finished} finished workflows copied in {time.perf_counter() - began:.1f} s"
        )
        arrays = [
            cluster.submit(RUNNING, name=f"running-{i}") for i in range(options.running // 500)
        ]
        deadline = time.monotonic() + 600
        polls = 0
        while cluster.stats().holding < options.running:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{cluster.stats().holding}/{options.running} runs started")
            status = cluster.status(arrays[polls % len(arrays)])  # one array a poll, in turn
            if status.endswith(("FINISHED", "FAILED", "CANCELED")):
                # nodes lost their leases while the runs were placed (a loaded machine)
                raise RuntimeError(f"an array ended before the restart: {status}")
            polls += 1
            time.sleep(0.5)
        time.sleep(2)  # the last RunStarted reports applied
        print(
            f"{options.running} jobs running on {options.nodes} hollow nodes; killing Orchestrate"
        )

        welcomed_before = cluster.stats().welcomed
        cluster.set_lease(options.lease)  # the restarted Orchestrate grants this one
        cluster.orchestrate.kill()
        restarted = time.monotonic()
        # the rows' leases as Orchestrate under that lease would have left them at best (a
        # heartbeat just written), not the setup's longer ones: the restart gets no grace
        # from the setup's lease
        expire_rows(cluster.config["database"]["url"], options.lease)
        recorder = None

        def profile(pid: int) -> None:
            nonlocal recorder
            recorder = spy(pid, options.profile, "restart")

        serving = cluster.start(timeout=600, started=profile)
        serving_cpu = cluster.cpu()
        rss = rss_bytes(cluster.pid)
        cluster.wait_welcomed(welcomed_before + options.nodes, timeout=600)
        reconciled = cluster.stats().last_welcome - restarted
        reconciled_cpu = cpu_seconds(cluster.pid)
        unspy(recorder)
        time.sleep(options.lease + 2)  # past one lease: nodes that did not make it are offline
        listed = cluster.http.get("/nodes").json().get("nodes", [])
        ready = sum(1 for node in listed if node.get("status") == "READY")
        statuses = sorted({cluster.status(array) for array in arrays})
        per_10k = (rss - empty_rss) / (options.finished / 10_000) / (1 << 20)
        print(
            f"restarted with {options.running} running jobs and {options.finished} finished"
            f" workflows: serving in {serving:.2f} s, {serving_cpu:.2f} s CPU (target <= 5 s;"
            f" empty database {fresh:.2f} s, {fresh_cpu:.2f} s CPU); every node reconnected"
            f" {reconciled:.2f} s after the kill ({reconciled_cpu:.2f} s CPU)"
            f" (lease {options.lease:g} s); {ready}/{options.nodes} nodes READY a lease later;"
            f" {cluster.stats().holding} runs still held by the nodes, the arrays {statuses}"
        )
        print(
            f"RSS after the restart {rss / (1 << 20):.0f} MiB against {empty_rss / (1 << 20):.0f}"
            f" MiB empty: {per_10k:.1f} MiB per 10,000 finished workflows (target <= 50)"
        )
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
