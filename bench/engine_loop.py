"""The engine's own CPU per hello-world, without agents or containers.

A scripted node (the engine tests' harness, SQLite in a temporary directory) runs hello-world
workflows one after another: submission and its pass, the run's start, one line of output
and its exit applied in one pass. Prints the process's CPU and the SQL statements per workflow
(the statements do not depend on the machine's load; CPU under load does, less than the
end-to-end bench's figures, which include the agents on the same two cores). Compare trees
by putting each on PYTHONPATH in turn.
Usage: python bench/engine_loop.py [--workflows 300] [--warm-up 30]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS / "orchestrate"), str(TESTS)]  # support/ and the engine harness

from conftest import Harness, build_harness  # noqa: E402
from sqlalchemy import event  # noqa: E402
from support.engine_workflows import HELLO  # noqa: E402

from fuzzball_core.api.v1 import node_pb2  # noqa: E402


def hello_world(harness: Harness, node: str) -> None:
    """One hello-world from submission to FINISHED, its node played by hand."""
    workflow_id = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    harness.start(node, assignment.run_id)
    harness.report(node, log=node_pb2.LogData(run_id=assignment.run_id, data=b"hi\n"))
    harness.exit(node, assignment.run_id)
    harness.engine.step()
    if harness.status(workflow_id) != "FINISHED":
        raise AssertionError(f"workflow {workflow_id} is {harness.status(workflow_id)}")


def main() -> None:
    """Run the workflows and print the CPU per workflow."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=300)
    parser.add_argument("--warm-up", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        harness = build_harness(f"sqlite:///{data}/engine.db")
        node = harness.node("n1", cores=64)
        for _ in range(args.warm_up):
            hello_world(harness, node)
        statements = [0]

        def count(*_args: object) -> None:
            statements[0] += 1

        bind = harness.engine.sessions.kw["bind"]
        event.listen(bind, "before_cursor_execute", count)
        started = time.process_time()
        for _ in range(args.workflows):
            hello_world(harness, node)
        spent = time.process_time() - started
        event.remove(bind, "before_cursor_execute", count)
    print(
        f"engine loop: {spent / args.workflows * 1e3:.2f} ms of CPU and"
        f" {statements[0] / args.workflows:.1f} SQL statements per hello-world"
        f" ({args.workflows} workflows, scripted node, SQLite)"
    )


if __name__ == "__main__":
    main()
